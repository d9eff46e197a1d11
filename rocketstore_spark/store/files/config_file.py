"""The broker's JSON config files (``ConfigManager``): a file that is missing or blank counts as absent, so the
caller falls back to its ``.bak`` copy as ``ConfigManager.load`` does; unparsable text is a
:class:`~rocketstore_spark.errors.StoreFormatError` naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from ...errors import StoreFormatError

BACKUP_SUFFIX = ".bak"  # MixAll.string2File / ConfigManager.persist keep the previous file under this suffix


def config_text(path: Path) -> Optional[str]:
    """The file's text; None when it is missing or holds only whitespace."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return text if text.strip() else None


def config_object(path: Path, what: str, table: str, remedy: str = "",
                  parse: Callable[[str], object] = json.loads) -> Optional[dict]:
    """The JSON object of the file at ``path`` (None when absent, see :func:`config_text`), checked to hold a
    ``table`` object; ``what`` names the file's content and ``remedy`` what to do in errors, ``parse`` turns
    the text into objects (``json.loads``; fastjson's text needs its own)."""
    text = config_text(path)
    if text is None:
        return None
    try:
        payload = parse(text)
    except ValueError as e:
        raise StoreFormatError(f"expected {what} as JSON, found unparsable text ({e})"
                               + (f"; {remedy}" if remedy else ""), path) from e
    if not isinstance(payload, dict) or not isinstance(payload.get(table, {}), dict):
        found = type(payload).__name__ if not isinstance(payload, dict) else repr(payload.get(table))[:80]
        raise StoreFormatError(f"expected a JSON object with a '{table}' object, found {found}", path)
    return payload
