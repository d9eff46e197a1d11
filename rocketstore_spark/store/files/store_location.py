"""Where a store lives: a local (or mounted) directory, given as a path or a ``file://`` URI — or a remote URI
(object storage, HDFS), which this version neither reads nor writes.

Spark users name data by URI (``s3a://bucket/...``, ``hdfs://nn/...``), so a remote URI gets an error that says
why and what to do instead, rather than "no such directory" for a path the local filesystem mangled.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from ...errors import UnsupportedLocationError

LOCAL_SCHEME = "file"
# "scheme:/" or "scheme://": a pathlib.Path collapses the double slash, so both spellings must be recognised
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def location_scheme(location) -> str | None:
    """The URI scheme of ``location`` in lower case, or None for a plain path."""
    match = _SCHEME.match(os.fspath(location))
    return match.group(1).lower() if match else None


def local_store_path(location, *, writing: bool = False) -> Path:
    """The local directory ``location`` names (``~`` expanded, ``file://`` URIs accepted); a remote URI raises
    :class:`UnsupportedLocationError` explaining why (for ``writing``: why a store is only ever written locally)."""
    text = os.fspath(location)
    scheme = location_scheme(text)
    if scheme is None:
        return Path(text).expanduser()
    if scheme == LOCAL_SCHEME:
        parsed = urlparse(text if "://" in text else text.replace(":/", ":///", 1))
        if parsed.netloc not in ("", "localhost"):
            raise UnsupportedLocationError(f"{text}: a file:// URI must name a local path (file:///path), "
                                           f"found host {parsed.netloc!r}")
        return Path(unquote(parsed.path))
    if writing:
        raise UnsupportedLocationError(
            f"{text}: rocketstore writes stores only to a local or mounted (NFS) directory. A broker serves a store "
            f"only from its local disk, and the all-or-nothing commit needs POSIX record locks and atomic renames, "
            f"which {scheme}:// does not offer. Write to a local or NFS directory, then copy the finished store "
            f"(aws s3 sync, gsutil rsync, hdfs dfs -put, azcopy)")
    raise UnsupportedLocationError(
        f"{text}: this version reads stores only from a local or mounted directory, not from {scheme}://; copy "
        f"the store to a directory every executor mounts at the same path (a shared volume or NFS), or mount the "
        f"bucket (s3fs, gcsfuse, blobfuse, an HDFS NFS gateway) and pass that path")


__all__ = ["local_store_path", "location_scheme"]
