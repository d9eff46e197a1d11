"""The commit log of a DLedger broker (``enableDLegerCommitLog=true``): ``dledger-<selfId>/data/``.

The files are a MappedFileQueue like ``commitlog/`` (named by start offset, ``mappedFileSizeCommitLog`` bytes each),
but every RocketMQ record is the body of a DLedger entry with this 48-byte header (``DLedgerEntry``, big-endian):

======  =====  ==================================================================================
offset  bytes  field
======  =====  ==================================================================================
0       4      magic: 1 (``DLedgerEntry.MAGIC``); -1 (``MmapFileList.BLANK_MAGIC_CODE``) opens a file's blank tail
4       4      entry size = 48 + body length (for a blank tail: the bytes left in the file)
8       8      entry index: 0, 1, 2, ... without gaps
16      8      term (never decreasing)
24      8      pos: the entry's own absolute offset
32      4      channel
36      4      chain CRC
40      4      body CRC
44      4      body length
======  =====  ==================================================================================

``DLedgerCommitLog``'s append hook writes pos + 48 into the record's PHYSICALOFFSET: records sit at their
physical offset in these files exactly as in ``commitlog/``, so every read by offset (consume queues, index,
msgId) works unchanged; only walking the log steps over the headers. Recovery is DLedger's
(``DLedgerMmapFileStore.recover``): from the third-last file, entries are followed while their headers hold
(magic, pos, sizes, consecutive index, term); a zeroed header is the end of the data. RocketMQ's own record checks
apply when records are dispatched and read, as in the default store.
"""

from __future__ import annotations

import struct
from typing import Optional

import numpy as np

from ...errors import CorruptRecordError
from ..format.codec import PROBLEM_DESCRIPTIONS, parse_records, read_be
from .commitlog import END_BLANK, END_DATA, END_INVALID, CommitLog, FileWalk
from .mapped_file_queue import MappedFileQueue

ENTRY_HEADER = struct.Struct(">iiqqqiiii")
"""magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLength (48 bytes, DLedgerEntry.BODY_OFFSET)."""
ENTRY_HEADER_SIZE = ENTRY_HEADER.size  # 48
DLEDGER_MAGIC = 1  # 0x1, DLedgerEntry.MAGIC (MAGIC_1 = CURRENT_MAGIC in DLedger 0.3.1.2)
DLEDGER_BLANK_MAGIC = -1  # 0xFFFFFFFF, MmapFileList.BLANK_MAGIC_CODE
MIN_WINDOW, MAX_WINDOW = 1 << 10, 1 << 20
RECOVER_FROM_LAST_FILES = 3  # DLedgerMmapFileStore.recover starts at mappedFiles.size() - 3


class DLedgerLog(CommitLog):
    """Read-only access to a DLedger data directory as a commit log of records wrapped in entries."""

    def __init__(self, queue: MappedFileQueue, prop_crc_required: bool = False,
                 force_verify_prop_crc: Optional[bool] = None):
        super().__init__(queue, prop_crc_required, force_verify_prop_crc)
        self._last = None  # (index, term) of the last entry walked in order, for DLedger's continuity checks

    def _entry_problem(self, header: tuple, absolute: int, room: int) -> str:
        """Why a header at ``absolute`` is no entry DLedger keeps ("" when it is one)."""
        magic, size, index, term, pos, _channel, _chain, _crc, body_len = header
        if magic != DLEDGER_MAGIC:
            return f"magic {magic}, expected {DLEDGER_MAGIC} (DLedgerEntry.MAGIC) or {DLEDGER_BLANK_MAGIC} (blank)"
        if size <= ENTRY_HEADER_SIZE or size > room:
            return f"entry size {size}, expected more than {ENTRY_HEADER_SIZE} and at most the {room} bytes left"
        if body_len + ENTRY_HEADER_SIZE != size:
            return f"entry size {size} != {ENTRY_HEADER_SIZE} + body length {body_len}"
        if pos != absolute:
            return f"entry pos {pos}, expected its own offset {absolute}"
        if self._last is not None and index != self._last[0] + 1:
            return f"entry index {index}, expected {self._last[0] + 1} (indexes have no gaps)"
        if self._last is not None and term < self._last[1]:
            return f"entry term {term} is below the previous entry's {self._last[1]}"
        return ""

    def _header_run(self, buf: np.ndarray, chain: np.ndarray, base: int) -> int:
        """How many entries at the start of ``chain`` (sorted candidate entry positions, e.g. consume-queue units
        minus 48) pass DLedger's header checks and follow each other; checked with numpy at once."""
        size = read_be(buf, chain + 4, 4)
        index, term = read_be(buf, chain + 8, 8), read_be(buf, chain + 16, 8)
        ok = ((read_be(buf, chain, 4) == DLEDGER_MAGIC) & (size > ENTRY_HEADER_SIZE) & (chain + size <= len(buf))
              & (read_be(buf, chain + 44, 4) + ENTRY_HEADER_SIZE == size)  # body length
              & (read_be(buf, chain + 24, 8) == base + chain))  # pos: the entry's own offset
        if self._last is not None:
            ok[0] &= bool(index[0] == self._last[0] + 1 and term[0] >= self._last[1])
        follows = (chain[:-1] + size[:-1] == chain[1:]) & (index[1:] == index[:-1] + 1) & (term[1:] >= term[:-1])
        bad = np.flatnonzero(~ok)
        run = int(bad[0]) if len(bad) else len(chain)
        breaks = np.flatnonzero(~follows[:max(run - 1, 0)])
        run = int(breaks[0]) + 1 if len(breaks) else run
        if run:
            self._last = (int(index[run - 1]), int(term[run - 1]))
        return run

    def walk_file(self, index: int, start: int = 0, check_crc: bool = True,
                  hints: Optional[np.ndarray] = None, continue_chain: bool = False) -> FileWalk:
        """Follow the entries of file ``index`` from ``start``; the records are their bodies. ``hints`` (record
        positions in the file, from consume-queue units) let runs of entries be checked in vectorised steps;
        the others are walked one by one. A zeroed header ends the data, as in DLedger's recovery; any other
        header DLedger would not keep is a CorruptRecordError naming file and offset, because what follows it
        is lost to the broker too. ``continue_chain`` checks index continuity with the previous file's walk."""
        buf = self.queue.buffer(index)
        info = self.queue.files[index]
        mv = memoryview(buf)
        if not continue_chain:
            self._last = None
        entries = np.zeros(0, np.int64) if hints is None else \
            np.unique(np.asarray(hints, np.int64)) - ENTRY_HEADER_SIZE
        entries = entries[(entries >= start) & (entries + ENTRY_HEADER_SIZE <= len(buf))]
        positions, pos, end_kind, problem, h = [], start, END_BLANK, "", 0
        window = MIN_WINDOW  # hinted entries checked per step: doubled while runs fill it, so records no queue
        while pos + 8 <= len(buf):  # points at (gaps) cost a small step each, not a pass over the whole file
            while h < len(entries) and entries[h] < pos:
                h += 1
            if h < len(entries) and entries[h] == pos:
                run = self._header_run(buf, entries[h:h + window], info.from_offset)
                window = min(window * 2, MAX_WINDOW) if run == window else MIN_WINDOW
                if run:
                    positions.append(entries[h:h + run] + ENTRY_HEADER_SIZE)
                    pos = int(entries[h + run - 1]) + int(read_be(buf, entries[h + run - 1:h + run] + 4, 4)[0])
                    h += run
                    continue
            magic, size = struct.unpack_from(">ii", mv, pos)
            if magic == DLEDGER_BLANK_MAGIC:
                end_kind = END_BLANK
                break
            if pos + ENTRY_HEADER_SIZE > len(buf) or magic == 0 or size == 0:
                end_kind = END_DATA  # never written, or zeroed by a crash: DLedger's recovery ends here
                break
            header = ENTRY_HEADER.unpack_from(mv, pos)
            problem = self._entry_problem(header, info.from_offset + pos, len(buf) - pos)
            if problem:
                if header[4] == 0 or header[8] == 0:  # a torn header (pos or body length zeroed): end of data
                    problem, end_kind = "", END_DATA
                    break
                raise CorruptRecordError(f"bad DLedger entry: {problem}", info.path, pos)
            self._last = (header[2], header[3])
            positions.append(np.array([pos + ENTRY_HEADER_SIZE], np.int64))
            pos += size
        records = np.concatenate(positions) if positions else np.zeros(0, np.int64)
        fields = parse_records(buf, records)
        if check_crc:
            self.check_crcs(buf, fields)
        # a record must fill its entry's body exactly (DLedgerCommitLog appends one record per entry)
        mismatch = fields.valid & (fields.total_size != read_be(buf, records - 4, 4))  # the entry's body length
        bad = np.flatnonzero(~fields.valid | mismatch)
        if len(bad):
            # the entries still end where their headers say (DLedger keeps them): the walk's end stays there,
            # its records stop before the first that fails RocketMQ's checks (no reader gets past it)
            first = int(bad[0])
            end_kind = END_INVALID
            problem = (PROBLEM_DESCRIPTIONS.get(int(fields.problem[first]), "invalid record")
                       if not fields.valid[first] else "record TOTALSIZE differs from its DLedger entry's body length")
            problem += f" (record at {info.from_offset + int(fields.position[first])})"
            records = records[:first]
        # the walk keeps record starts only; fields are parsed again for the records a caller selects
        return FileWalk(index, records, pos, end_kind, problem, lambda: self.queue.buffer(index),
                        problem_position=int(fields.position[first]) if len(bad) else None)

    redispatches_on_recovery = False  # its queues stay cut (see below); the reput service starts at the log's end

    def queues_end_after_recovery(self, valid_end: int, walks: list, abnormal: bool) -> int:
        """Observed with the real 5.3.3 store: after a normal exit the consume queues keep every unit before the
        DLedger log's end; after an abnormal one they are cut at the start of the entry of the last record that
        passes RocketMQ's checks, so that record loses its unit too (and nothing re-dispatches it)."""
        if not abnormal:
            return valid_end
        for walk in reversed(walks):
            if len(walk.fields):
                return self.queue.files[walk.file_index].from_offset + int(walk.positions[-1]) \
                    - ENTRY_HEADER_SIZE
        return self.queue.min_offset

    def recover_end(self, start_index: int, check_crc: bool = True,
                    hints: Optional[np.ndarray] = None) -> tuple[int, list[FileWalk]]:
        """DLedger's recovery: to the end of the entries DLedger keeps (a zeroed header or the last file's data
        end it; an entry whose record fails RocketMQ's checks still counts, as the real store's max offset
        does, but no reader gets past that record)."""
        walks = []
        files = self.queue.files
        if not files:
            return 0, walks
        # DLedger's own recovery starts at the third-last file; after an abnormal exit RocketMQ's walks (and
        # re-indexes) from the file the checkpoint matches, which ``start_index`` names when it is earlier
        index = max(min(start_index, len(files) - RECOVER_FROM_LAST_FILES), 0)
        chained = False
        while True:
            base = files[index].from_offset
            local = None if hints is None else hints[(hints >= base) & (hints < base + self.file_size)] - base
            # no CRC: DLedger's recovery never checks one, and the reput service dispatches without it
            walk = self.walk_file(index, check_crc=False, hints=local, continue_chain=chained)
            walks.append(walk)
            if walk.end_kind == END_BLANK and index + 1 < len(files):
                index, chained = index + 1, True
                continue
            return files[index].from_offset + walk.end_position, walks

    def first_store_timestamp(self, index: int) -> int:
        """Store timestamp of the first record of file ``index`` (in the first entry's body)."""
        buf = self.queue.buffer(index)
        if len(buf) < ENTRY_HEADER_SIZE or ENTRY_HEADER.unpack_from(memoryview(buf), 0)[0] != DLEDGER_MAGIC:
            return 0
        fields = parse_records(buf, np.array([ENTRY_HEADER_SIZE]))
        return int(fields.store_timestamp[0]) if fields.valid[0] else 0


__all__ = ["DLedgerLog", "ENTRY_HEADER", "ENTRY_HEADER_SIZE", "DLEDGER_MAGIC", "DLEDGER_BLANK_MAGIC"]
