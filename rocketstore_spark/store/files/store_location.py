"""Where a store lives: a local (or mounted) directory, given as a path or a ``file://`` URI, or a remote URI
(``s3://``, ``s3a://``, ``gs://``, ``hdfs://``, ``webhdfs://``, ``abfs://``), which is read through ``pyarrow.fs``
(see :mod:`.remote_fs`) and never written.

Writers get an error for a remote URI that says why and what to do instead, rather than "no such directory" for
a path the local filesystem mangled.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from ...errors import StoreNotFoundError, UnsupportedLocationError
from ..format import layout as L
from .remote_fs import REMOTE_SCHEMES, FsOptions, register
from .remote_path import RemotePath
from .variant import dledger_logs

LOCAL_SCHEME = "file"
# "scheme:/" or "scheme://": a pathlib.Path collapses the double slash, so both spellings must be recognised
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def location_scheme(location) -> str | None:
    """The URI scheme of ``location`` in lower case, or None for a plain path."""
    match = _SCHEME.match(os.fspath(location))
    return match.group(1).lower() if match else None


def store_path(location, fs_options=None) -> Path:
    """The directory ``location`` names, for reading: a local ``Path``, or a :class:`RemotePath` whose bucket's
    filesystem is registered with ``fs_options`` (see :class:`~.remote_fs.FsOptions`) and whose listings are
    fresh (a store opened again sees the objects as they are now)."""
    text = os.fspath(location) if not isinstance(location, RemotePath) else str(location)
    scheme = location_scheme(text)
    if scheme not in REMOTE_SCHEMES:
        return local_store_path(text)
    parsed = urlparse(text if "://" in text else text.replace(":/", "://", 1))
    if not parsed.netloc:
        raise UnsupportedLocationError(f"{text}: expected {scheme}://<bucket or host>/<path to the store>")
    filesystem = register(scheme, parsed.netloc, None if fs_options is None else FsOptions.parse(fs_options))
    filesystem.forget()
    return RemotePath(f"{scheme}://{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/"))


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
    if scheme in REMOTE_SCHEMES:
        raise UnsupportedLocationError(
            f"{text}: this operation needs a local or mounted directory (remote stores are read through "
            f"RocketStore.open / spark.read / the CLI's read commands); copy the store to a local directory")
    raise UnsupportedLocationError(
        f"{text}: unknown scheme {scheme}://; expected a local path, file://, or one of "
        + ", ".join(f"{s}://" for s in REMOTE_SCHEMES))


def resolve_store_root(path, fs_options=None) -> Path:
    """The store directory for ``path`` (a broker home holding ``store/`` is accepted too); a remote URI's
    filesystem is set up with ``fs_options``."""
    root = store_path(path, fs_options)
    if not root.exists():
        raise StoreNotFoundError(f"store path {root} does not exist; expected a RocketMQ store directory "
                                 "(the broker's storePathRootDir, holding commitlog/ and consumequeue/)")
    if not root.is_dir():
        raise StoreNotFoundError(f"store path {root} is a file; expected a RocketMQ store directory holding "
                                 "commitlog/ and consumequeue/")
    # a store whose commit log is elsewhere (storePathCommitLog) still has its queues or checkpoint here
    has_log = lambda d: ((d / L.COMMITLOG_DIR).is_dir() or bool(dledger_logs(d))  # noqa: E731
                         or (d / L.CONSUMEQUEUE_DIR).is_dir() or (d / L.CHECKPOINT_FILE).is_file())
    if not has_log(root) and has_log(root / "store"):
        root = root / "store"
    if not has_log(root):
        raise StoreNotFoundError(f"{root} is not a RocketMQ store: expected a {L.COMMITLOG_DIR}/ directory in it "
                                 "(or a DLedger log dledger-<selfId>/data/)")
    return root


__all__ = ["local_store_path", "location_scheme", "store_path", "resolve_store_root"]
