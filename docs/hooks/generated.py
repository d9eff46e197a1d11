"""MkDocs hook: the option and CLI reference tables, generated from the code's definitions when the site is
built, so the documentation cannot disagree with the code.

A page marks where a table goes with ``<!-- generated: NAME -->``; NAME is ``read-options``,
``stream-options``, ``write-options`` or ``cli``. ``tests/test_docs.py`` renders the same markers.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def render(name: str) -> str:
    from rocketstore_spark.spark.option_spec import markdown_table
    from rocketstore_spark.spark.options import READ_SPEC

    if name == "read-options":
        return markdown_table(READ_SPEC, "read")
    if name == "stream-options":
        return markdown_table([s for s in READ_SPEC if "read" not in s.scopes], "stream")
    if name == "write-options":
        from rocketstore_spark.spark.write_options import WRITE_SPEC

        return markdown_table(WRITE_SPEC, "write")
    if name == "cli":
        from rocketstore_spark.cli.reference import markdown_reference

        return markdown_reference()
    raise ValueError(f"unknown generated section {name!r}")


def on_page_markdown(markdown: str, **kwargs) -> str:
    return MARKER.sub(lambda m: render(m.group(1)), markdown)
