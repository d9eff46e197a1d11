"""``QueueSet``: the consume queues of an opened store, by (topic, queue id).

It opens the queues a listing names (a remote store's many at once), or with lazy queues loads each when first
named (a reader of a few queues of thousands lists only those), trusting the end a planner gave
(:meth:`QueueSet.expect_queue_ends`) instead of searching it again. It answers what the broker's queue lookups
answer: topics, queue ids, min and max offsets. Every answer is after recovery (re-dispatch may add queues).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Iterator, Optional

from ...errors import DataLossError, InvalidArgumentError
from ..files.byte_source import as_path, is_remote
from ..files.consume_queue import ConsumeQueue
from ..files.mapped_file_queue import MappedFileInfo, MappedFileQueue
from ..files.sizes import QueueDir
from ..format import layout as L
from .opened_store import OpenedStore
from .recovery import LostRange

log = logging.getLogger("rocketstore_spark")

REMOTE_QUEUE_OPENS = 16  # consume queues of a remote store opened concurrently


class QueueSet:
    """The consume queues of ``store``; ``lazy``: loaded when first named (only with a given valid end)."""

    def __init__(self, store: OpenedStore, lazy: bool = False):
        self.store = store
        self.lazy = lazy
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._queue_index: Optional[tuple] = None  # (queue count, topic → queue ids): see queue_ids_by_topic
        self._planned_ends: dict[tuple[str, int], int] = {}  # see expect_queue_ends
        self._planned_starts: dict[tuple[str, int], int] = {}  # ... and the earliest planned start of each
        self._loss_reported: set = set()  # queues whose lost messages a read skipped with a warning
        self.rocksdb = None  # a rocksdb-cq store's database (its queues' units), opened by the variant

    # --- opening ----------------------------------------------------------------------------------------

    def open_listed(self, entries: Iterable) -> None:
        """Open the queues of a listing ((directory, files) pairs, see :func:`~..files.sizes.cq_listing`)."""
        store = self.store
        # where normal recovery usually starts walking (the last commit-log file): young queues keep their units
        # pointing there from the end search, so recovery's hints need no second read of them
        files = store.commitlog.queue.files
        hint_from = files[-1].from_offset if files else None
        size = store.sizes.consume_queue_file_size

        def open_queue(entry):
            directory, queue_files = entry
            topic = directory.topic if isinstance(directory, QueueDir) else as_path(directory).parent.name
            return ConsumeQueue(topic, int(directory.name), directory, size, queue_files, hint_from,
                                strays=store.stray_files)

        # a remote queue's end search is a dozen round trips: many queues search at once (I/O, not the GIL)
        if store.commitlog.queue.remote:
            with ThreadPoolExecutor(REMOTE_QUEUE_OPENS) as pool:
                opened = list(pool.map(open_queue, entries))
        else:
            opened = map(open_queue, entries)
        for cq in opened:
            self._queues[(cq.topic, cq.queue_id)] = cq

    def add(self, cq) -> None:
        """Add a queue opened elsewhere (a variant's, or one re-dispatch creates)."""
        self._queues[(cq.topic, cq.queue_id)] = cq

    def close(self) -> None:
        for q in self._queues.values():
            q.files.close()
        if self.rocksdb is not None:
            self.rocksdb.close()
            self.rocksdb = None

    # --- the loaded queues ------------------------------------------------------------------------------

    def loaded(self, topic: str, queue_id: int):
        """The queue if loaded (None otherwise; never loads one)."""
        return self._queues.get((topic, queue_id))

    def loaded_queues(self) -> list:
        """Every loaded queue, in loading order."""
        return list(self._queues.values())

    def loaded_items(self) -> Iterator[tuple[tuple[str, int], object]]:
        """((topic, queue id), queue) of every loaded queue."""
        return iter(list(self._queues.items()))

    def loaded_count(self) -> int:
        return len(self._queues)

    def get(self, topic: str, queue_id: int) -> Optional[ConsumeQueue]:
        """The loaded queue, or with lazy queues the queue loaded now from its directory (None when absent)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None and self.lazy:
            key = (topic, queue_id)
            planned = self._planned_ends.get(key)
            root = self.store.root
            remote = is_remote(root)
            # text paths: an executor loads thousands of queues, and pathlib costs more than the read itself
            directory = root / L.CONSUMEQUEUE_DIR / topic / str(queue_id) if remote else \
                f"{os.fspath(root)}/{L.CONSUMEQUEUE_DIR}/{topic}/{queue_id}"
            files = None if remote else self._planned_files(directory, key, planned)
            if files is not None or (directory.is_dir() if remote else os.path.isdir(directory)):
                cq = ConsumeQueue(topic, queue_id, directory, self.store.sizes.consume_queue_file_size, files,
                                  planned_end=planned)
                if planned is None:
                    cq.truncate_at_phy(self.store.given_valid_end)
                self._queues[key] = cq
        return cq

    def _planned_files(self, directory: str, key, planned_end: Optional[int]) -> Optional[list]:
        """The files holding a planned range, named from its offsets instead of listed (a listing and a stat
        per file cost more than reading the few units of a short queue): only when the range's first file is
        there with the queue's file size; otherwise None, and the directory is listed, so a file expired or
        replaced since planning is found and reported as before. A later file missing fails its read."""
        start = self._planned_starts.get(key)
        if planned_end is None or start is None or start >= planned_end:
            return None
        size = self.store.sizes.consume_queue_file_size
        first = start * L.CQ_STORE_UNIT_SIZE // size * size
        last = (planned_end * L.CQ_STORE_UNIT_SIZE - 1) // size * size
        files = [MappedFileInfo(f"{directory}/{L.offset_to_file_name(offset)}", offset, size)
                 for offset in range(first, last + 1, size)]
        try:
            return files if os.stat(files[0].location).st_size == size else None
        except FileNotFoundError:
            return None

    def queue_file_tails(self) -> Optional[list[tuple[str, Optional[str], bool]]]:
        """(directory, last file or None, whether the units fill that file) of every loaded consume queue of the
        default layout, as text paths: what a planner stats to see that the queues it planned from did not
        change. Units are only ever appended to a queue's last file; a new file appears in the directory only
        once the last one is full (files that expire go with the commit-log files under them). None when the
        queues are no such files (RocksDB consume queues)."""
        if any(not isinstance(cq.files, MappedFileQueue) for cq in self._queues.values()):
            return None
        unit = L.CQ_STORE_UNIT_SIZE
        return [(cq.files.location, cq.files.files[-1].location,
                 cq.max_offset * unit >= cq.files.files[-1].from_offset + cq.files.file_size)
                if cq.files.files else (cq.files.location, None, False)
                for cq in self._queues.values()]

    # --- planned ranges ---------------------------------------------------------------------------------

    def expect_queue_ends(self, ranges) -> None:
        """For a reader of planned ``(topic, queue id, start, end)`` ranges on a store opened with lazy queues:
        each queue is loaded trusting its planned end (no end search, no truncation scan: the planner did both),
        and every unit read is checked instead. A queue loaded earlier with a smaller end is loaded again."""
        if not self.lazy:
            return
        for topic, qid, start, end in ranges:
            key = (topic, int(qid))
            if end is None:
                continue
            loaded = self._queues.get(key)
            if loaded is not None and loaded.planned_end is None:
                continue  # loaded as a whole store loads it (a variant's queues, recovery's): its end is searched
            # a range starting earlier than the files named for an earlier one needs the queue loaded again
            earlier = key in self._planned_starts and (start is None or start < self._planned_starts[key])
            if start is None:
                self._planned_starts.pop(key, None)
            elif key not in self._planned_starts or earlier:
                self._planned_starts[key] = int(start)
            if self._planned_ends.get(key, -1) < end or earlier:
                self._planned_ends[key] = max(int(end), self._planned_ends.get(key, -1))
                if loaded is not None:
                    self._queues.pop(key).files.close()
                    self._queue_index = None

    def planned_to(self, topic: str, queue_id: int, end: int) -> bool:
        """Whether a read of (topic, queue_id) up to ``end`` trusts its plan: a lazy reader's queue not loaded
        yet whose planned end reaches ``end`` (every unit read is checked, a missing queue is data loss)."""
        key = (topic, int(queue_id))
        return self.lazy and key not in self._queues and self._planned_ends.get(key, -1) >= end

    def planned_covers(self, key: tuple[str, int], start: int, end: int) -> bool:
        """Whether the plan of queue ``key`` starts at or before ``start`` and ends at or after ``end``."""
        return self._planned_starts.get(key, start + 1) <= start and self._planned_ends.get(key, -1) >= end

    # --- what the broker's lookups answer ---------------------------------------------------------------

    def queue_ids_by_topic(self) -> dict:
        """topic → sorted queue ids, in topic order; rebuilt only when queues were added (never removed), so
        planning over thousands of topics does not rescan every queue per topic."""
        _ = self.store.recovery
        if self._queue_index is None or self._queue_index[0] != len(self._queues):
            by_topic: dict = {}
            for t, q in sorted(self._queues):
                by_topic.setdefault(t, []).append(q)
            self._queue_index = (len(self._queues), {t: tuple(qs) for t, qs in by_topic.items()})
        return self._queue_index[1]

    def topics(self) -> list[str]:
        """Topics with a consume queue, sorted."""
        return list(self.queue_ids_by_topic())

    def queue_ids(self, topic: str) -> list[int]:
        """Queue ids of ``topic``, sorted (empty for an unknown topic)."""
        return list(self.queue_ids_by_topic().get(topic, ()))

    def has_queue(self, topic: str, queue_id: int) -> bool:
        """Whether (topic, queue_id) has a consume queue (after recovery)."""
        return self.store.recovery is not None and self.get(topic, int(queue_id)) is not None

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The consume queue of (topic, queue_id), recovered; an unknown one is an error."""
        _ = self.store.recovery
        cq = self.get(topic, int(queue_id))
        if cq is None:
            raise InvalidArgumentError(f"no consume queue for topic {topic!r} queue {queue_id} in {self.store.root}; "
                                       f"topics are {self.topics()}")
        return cq

    def min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue``: the first queue offset whose message is still in the commit log."""
        return self.min_offset_of(self.consume_queue(topic, queue_id))

    def queue_edges(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(:meth:`min_offset`, :meth:`max_offset`) with one lookup: a planner asks both of thousands of queues."""
        cq = self.consume_queue(topic, queue_id)
        return self.min_offset_of(cq), cq.max_offset

    def min_offset_of(self, cq) -> int:
        """:meth:`min_offset` of a queue at hand."""
        return cq.min_live_offset(self.store.min_phy_offset())

    def max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: the next queue offset to be written (exclusive end)."""
        return self.consume_queue(topic, queue_id).max_offset

    def clamped_range(self, topic, queue_id, start, end, fail_on_data_loss):
        """(consume queue, first, end) of a requested range; a start before what is left is data loss, and so is
        a planned queue that is gone."""
        if end is not None and self.planned_to(topic, queue_id, end) and self.get(topic, int(queue_id)) is None:
            where = self.store.root / L.CONSUMEQUEUE_DIR
            raise DataLossError(f"{topic}/{queue_id}: offsets up to {end} were planned but the consume queue is no "
                                f"longer in {where} (removed or replaced since planning)")
        cq = self.consume_queue(topic, queue_id)
        first = self.min_offset(topic, queue_id)
        lo = first if start is None else max(int(start), cq.first_offset)
        hi = cq.max_offset if end is None else min(int(end), cq.max_offset)
        if start is not None and int(start) < first and fail_on_data_loss and int(start) < hi:
            raise DataLossError(
                f"{topic}/{queue_id}: offsets {start}..{first} are gone (their commit-log files expired); "
                f"start at {first} or pass fail_on_data_loss=False to skip them")
        wanted_end = None if end is None else int(end)
        lost = [r for r in self.lost_ranges_of(cq, past_end=end is None or int(end) > hi)
                if lo < r.end and (wanted_end is None or r.start < wanted_end)]
        if lost:
            if fail_on_data_loss:
                raise DataLossError(f"lost messages: {'; '.join(r.describe() for r in lost)}; read up to offset "
                                    f"{lost[0].start} or pass fail_on_data_loss=False to read what is left")
            # a planned range's loss was reported by its planner; a queue's is reported once per store opened
            key = (topic, int(queue_id))
            if key not in self._loss_reported and not self.planned_covers(key, lo, hi):
                self._loss_reported.add(key)
                for r in lost:
                    log.warning("lost messages, skipped (fail_on_data_loss=False): %s", r.describe())
        return cq, lo, hi

    # --- lost messages ------------------------------------------------------------------------------------

    def lost_ranges(self, topics=None) -> list[LostRange]:
        """The messages this copy of the store lost, per queue (see :class:`~.recovery.LostRange`), in topic,
        queue and offset order; ``topics`` limits them to those topics. Only the queues loaded are looked at (all
        of them, unless the store was opened with ``lazy_queues``)."""
        wanted = None if topics is None else set(topics)
        return [lost for (topic, _), cq in sorted(self._queues.items(), key=lambda kv: kv[0])
                if wanted is None or topic in wanted for lost in self.lost_ranges_of(cq)]

    def lost_ranges_of(self, cq, past_end: bool = True) -> list[LostRange]:
        """The messages consume queue ``cq`` lost, in queue-offset order (empty when it lost none): its units
        pointing into commit-log files missing between the first and the last file (a range per missing
        stretch), then, with ``past_end``, the units that recovery dropped and that point past where the log's
        records end."""
        out = [r for gap in self.store.commitlog.missing for r in self._units_in_gap(cq, gap)]
        if past_end:
            tail = self._lost_past_end(cq)
            if tail is not None:
                out.append(tail)
        return out

    def _units_in_gap(self, cq, gap: tuple[int, int]) -> list[LostRange]:
        """The units of ``cq`` pointing into the missing commit-log range ``gap`` as a :class:`LostRange` (one
        range: units point forward through the commit log; none when no unit does). Two binary searches."""
        lo, hi = cq.first_offset, cq.max_offset
        start = cq.first_at_or_past(gap[0], lo, hi)
        end = cq.first_at_or_past(gap[1], start, hi) if start < hi else hi
        if end <= start:
            return []
        phy = int(cq.units(start, start + 1)["phy_offset"][0])
        return [LostRange(cq.topic, cq.queue_id, start, end, phy, self._commit_log_file_for(phy),
                          self.store.recovery.valid_end, gap_end=gap[1])]

    def _lost_past_end(self, cq) -> Optional[LostRange]:
        """The units of ``cq`` that recovery dropped and that point past where the log's records end."""
        result = self.store.recovery
        # where the log's records end: past the valid end only for a group of DLedger peers, whose entries past
        # committedPos are not served yet but not lost either
        walked = next((w for w in reversed(result.walks) if w.end_position), None)
        files = self.store.commitlog.queue.files
        data_end = result.valid_end if walked is None else \
            max(result.valid_end, files[walked.file_index].from_offset + walked.end_position)
        start, end, phy = cq.dropped_units(data_end)
        if end <= start:
            return None
        return LostRange(cq.topic, cq.queue_id, start, end, phy, self._commit_log_file_for(phy), result.valid_end)

    def _commit_log_file_for(self, phy_offset: int) -> str:
        """The commit-log file that holds (or should hold) ``phy_offset``: a file of the log (cut or whole), or
        the name of the missing one."""
        files = self.store.commitlog.queue.files
        size = self.store.sizes.commit_log_file_size
        for f in reversed(files):
            if f.from_offset <= phy_offset:
                if phy_offset < f.from_offset + size:
                    return str(f.path) if f.length >= size else f"{f.path} (cut at {f.length} bytes)"
                break
        name = f"{phy_offset - phy_offset % size:020d}"
        directory = files[0].path.parent if files else self.store.root / L.COMMITLOG_DIR
        return f"{directory / name} (missing)"
