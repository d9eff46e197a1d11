"""A full disk (``ENOSPC``) or a used-up quota (``EDQUOT``) while writing, as :class:`~...errors.DiskFullError`.

Every place that writes a store file wraps the write in :func:`disk_full`, which names the file and what was being
written; the entry points (staging, publishing, appending) add what the store holds now and what to do
(:func:`with_advice`).
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from typing import Optional

from ...errors import DiskFullError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


def _reason(error: OSError) -> str:
    return "quota exceeded (EDQUOT)" if error.errno == errno.EDQUOT else "no space left on device (ENOSPC)"


def disk_full_error(error: OSError, path, what: str) -> DiskFullError:
    where = path if path is not None else error.filename
    return DiskFullError(f"the disk is full: {_reason(error)} while writing {what}",
                         None if where is None else os.fspath(where))


@contextmanager
def disk_full(path, what: str):
    """Raise :class:`DiskFullError` (chained) for a full disk or quota inside the block; other errors pass."""
    try:
        yield
    except OSError as e:
        if is_disk_full(e):
            raise disk_full_error(e, path, what) from e
        raise


def with_advice(error: BaseException, advice: str, what: str = "the store") -> Optional[DiskFullError]:
    """``error`` (a :class:`DiskFullError` or a full-disk ``OSError``) as a :class:`DiskFullError` whose message
    ends with ``advice``; None when ``error`` is no full disk. Raise it ``from`` the original ``OSError``."""
    if isinstance(error, DiskFullError):
        out = DiskFullError(f"{error.args[0] if error.args else error}; {advice}")
        out.path = error.path
        return out
    if is_disk_full(error):
        first = disk_full_error(error, None, what)
        out = DiskFullError(f"{first.args[0]}; {advice}")
        out.path = first.path
        return out
    return None


def os_cause(error: BaseException) -> BaseException:
    """The ``OSError`` a :class:`DiskFullError` was raised from (the error itself otherwise)."""
    return error.__cause__ if isinstance(error, DiskFullError) and error.__cause__ is not None else error


__all__ = ["DISK_FULL_ERRNOS", "disk_full", "disk_full_error", "is_disk_full", "with_advice", "os_cause"]
