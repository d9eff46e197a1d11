"""Stores on object storage and HDFS: one filesystem per (scheme, bucket), its listings, and retried range reads.

A remote store is named by URI (``s3://bucket/archive/broker-a/store``); inside the file layer it is a
:class:`~.remote_path.RemotePath` whose ``exists``/``is_dir``/``iterdir``/``stat``/``open`` go to the bucket's
:class:`RemoteFilesystem` (``pyarrow.fs``), registered when the store is opened.

Cost model: a directory is listed once per open of the store (``consumequeue/`` with one recursive listing for
all its queues) and its entries answer every later ``stat``/``is_dir``; bytes come by ranged GETs
(:meth:`RemoteFilesystem.read_range`), retried on transient errors, and an error that outlasts the retries names
the object, the offset and what the server said. Credentials come from the options or the provider's standard
chain (environment, profile, instance metadata) and are never part of a message.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

from ...errors import RemoteReadError, StoreNotFoundError
from .file_reads import STATS
from .remote_clients import GCS_SCHEMES, NAMENODE_SCHEMES, REMOTE_SCHEMES, FsOptions, bucket_root, connect, redacted

RETRY_BACKOFF_S = 0.2  # first pause between attempts; doubled each time


@dataclass
class RemoteEntry:
    """One listed object or directory, shaped like ``os.DirEntry`` for the file layer's listings."""

    name: str
    path: str  # the full URI
    size: int
    directory: bool
    mtime_ns: int = 0

    def is_dir(self) -> bool:
        return self.directory

    def is_file(self) -> bool:
        return not self.directory

    def stat(self):
        return SimpleNamespace(st_size=self.size, st_mtime_ns=self.mtime_ns, st_blocks=(self.size + 511) // 512,
                               st_mode=0o40755 if self.directory else 0o100644)


class RemoteFilesystem:
    """One bucket (or HDFS namenode) and the listings made of it since the store was last opened."""

    def __init__(self, scheme: str, authority: str, options: FsOptions):
        self.scheme, self.authority, self.options = scheme, authority, options
        self.fs = connect(scheme, authority, options)
        self.root = bucket_root(scheme, authority, options)
        self._listings: dict[str, dict[str, RemoteEntry]] = {}
        self._listed_at: dict[str, float] = {}  # when each listing was made (time.monotonic)
        self._lock = threading.Lock()

    def uri(self, key: str) -> str:
        return f"{self.scheme}://{self.authority}/{key}".rstrip("/")

    def object_path(self, key: str) -> str:
        """What pyarrow calls the object: ``bucket/key`` for object stores (``container/key`` on Azure), ``/key``
        on HDFS (and through WebHDFS)."""
        if self.scheme in NAMENODE_SCHEMES:
            return "/" + key
        return f"{self.root}/{key}".rstrip("/") if self.root else key

    def forget(self, max_age: float = 0.0) -> None:
        """Drop the listings older than ``max_age`` seconds: the next question lists again (a store re-opened, a
        streaming trigger). A plan checks whether the store changed and then opens it: the second keeps the
        first's fresh listings."""
        cutoff = time.monotonic() - max_age
        with self._lock:
            self._listings = {k: v for k, v in self._listings.items() if self._listed_at.get(k, 0) > cutoff}

    def list_dir(self, key: str) -> Optional[dict[str, RemoteEntry]]:
        """The entries of directory ``key`` by name (None when it is no directory). ``consumequeue/`` and
        ``batchconsumequeue/`` are listed recursively in one go: every queue directory is then known."""
        with self._lock:
            if key in self._listings:
                return self._listings[key]
        from pyarrow import fs as pafs

        # GCS: pyarrow lists one level with includeTrailingDelimiter and reads only the items, so a "directory"
        # shows only when a marker object (``dir/``) exists, which gsutil/gcloud uploads do not write: every
        # listing there is recursive, the directories implied by the keys, and one listing answers the subtree
        recursive = self.scheme in GCS_SCHEMES or key.rsplit("/", 1)[-1] in ("consumequeue", "batchconsumequeue")
        selector = pafs.FileSelector(self.object_path(key), recursive=recursive, allow_not_found=True)
        infos = self.call(lambda: self.fs.get_file_info(selector), key)
        base = self.object_path(key).rstrip("/") + "/"
        tree: dict[str, dict[str, RemoteEntry]] = {key: {}}
        for info in infos:
            rel = info.path[len(base):] if info.path.startswith(base) else info.base_name
            parent, _, name = (key + "/" + rel).rpartition("/")
            is_dir = info.type == pafs.FileType.Directory
            entry = RemoteEntry(name, self.uri(parent + "/" + name), 0 if is_dir else int(info.size or 0), is_dir,
                                int(info.mtime_ns or 0))
            tree.setdefault(parent, {})[name] = entry
            if is_dir:
                tree.setdefault(parent + "/" + name, {})
            # object stores imply the directories of a key: add those a recursive listing did not return
            while recursive and parent != key:
                up, _, dname = parent.rpartition("/")
                siblings = tree.setdefault(up, {})
                if dname in siblings:
                    break
                siblings[dname] = RemoteEntry(dname, self.uri(parent), 0, True)
                parent = up
        if not infos and not self._exists_as_dir(key):
            return None
        with self._lock:
            now = time.monotonic()
            for k in (tree if recursive else (key,)):
                self._listings[k] = tree[k]
                self._listed_at[k] = now
            return self._listings[key]

    def _exists_as_dir(self, key: str) -> bool:
        from pyarrow import fs as pafs

        info = self.call(lambda: self.fs.get_file_info(self.object_path(key)), key)
        return info.type == pafs.FileType.Directory

    def entry(self, key: str) -> Optional[RemoteEntry]:
        """The entry of ``key`` from its directory's listing (None when absent)."""
        parent, _, name = key.rpartition("/")
        if not name:
            return RemoteEntry("", self.uri(key), 0, True) if self.list_dir(key) is not None else None
        if not parent:  # a key at the bucket's top level: no parent listing to look in
            return RemoteEntry(name, self.uri(key), 0, True) if self._exists_as_dir(key) else None
        listing = self.list_dir(parent)
        return None if listing is None else listing.get(name)

    def read_range(self, key: str, start: int, length: int, handle=None) -> bytes:
        """``length`` bytes of object ``key`` from ``start``, retried; a short answer (the object shrank or
        vanished under the read) is an error naming the object and offset."""
        def get():
            f = handle if handle is not None else self.fs.open_input_file(self.object_path(key))
            return f.read_at(length, start)

        data = self.call(get, key, start)
        STATS.remote_requests += 1
        STATS.remote_bytes += len(data)
        if len(data) != length:
            raise RemoteReadError(f"expected {length} bytes from offset {start} of {self.uri(key)}, found "
                                  f"{len(data)} (the object is shorter than when it was listed: changed or "
                                  "truncated under the read)", self.uri(key), start)
        return data

    def open_input(self, key: str):
        return self.call(lambda: self.fs.open_input_file(self.object_path(key)), key)

    def call(self, request, key: str, offset: Optional[int] = None):
        """Run ``request`` with bounded retries of transient errors; a missing object fails at once."""
        pause = RETRY_BACKOFF_S
        for attempt in range(self.options.retries + 1):
            try:
                return request()
            except FileNotFoundError as e:
                raise StoreNotFoundError(f"{self.uri(key)} does not exist (removed or never uploaded?): "
                                         f"{redacted(e, self.options)}") from e
            except (OSError, ValueError) as e:  # pyarrow reports network and HTTP errors as OSError
                if attempt == self.options.retries or _permanent(e):
                    where = f" at offset {offset}" if offset is not None else ""
                    raise RemoteReadError(f"reading {self.uri(key)}{where} failed after {attempt + 1} attempt(s): "
                                          f"{redacted(e, self.options)}", self.uri(key), offset) from e
                time.sleep(pause)
                pause *= 2
        raise AssertionError("unreachable")


def _permanent(error: Exception) -> bool:
    if isinstance(error, PermissionError):
        return True
    text = str(error).lower()
    return any(s in text for s in ("access denied", "accessdenied", "403", "nosuchbucket", "invalidaccesskey",
                                    "signaturedoesnotmatch", "authenticationfailed", "authorizationfailure",
                                    "containernotfound", "permission_denied"))


_FILESYSTEMS: dict[tuple[str, str], RemoteFilesystem] = {}
_REGISTRY_LOCK = threading.Lock()


def register(scheme: str, authority: str, options: Optional[FsOptions]) -> RemoteFilesystem:
    """The filesystem of ``scheme://authority`` with ``options`` (one per process; new options replace it;
    None keeps the registered ones, or uses the defaults)."""
    with _REGISTRY_LOCK:
        found = _FILESYSTEMS.get((scheme, authority))
        if found is None or (options is not None and found.options != options):
            options = options if options is not None else FsOptions()
            found = _FILESYSTEMS[(scheme, authority)] = RemoteFilesystem(scheme, authority, options)
        return found


def filesystem_of(scheme: str, authority: str) -> RemoteFilesystem:
    found = _FILESYSTEMS.get((scheme, authority))
    if found is None:  # a path that reached a process without its store being opened there: default settings
        found = register(scheme, authority, None)
    return found


__all__ = ["FsOptions", "RemoteFilesystem", "RemoteEntry", "register", "filesystem_of", "REMOTE_SCHEMES"]
