"""Queues loaded when first named, for readers of a few queues of thousands (``StoreReader.open(...,
lazy_queues=True)``), and the planned ends an executor trusts instead of searching each queue's end again."""

from __future__ import annotations

import os
from typing import Optional

from ..files.byte_source import is_remote
from ..files.consume_queue import ConsumeQueue
from ..files.mapped_file_queue import MappedFileInfo, MappedFileQueue
from ..format import layout as L


class LazyQueues:
    """``_queue`` and ``expect_queue_ends`` for the store reader (its ``_queues``, ``_lazy_queues``,
    ``_planned_ends``, ``_planned_starts``, ``_given_valid_end`` and ``_queue_index``)."""

    def _queue(self, topic: str, queue_id: int) -> Optional[ConsumeQueue]:
        """The loaded queue, or with lazy queues the queue loaded now from its directory (None when absent)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None and self._lazy_queues:
            key = (topic, queue_id)
            planned = self._planned_ends.get(key)
            remote = is_remote(self.root)
            # text paths: an executor loads thousands of queues, and pathlib costs more than the read itself
            directory = self.root / L.CONSUMEQUEUE_DIR / topic / str(queue_id) if remote else \
                f"{os.fspath(self.root)}/{L.CONSUMEQUEUE_DIR}/{topic}/{queue_id}"
            files = None if remote else self._planned_files(directory, key, planned)
            if files is not None or (directory.is_dir() if remote else os.path.isdir(directory)):
                cq = ConsumeQueue(topic, queue_id, directory, self.sizes.consume_queue_file_size, files,
                                  planned_end=planned)
                if planned is None:
                    cq.truncate_at_phy(self._given_valid_end)
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
        size = self.sizes.consume_queue_file_size
        first = start * L.CQ_STORE_UNIT_SIZE // size * size
        last = (planned_end * L.CQ_STORE_UNIT_SIZE - 1) // size * size
        files = [MappedFileInfo(f"{directory}/{L.offset_to_file_name(offset)}", offset, size)
                 for offset in range(first, last + 1, size)]
        try:
            return files if os.stat(files[0].location).st_size == size else None
        except FileNotFoundError:
            return None

    def queue_file_tails(self) -> Optional[list[tuple[str, Optional[str]]]]:
        """(directory, last file or None) of every loaded consume queue of the default layout, as text paths:
        what a planner stats to see that the queues it planned from did not change (units are only ever
        appended to a queue's last file; files come and go with its directory's modification time). None when
        the queues are no such files (RocksDB consume queues)."""
        if any(not isinstance(getattr(cq, "files", None), MappedFileQueue) for cq in self._queues.values()):
            return None
        return [(cq.files.location, cq.files.files[-1].location if cq.files.files else None)
                for cq in self._queues.values()]

    def expect_queue_ends(self, ranges) -> None:
        """For a reader of planned ``(topic, queue id, start, end)`` ranges on a store opened with lazy queues:
        each queue is loaded trusting its planned end (no end search, no truncation scan: the planner did both),
        and every unit read is checked instead. A queue loaded earlier with a smaller end is loaded again."""
        if not self._lazy_queues:
            return
        for topic, qid, start, end in ranges:
            key = (topic, int(qid))
            if end is None:
                continue
            loaded = self._queues.get(key)
            if loaded is not None and getattr(loaded, "planned_end", None) is None:
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

