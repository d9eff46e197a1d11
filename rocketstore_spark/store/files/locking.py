"""The store's ``lock`` file: an exclusive POSIX record lock, as the broker takes it.

``DefaultMessageStore`` writes the four bytes ``lock`` into the file and holds ``FileChannel.tryLock(0, 1,
false)``: an fcntl record lock on the first byte. Taking the same lock makes a running broker and any other
rocketstore writer (another process, or another writer in this process) fail fast.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from pathlib import Path

from ...errors import StoreLockedError
from ..format.layout import LOCK_FILE
from .disk_full import disk_full_error, is_disk_full

_LOCK_CONTENT = b"lock"
_held_in_process: set[str] = set()  # fcntl locks do not conflict within one process, so track them here
_guard = threading.Lock()
# ``struct flock`` as ``F_GETLK`` fills it: l_type, l_whence, l_start, l_len, l_pid (native alignment)
_FLOCK = "hhqqi"


def store_lock_held(root) -> bool:
    """Whether a process (a running broker, or a writer) holds ``<root>/lock`` now, asked without taking it:
    ``F_GETLK`` reports a conflicting lock and leaves the file and its locks as they are. A writer of this
    process counts too (its lock is never probed: closing any descriptor of the file would drop it)."""
    path = Path(root) / LOCK_FILE
    try:
        key = str(path.resolve())
    except OSError:
        return False
    with _guard:
        if key in _held_in_process:
            return True
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # no lock file: no broker ever opened the store here
            return False
        try:
            probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
        except OSError:
            return False
        finally:
            os.close(fd)
    return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK


class StoreLock:
    """An acquired lock on ``<store>/lock``; :meth:`release` frees it."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, root: Path) -> "StoreLock":
        path = Path(root) / LOCK_FILE
        key = str(path.resolve())
        with _guard:
            if key in _held_in_process:
                raise StoreLockedError(f"store {root} is already open for writing in this process ({path})")
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as e:
                os.close(fd)
                raise StoreLockedError(
                    f"store {root} is locked by another process (a running broker or another writer holds "
                    f"{path}); stop it or write to another directory") from e
            try:
                os.pwrite(fd, _LOCK_CONTENT, 0)
            except OSError as e:  # the lock is not kept: nothing was written
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
                os.close(fd)
                if is_disk_full(e):
                    raise disk_full_error(e, path, "the store lock") from e
                raise
            _held_in_process.add(key)
        return cls(path, fd)

    def release(self) -> None:
        with _guard:
            if self._fd < 0:
                return
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = -1
                _held_in_process.discard(str(self.path.resolve()))
