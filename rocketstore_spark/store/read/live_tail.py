"""``LiveTail``: the ends of every queue of a live store, followed from one streaming trigger to the next.

Checking every queue's tail on every trigger costs a file read and a record check per queue: seconds for
20,000 queues, for a trigger that usually finds nothing new. Every message reaches the commit log before any
consume queue, and the broker dispatches the commit log in order, so the first call checks every queue (and
notes where in the commit log the dispatched records end) and later calls only

* walk the commit log from where the last call stopped (nothing new: one record header read),
* re-check the queues the new records went to, plus the queues whose units had not arrived yet (dispatch lags
  behind the commit log), listing only their directories; new queues are found the same way.

A queue's end is :meth:`StoreReader.complete_queue_end`'s, exactly as a full check would give it. A walk too long
to be worth it (a large backlog), or a commit log that went backwards (a replaced store), makes the call check
every queue again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..files.byte_source import as_path, forget_listings
from ..files.commitlog import END_BLANK, CommitLog
from ..files.mapped_file_queue import MappedFileQueue, list_offset_files
from ..files.sizes import StoreSizes, detect_sizes
from ..format import layout as L
from ..format.columns import build_batch
from .store_reader import StoreReader, resolve_store_root

MAX_WALK_BYTES = 256 << 20  # past this many new commit-log bytes, checking every queue is cheaper than walking
NO_LIMIT = 1 << 62


class LiveTail:
    """Queue ends of the live store at ``root``; :meth:`ends` is called once per trigger."""

    def __init__(self, root: Path, sizes: StoreSizes, wants_topic: Callable[[str], bool] = lambda t: True):
        self.root = as_path(root)
        self.sizes = sizes
        self.wants_topic = wants_topic
        self._ends: dict[tuple[str, int], int] = {}
        self._pending: dict[tuple[str, int], int] = {}  # queue → end its records imply, units not all there yet
        self._position: Optional[int] = None  # commit-log offset up to which records are accounted for
        self.full_checks = 0  # how many calls checked every queue (the first, and fallbacks)
        self._walked: Optional[tuple] = None  # (commit-log offsets, sizes) of the records the last walk checked

    def ends(self) -> dict:
        """topic → str(queue id) → next offset whose units and records are complete (wanted topics only)."""
        forget_listings(self.root)  # a remote store being synced: list what is there now
        if self._position is None or not self._follow():
            self._check_all()
        out: dict = {}
        for (topic, qid), end in sorted(self._ends.items()):
            out.setdefault(topic, {})[str(qid)] = end
        return out

    @classmethod
    def open(cls, path, wants_topic: Callable[[str], bool] = lambda t: True, fs_options=None,
             **sizes) -> "LiveTail":
        """A tail follower for the store at ``path`` (sizes detected as :meth:`StoreReader.open` does)."""
        root = resolve_store_root(path, fs_options)
        return cls(root, detect_sizes(root, **sizes), wants_topic)

    # --- the first call (and fallbacks): every queue -----------------------------------------------------

    def _check_all(self) -> None:
        self.full_checks += 1
        with StoreReader(self.root, self.sizes, valid_end=NO_LIMIT) as store:
            ends, position = {}, 0
            for topic in store.topics():
                if not self.wants_topic(topic):
                    continue
                for qid in store.queue_ids(topic):
                    end = store.complete_queue_end(topic, qid)
                    ends[(topic, qid)] = end
                    if end > 0:
                        position = max(position, _unit_end(store, topic, qid, end))
        self._ends, self._pending, self._position = ends, {}, position

    # --- later calls: the commit log's new records, and the queues they name ----------------------------

    def _follow(self) -> bool:
        """Bring the ends up to date from the commit log; False when checking every queue is needed."""
        # a cut copy's last file is short (a broker's never is): it ends where its bytes do
        commitlog = CommitLog(MappedFileQueue(self.root / L.COMMITLOG_DIR, self.sizes.commit_log_file_size,
                                              cut_last=True, gaps=True))
        try:
            if commitlog.queue.files and self._position > commitlog.queue.end_offset:
                return False  # the commit log went backwards: another store now
            records = self._new_records(commitlog)
        finally:
            commitlog.queue.close()
        if records is None:
            return False
        for key, expected in records.items():
            if self.wants_topic(key[0]) and expected > self._ends.get(key, 0):
                self._pending[key] = max(expected, self._pending.get(key, 0))
        if self._pending:
            self._recheck(list(self._pending))
        return True

    def _new_records(self, commitlog: CommitLog) -> Optional[dict]:
        """(topic, queue id) → queue offset after its newest dispatchable record past the known position; moves
        the position to the end of the valid records. None when the walk would be too long."""
        found: dict = {}
        files = commitlog.queue.files
        walked_at, walked_size = [], []
        self._walked = None
        while True:
            index = commitlog.queue.index_of(self._position)
            if index < 0:
                return found  # at the end of the last file (or no file yet): nothing new
            start = self._position - files[index].from_offset
            if _data_beyond(commitlog, index, start, MAX_WALK_BYTES):
                return None
            walk = commitlog.walk_file(index, start=start, check_crc=True)
            if len(walk):
                fields = walk.fields_at()
                walked_at.append(files[index].from_offset + fields.position)
                walked_size.append(fields.total_size)
                tran = fields.sysflag & L.TRANSACTION_TYPE_MASK
                keep = np.flatnonzero((tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT_TYPE))
                batch = build_batch(commitlog.queue.buffer(index), fields.take(keep), ("topic", "queueId"))
                for topic, qid, offset in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(),
                                              fields.queue_offset[keep].tolist()):
                    found[(topic, qid)] = max(found.get((topic, qid), 0), offset + 1)
            self._position = files[index].from_offset + walk.end_position
            if walk.end_kind != END_BLANK or index + 1 >= len(files):
                self._walked = (np.concatenate(walked_at), np.concatenate(walked_size)) if walked_at else None
                return found
            self._position = files[index + 1].from_offset

    def _was_walked(self, phy_offset: int, size: int) -> bool:
        if self._walked is None:
            return False
        at, sizes = self._walked
        i = int(np.searchsorted(at, phy_offset))
        return i < len(at) and int(at[i]) == phy_offset and int(sizes[i]) == size

    def _recheck(self, keys: list) -> None:
        """Complete ends of ``keys``' queues, listing only their directories."""
        base = self.root / L.CONSUMEQUEUE_DIR
        listing = [(base / t / str(q), list_offset_files(base / t / str(q))) for t, q in keys]
        with StoreReader(self.root, self.sizes, valid_end=NO_LIMIT, listing=listing) as store:
            for key in keys:
                if not store.has_queue(*key):
                    continue  # not dispatched yet: its directory does not exist
                cq = store.consume_queue(*key)
                last = cq.last_unit()
                # a last unit pointing at a record this call's walk checked is complete: no second check
                end = cq.max_offset if last is not None and self._was_walked(*last) else \
                    store.complete_queue_end(*key)
                self._ends[key] = max(end, self._ends.get(key, 0))
                if self._ends[key] >= self._pending[key]:
                    del self._pending[key]


def _unit_end(store: StoreReader, topic: str, qid: int, end: int) -> int:
    """``phy_offset + size`` of unit ``end - 1`` of a queue (0 for a filler unit)."""
    unit = store.consume_queue(topic, qid).units(end - 1, end)
    if not len(unit) or int(unit["size"][0]) == L.CQ_FILLER_SIZE:
        return 0
    return int(unit["phy_offset"][0]) + int(unit["size"][0])


def _data_beyond(commitlog: CommitLog, index: int, start: int, distance: int) -> bool:
    """Whether data reaches ``distance`` bytes past ``start`` (a cheap test of the backlog's size): the 256
    bytes there are not all zero. Written data is contiguous and preallocated space is zeros; a header always
    has non-zero fields within that span, and zeros inside a long body only make the walk longer, never
    wrong."""
    target = commitlog.queue.files[index].from_offset + start + distance
    at = commitlog.queue.index_of(target)
    if at < 0:
        return False
    pos = target - commitlog.queue.files[at].from_offset
    commitlog.queue.ensure(at, pos, pos + 256)
    return bool(commitlog.queue.buffer(at)[pos:pos + 256].any())


__all__ = ["LiveTail", "MAX_WALK_BYTES"]
