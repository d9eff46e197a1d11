"""Finding the valid end of a store the way ``CommitLog.recoverNormally`` / ``recoverAbnormally`` do.

Nothing is modified: the result says where the commit log ends, which consume-queue units survive and which
records past the consume queues' end the real store would re-dispatch when it opens the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..files.checkpoint import Checkpoint
from ..files.commitlog import END_INVALID, CommitLog, FileWalk
from ..files.consume_queue import ConsumeQueue
from ..format import layout as L

MODE_NORMAL = "normal"
MODE_ABNORMAL = "abnormal"


@dataclass
class RecoveryResult:
    """What recovery found: the valid end of the commit log and how it got there."""

    mode: str
    start_file_index: int
    valid_end: int
    stop_problem: str = ""  # why the scan stopped at an invalid record ("" at a clean end of data)
    stop_file: Optional[str] = None
    walks: list[FileWalk] = field(default_factory=list, repr=False)
    reindex_from: Optional[int] = None  # re-dispatch indexes the walked records from here (None: none)


@dataclass(frozen=True)
class LostRange:
    """Messages of one queue that the store no longer holds: consume-queue units on disk that point into a
    commit-log file missing between the first and the last (the broker's ``getMessage`` finds no file there and
    skips them), or at or past the commit log's valid end (a cut or short last file, files missing at the end, a
    torn record), which recovery drops as the broker's ``truncateDirtyLogicFiles`` does and re-dispatch does not
    write back.

    ``start``/``end``: the queue offsets ``[start, end)``; ``phy_offset``: the commit-log offset the first lost
    unit points at; ``file``: the commit-log file that should hold it; ``valid_end``: where the commit log ends;
    ``gap_end``: for units pointing into missing files, the end of the missing stretch of the commit log (None
    for units past the valid end)."""

    topic: str
    queue_id: int
    start: int
    end: int
    phy_offset: int
    file: str
    valid_end: int
    gap_end: Optional[int] = None

    @property
    def count(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        where = f"past the commit log's valid end {self.valid_end}" if self.gap_end is None else \
            f"a stretch of the commit log up to offset {self.gap_end} whose files are missing"
        return (f"{self.topic}/{self.queue_id} offsets {self.start}..{self.end} ({self.count} messages): their "
                f"consume-queue units point at commit-log offset {self.phy_offset} and on, in {self.file}, "
                f"{where}")


def normal_start_index(commitlog: CommitLog, max_phy_offset_of_cqs: int) -> int:
    """``recoverNormally``: the last file whose start offset is not past the consume queues' max offset."""
    files = commitlog.queue.files
    index = len(files) - 1
    while index > 0 and files[index].from_offset > max_phy_offset_of_cqs:
        index -= 1
    return max(index, 0)


def abnormal_start_index(commitlog: CommitLog, checkpoint: Optional[Checkpoint], index_safe: bool = False) -> int:
    """``recoverAbnormally``: searching backwards, the first file whose first record was stored no later
    than the checkpoint's safe time (``isMappedFileMatchedRecover``); the first file when none matches."""
    if checkpoint is None:
        return 0
    limit = checkpoint.min_timestamp_index if index_safe else checkpoint.min_timestamp
    for index in range(len(commitlog.queue.files) - 1, -1, -1):
        ts = commitlog.first_store_timestamp(index)
        if ts != 0 and ts <= limit:
            return index
    return 0


def dispatched_start_index(commitlog: CommitLog, dispatched: int) -> int:
    """``isMappedFileMatchedRecover`` of a RocksDB store (``enableRocksDBStore``): searching backwards, the first
    file whose first record's PHYSICALOFFSET is at or before the consume-queue store's dispatched offset
    (``getMaxPhyOffsetInConsumeQueue``); the first file when none is."""
    for index in range(len(commitlog.queue.files) - 1, -1, -1):
        phy = commitlog.first_phy_offset(index)
        if phy is not None and phy <= dispatched:
            return index
    return 0


def recover(commitlog: CommitLog, queues: list[ConsumeQueue], checkpoint: Optional[Checkpoint],
            abort_present: bool, check_crc: bool = True, dispatched: Optional[int] = None) -> RecoveryResult:
    """Compute the valid end of ``commitlog`` and truncate the in-memory view of ``queues`` to it.

    ``dispatched``: a RocksDB consume-queue store's own dispatch checkpoint (its ``CHECKPOINT_TOPIC`` offset),
    which is its max physical offset (instead of every queue's last unit) and, after a crash, picks the file
    recovery starts from (instead of the checkpoint file's timestamps)."""
    max_cq_phy = dispatched if dispatched is not None else max((q.last_unit_end() for q in queues), default=0)
    if abort_present:
        mode = MODE_ABNORMAL
        start = abnormal_start_index(commitlog, checkpoint) if dispatched is None else \
            dispatched_start_index(commitlog, dispatched)
    else:
        mode, start = MODE_NORMAL, normal_start_index(commitlog, max_cq_phy)
    hints = None
    if commitlog.queue.files:
        from_offset = commitlog.queue.files[start].from_offset
        hints = np.concatenate([q.phy_offsets_from(from_offset) for q in queues] or [np.zeros(0, np.int64)])
    valid_end, walks = commitlog.recover_end(start, check_crc=check_crc, hints=hints)
    result = RecoveryResult(mode, start, valid_end, walks=walks)
    last = walks[-1] if walks else None
    if last is not None and last.end_kind == END_INVALID:
        result.stop_problem = last.problem
        result.stop_file = str(commitlog.queue.files[last.file_index].path)
    queues_end = commitlog.queues_end_after_recovery(valid_end, walks, abort_present)
    for q in queues:
        q.truncate_at_phy(queues_end)
    return result


def undispatched_records(result: RecoveryResult, queues: list[ConsumeQueue], queue_of=None, start: int = 0
                         ) -> list[tuple[FileWalk, np.ndarray]]:
    """Records the real store would dispatch on opening, before the valid end: ``recoverAbnormally`` dispatches
    every record from the file it starts at, and each queue skips what it already holds. Without ``queue_of``
    these are the records past every consume queue's end; with it (``queue_of(topic, queue_id, queue offset,
    physical offset)`` → whether that queue lacks the record) also records that only their own queue lacks (a
    queue whose tail was lost while others kept theirs, a queue lost as a whole); ``queue_of`` answers with
    arrays of queue and physical offsets of one queue's records. Only records at or past
    ``start`` count (a DLedger store dispatches from its committed position).

    Returns (walk, indices into walk.positions) per scanned file, in commit-log order.
    """
    dispatched_end = max((q.last_unit_end() for q in queues), default=0)
    out = []
    for walk in result.walks:
        if not len(walk):
            continue
        phy = walk.stored_phy_offsets()
        idx = np.flatnonzero((phy >= (start if queue_of is not None else max(dispatched_end, start)))
                             & (phy < result.valid_end))
        tran = walk.stored_sysflags(idx) & L.TRANSACTION_TYPE_MASK
        idx = idx[(tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT_TYPE)]
        if queue_of is not None and len(idx):
            idx = idx[_lacking(walk, idx, phy[idx], dispatched_end, queue_of)]
        if len(idx):
            out.append((walk, idx))
    return out


def _lacking(walk: FileWalk, idx: np.ndarray, phy: np.ndarray, dispatched_end: int, queue_of) -> np.ndarray:
    """Mask of the records ``idx`` of ``walk`` that re-dispatch adds somewhere: past every queue's end, or lacking
    from their own queue; ``queue_of`` is asked once per (topic, queue id), the records compared at once."""
    import pyarrow.compute as pc

    from ..format.columns import build_batch

    names: dict[str, int] = {}
    # per record: topic number << 32 | queue id, and its queue offset (filled step by step: a step's fields are
    # views of its parse, which is let go with the step)
    queue_key, queue_offset = np.empty(len(idx), np.int64), np.empty(len(idx), np.int64)
    at = 0
    for step in walk.in_steps(idx):  # the records' pages are let go step by step
        fields = walk.fields_at(step, ("queue_id", "queue_offset"))
        topics = pc.dictionary_encode(build_batch(walk.buffer(), fields, ("topic",)).column(0))
        remap = np.array([names.setdefault(n, len(names)) for n in topics.dictionary.to_pylist()], dtype=np.int64)
        queue_key[at:at + len(step)] = ((remap[np.asarray(topics.indices, dtype=np.int64)] << 32)
                                        | (fields.queue_id.astype(np.int64) & 0xFFFFFFFF))
        queue_offset[at:at + len(step)] = fields.queue_offset
        at += len(step)
    keys, group = np.unique(queue_key, return_inverse=True)
    del queue_key
    by_id = list(names)
    order = np.argsort(group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=len(keys)))])
    del group
    out = phy >= dispatched_end
    for g, key in enumerate(keys.tolist()):
        rows = order[bounds[g]:bounds[g + 1]]
        qid = key & 0xFFFFFFFF
        out[rows] |= queue_of(by_id[key >> 32], qid - (1 << 32) if qid >= 1 << 31 else qid, queue_offset[rows],
                              phy[rows])
    return out


def index_keys_after(commitlog: CommitLog, result: RecoveryResult, indexed_end: int, start: int = 0):
    """What re-dispatch indexes for the recovered records at or past ``indexed_end``, in ``buildIndex`` order:
    (topic, key, physical offset, store time) for the UNIQ_KEY then each KEYS token; ROLLBACK is skipped."""
    from ..format.columns import build_batch

    for walk in result.walks:
        phy = walk.stored_phy_offsets()
        idx = np.flatnonzero((phy >= indexed_end) & (phy >= start))  # buildIndex skips only < endPhyOffset
        idx = idx[(walk.stored_sysflags(idx) & L.TRANSACTION_TYPE_MASK) != L.TRANSACTION_ROLLBACK_TYPE]
        for step in walk.in_steps(idx):  # the records' pages are let go step by step
            f = walk.fields_at(step)
            batch = build_batch(commitlog.queue.buffer(walk.file_index), f,
                                ("topic", "uniqKey", "keys", "commitLogOffset"))
            for row, ts in zip(batch.to_pylist(), f.store_timestamp):
                for key in ([row["uniqKey"]] if row["uniqKey"] is not None else []) + row["keys"]:
                    yield row["topic"], key, row["commitLogOffset"], int(ts)
