"""Commit-log-ordered plans, and the choice between them and consume-queue plans.

A read of most of a store is one sequential pass over the commit log, split into stretches of about
``maxBytesPerPartition`` inside the 1 GiB files at record starts taken from consume-queue units (a binary search in
a few large queues per split point; file starts and the scan's ends are record starts too), so the driver never
walks a commit-log file. Each stretch keeps exactly the records a queue read of the same request returns (see
:mod:`rocketstore_spark.store.read.ordered_scan`): the driver works out, per selected queue, where in the commit
log its accepted records can lie and where every record of the queue is accepted, and hands a stretch only

* the queues whose accepted records can lie in it (``selected``), and
* the queue-offset ranges of those whose range starts or ends inside it (``limits``);

so a record past a queue's dispatched end, before a requested start or after a requested end is dropped on its
header, however the queues interleave. The choice: a tag filter reads the consume queues (20-byte units are
tested before any record is read), and so does a read whose messages are mostly in a few queues (long runs per
queue); otherwise the commit log is scanned when the selected messages make up at least
:data:`COMMITLOG_MIN_SHARE` of the bytes the scan would read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from ..store import RocketStore
from ..store.format import layout as L
from .options import SCAN_COMMITLOG, SCAN_QUEUE, ReadOptions, partition_bytes
from .planning_types import CommitLogSlicePartition, StoreHandle

log = logging.getLogger("rocketstore_spark")

COMMITLOG_MIN_SHARE = 0.5  # selected bytes / scanned bytes from which the commit log is scanned
# when this many queues hold FEW_QUEUES_SHARE of the selected messages, each queue is a long run of records that a
# consume-queue task reads as fast as a commit-log stretch, without searching the stretch for record starts
FEW_QUEUES, FEW_QUEUES_SHARE = 16, 0.9
# ... unless their records are interleaved: when the few queues' spans cover their bytes this many times over
# (eight queues written round-robin: eight), a consume-queue task maps its neighbours' records with its own and the
# tasks together map the stretch once per queue, where the commit-log plan reads each byte once
INTERLEAVED_QUEUES = 2.0
MIN_STRETCH_BYTES = 4096  # minPartitions never splits the commit log finer than this
# a split point this close past its ideal place is taken without searching the other probes (a stretch ends up
# at most this much longer than its neighbour: nothing next to the 256 MiB default, one search instead of eight)
SPLIT_SLACK = 1 << 20
PROBE_QUEUES = 8  # the largest queues, whose units give record starts near each split point
_SUPPORTED = {"lmq", "prop-crc"}  # storage features whose records the commit-log plan reads as the queue plan


class QueueRange(NamedTuple):
    """What a read takes from one queue: queue offsets [lo, hi), and the queue's own [lo_min, hi_max)."""

    topic: str
    queue_id: int
    lo: int
    hi: int
    lo_min: int
    hi_max: int


@dataclass(frozen=True)
class Choice:
    mode: str  # SCAN_QUEUE or SCAN_COMMITLOG
    reason: str
    avg_size: Optional[float]  # estimated bytes per message (None: the plan does not use it, a tag plan's)


def average_size(store: RocketStore) -> float:
    """The estimated bytes per message: the commit log's bytes over every queue's messages."""
    queues = (store.consume_queue(t, q) for t in store.topics() for q in store.queue_ids(t))
    all_msgs = sum(max(0, cq.max_offset - cq.first_offset) for cq in queues)
    return (store.max_phy_offset() - store.min_phy_offset()) / max(all_msgs, 1)


def choose(store: RocketStore, opts: ReadOptions, ranges: list, tags, spans: Optional["Spans"]) -> Choice:
    """The plan for one store: forced by ``scanMode`` or chosen from estimates (selected messages × average size
    against the bytes a commit-log scan would read)."""
    unsupported = commitlog_unsupported(store, ranges)
    if opts.scan_mode == SCAN_QUEUE:
        return Choice(SCAN_QUEUE, "scanMode=queue", average_size(store))
    if opts.scan_mode == SCAN_COMMITLOG:
        if unsupported:
            log.warning("scanMode=commitlog: %s; reading the consume queues instead", unsupported)
            return Choice(SCAN_QUEUE, f"scanMode=commitlog, but {unsupported}", average_size(store))
        return Choice(SCAN_COMMITLOG, "scanMode=commitlog", average_size(store))
    if unsupported:
        return Choice(SCAN_QUEUE, unsupported, average_size(store))
    if tags is not None:
        # a tag plan packs ranges by their matches, not by size: no average to work out over every queue
        return Choice(SCAN_QUEUE, "a tag filter: the consume queues' tag hashes are tested before records are read",
                      None)
    avg = average_size(store)
    counts = sorted((r.hi - r.lo for r in ranges), reverse=True)
    if sum(counts[:FEW_QUEUES]) >= FEW_QUEUES_SHARE * max(sum(counts), 1) and not _interleaved(store, ranges):
        return Choice(SCAN_QUEUE, f"{min(len(counts), FEW_QUEUES)} queues hold {FEW_QUEUES_SHARE:.0%}+ of the "
                      "selected messages: long runs per queue", avg)
    selected = sum(counts) * avg
    scanned = spans.scan_bytes() if spans is not None else 0
    share = selected / scanned if scanned else 0.0
    detail = (f"~{selected / 2**20:.1f} MiB selected of {len(ranges)} queues, a commit-log scan reads "
              f"{scanned / 2**20:.1f} MiB ({share:.0%})")
    if scanned and share >= COMMITLOG_MIN_SHARE:
        return Choice(SCAN_COMMITLOG, detail, avg)
    return Choice(SCAN_QUEUE, detail, avg)


def _interleaved(store: RocketStore, ranges: list) -> bool:
    """Whether the records of the largest ranges (:data:`FEW_QUEUES` of them) interleave: their commit-log spans,
    from each range's first record to its last (two units read per range), cover the bytes from the first to the
    last of them :data:`INTERLEAVED_QUEUES` times over."""
    spans = []
    for r in sorted(ranges, key=lambda r: r.hi - r.lo, reverse=True)[:FEW_QUEUES]:
        if r.hi <= r.lo:
            continue
        cq = store.consume_queue(r.topic, r.queue_id)
        first, last = _unit_phy(cq, r.lo), _unit_phy(cq, r.hi - 1)
        if first is not None and last is not None and last >= first:
            spans.append((first, last + 1))
    if not spans:
        return False
    covered = sum(b - a for a, b in spans)
    return covered >= INTERLEAVED_QUEUES * (max(b for _, b in spans) - min(a for a, _ in spans))


def commitlog_unsupported(store: RocketStore, ranges: list) -> str:
    """Why the commit-log plan cannot give this read's rows ('' when it can)."""
    extra = set(store.variant.features) - _SUPPORTED
    if extra:
        return f"a {store.variant.name} store (its queue rows are not the commit log's records one to one)"
    if any(r.topic.startswith(L.LMQ_PREFIX) for r in ranges):
        return "LMQ topics are selected (their rows repeat records of other topics)"
    return ""


class Spans:
    """Where each selected queue's accepted records lie in the commit log (conservative bounds, cheap to find:
    the queue's last unit is known from its end search, other units cost a read each).

    * ``first`` / ``end``: no accepted record starts before ``first`` or at/after ``end``;
    * ``clean_first`` / ``clean_end``: every record of the queue starting in [clean_first, clean_end) is accepted.
    """

    def __init__(self, store: RocketStore, ranges: list):
        self.ranges = [r for r in ranges if r.lo < r.hi]
        n = len(self.ranges)
        self.first, self.end = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.clean_first, self.clean_end = np.zeros(n, np.int64), np.zeros(n, np.int64)
        start, never = store.min_phy_offset(), np.iinfo(np.int64).max
        for i, r in enumerate(self.ranges):
            cq = store.consume_queue(r.topic, r.queue_id)
            # records before the range exist in the scan when the start is a bound, or when the units before the
            # queue's first file are gone (a later file's offset may then hold such records)
            if r.lo > 0 and (r.lo > r.lo_min or r.lo_min == cq.first_offset):
                at = _unit_phy(cq, r.lo)
                self.first[i], self.clean_first[i] = (start, never) if at is None else (at, at)
            else:
                self.first[i], self.clean_first[i] = start, start
            if r.hi < r.hi_max:
                at = _unit_phy(cq, r.hi)
                self.end[i], self.clean_end[i] = (cq.last_unit_end(), start) if at is None else (at, at)
            else:
                self.end[i] = self.clean_end[i] = cq.last_unit_end()
        self.lo = max(start, int(self.first.min())) if n else start
        self.hi = min(store.max_phy_offset(), int(self.end.max())) if n else start
        topics = sorted({r.topic for r in self.ranges})
        self.topic_names = topics
        index = {t: k for k, t in enumerate(topics)}
        self.topic_of = np.array([index[r.topic] for r in self.ranges], dtype=np.int64)
        self.qid = np.array([r.queue_id for r in self.ranges], dtype=np.int64)
        self._selected_for, self._selected = None, ()

    def scan_bytes(self) -> int:
        return max(0, self.hi - self.lo)

    def stretch(self, handle: StoreHandle, s: int, e: int) -> Optional[CommitLogSlicePartition]:
        """The partition of commit-log [s, e) (None when no selected queue can have a record there)."""
        sel = np.flatnonzero((self.first < e) & (self.end > s))
        if not len(sel):
            return None
        listed = sel[(s < self.clean_first[sel]) | (e > self.clean_end[sel])]
        key = sel.tobytes()
        if key != self._selected_for:  # neighbouring stretches mostly select the same queues: built once
            self._selected_for, self._selected = key, self._selected_queues(sel)
        selected = self._selected
        limits = tuple((self.ranges[i].topic, self.ranges[i].queue_id, self.ranges[i].lo, self.ranges[i].hi)
                       for i in listed.tolist())
        return CommitLogSlicePartition(handle, s, e, selected, limits)

    def _selected_queues(self, sel: np.ndarray) -> tuple:
        """``(topic, queue ids)`` pairs of the queues ``sel`` (a range when a topic's ids are contiguous)."""
        topics, qids = self.topic_of[sel].tolist(), self.qid[sel].tolist()
        bounds = [0] + (np.flatnonzero(np.diff(self.topic_of[sel])) + 1).tolist() + [len(sel)]
        out = []
        for a, b in zip(bounds, bounds[1:]):
            q = qids[a:b]
            contiguous = len(q) == q[-1] - q[0] + 1  # sorted and distinct
            out.append((self.topic_names[topics[a]], range(q[0], q[-1] + 1) if contiguous else tuple(q)))
        return tuple(out)


def _unit_phy(cq, offset: int) -> Optional[int]:
    """The commit-log offset unit ``offset`` points at (None for a filler unit or one that cannot be read)."""
    units = cq.units(offset, offset + 1)
    if not len(units) or int(units["size"][0]) == L.CQ_FILLER_SIZE:
        return None
    return int(units["phy_offset"][0])


def plan_slices(store: RocketStore, handle: StoreHandle, spans: Spans, opts: ReadOptions) -> list:
    """Commit-log stretches of about ``maxBytesPerPartition`` (fewer bytes when ``minPartitions`` asks for more
    partitions), each starting at a record start. The stretches of a run of consecutive commit-log files are cut
    into equal parts wherever the files begin: a stretch runs on over a file's end into the next file (as Spark
    packs the splits of several files into one partition), so that the tasks are alike (a file's last, short
    stretch would otherwise be a task of its own, run alone after the others), but never over a missing file.
    Unless the user set ``maxBytesPerPartition`` or ``minPartitions``, a run is cut into an even number of parts
    (:func:`even_parts`)."""
    total = spans.scan_bytes()
    if not total:
        return []
    target = partition_bytes(opts, total)
    if opts.min_partitions:
        target = max(MIN_STRETCH_BYTES, min(target, -(-total // opts.min_partitions)))
    probes = _probe_queues(store)
    parts = []
    for run in _file_runs(store, spans):
        run_bytes = sum(b - a for a, b in run)
        if opts.max_bytes_per_partition_given or opts.min_partitions:
            pieces = -(-run_bytes // target)
        else:
            pieces = even_parts(run_bytes, target)
        points = [run[0][0]]
        k, done = 1, 0  # the next cut, and the run's bytes in the files before this one
        for i, (a, b) in enumerate(run):
            while k < pieces and k * run_bytes // pieces < done + (b - a):
                ideal = a + k * run_bytes // pieces - done
                at = store.record_start_at_or_after(ideal, b, probes, near=min(SPLIT_SLACK, target // 64))
                if at is None and i + 1 < len(run):
                    at = b  # no record start known up to the file's end: the next file's first record
                if at is not None and at > points[-1]:
                    points.append(at)
                k += 1
            done += b - a
        points.append(run[-1][1])
        for s, e in zip(points, points[1:]):
            part = spans.stretch(handle, s, e)
            if part is not None:
                parts.append(part)
    return parts


#: How much larger than ``maxBytesPerPartition`` a part of a default plan may be for an even count of parts.
EVEN_SLACK = 1.25


def even_parts(run_bytes: int, target: int) -> int:
    """How many equal parts a default plan cuts a run of ``run_bytes`` into: the even count nearest to parts of
    ``target`` bytes, each at most :data:`EVEN_SLACK` times ``target`` (one part when it fits). Spark's slots
    almost always come in even numbers (two, four, eight cores...): an odd count of equal tasks leaves all slots
    but one idle while the last runs, and each task costs Spark a fixed amount besides its bytes (measured on 2
    cores, 2.4 GB: 8 tasks 1.16-1.24 s, 9 tasks 1.21-1.31 s, 10 tasks 1.15-1.27 s)."""
    if run_bytes <= target:
        return 1
    count = max(2, 2 * round(run_bytes / target / 2))
    return count + 2 if run_bytes > EVEN_SLACK * target * count else count


def _file_runs(store: RocketStore, spans: Spans) -> list:
    """The scan's part of each commit-log file, ``[a, b)``, grouped into runs of consecutive files."""
    size = store.sizes.commit_log_file_size
    runs: list = []
    follows = None  # where the file after the last one taken would begin
    for base in store.commit_log_file_starts():
        a, b = max(spans.lo, base), min(spans.hi, base + size)
        if a >= b:
            continue
        if base != follows or not runs:
            runs.append([])
        runs[-1].append((a, b))
        follows = base + size
    return runs


def _probe_queues(store: RocketStore) -> list:
    """The :data:`PROBE_QUEUES` queues with the most units: their units are the densest record starts."""
    sizes = [(store.max_offset(t, q) - store.consume_queue(t, q).first_offset, t, q)
             for t in store.topics() for q in store.queue_ids(t)]
    sizes.sort(key=lambda x: -x[0])
    return [(t, q) for n, t, q in sizes[:PROBE_QUEUES] if n > 0]
