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

DLedger's index (``dledger-<selfId>/index/``) has one 32-byte unit per entry, unit ``i`` for entry index ``i``
(``DLedgerMmapFileStore.INDEX_UNIT_SIZE``; read only to find the committed entry when it lies before the walked
files):

======  =====  ==================================================================================
offset  bytes  field
======  =====  ==================================================================================
0       4      magic: 1
4       8      pos: the entry's absolute offset in the data files
12      4      entry size
16      8      entry index
24      8      term
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

from ...errors import CorruptRecordError, StoreFormatError
from ..format.codec import PROBLEM_DESCRIPTIONS, parse_records, read_be
from .commitlog import END_BLANK, END_DATA, END_INVALID, FIRST_RECORD_HEAD, CommitLog, FileWalk
from .dledger_checkpoint import read_dledger_checkpoint
from .mapped_file_queue import MappedFileQueue, list_offset_files

ENTRY_HEADER = struct.Struct(">iiqqqiiii")
"""magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLength (48 bytes, DLedgerEntry.BODY_OFFSET)."""
ENTRY_HEADER_SIZE = ENTRY_HEADER.size  # 48
DLEDGER_MAGIC = 1  # 0x1, DLedgerEntry.MAGIC (MAGIC_1 = CURRENT_MAGIC in DLedger 0.3.1.2)
DLEDGER_BLANK_MAGIC = -1  # 0xFFFFFFFF, MmapFileList.BLANK_MAGIC_CODE
MIN_WINDOW, MAX_WINDOW = 1 << 10, 1 << 20
RECOVER_FROM_LAST_FILES = 3  # DLedgerMmapFileStore.recover starts at mappedFiles.size() - 3
INDEX_DIR = "index"  # DLedgerConfig.getIndexStorePath: dledger-<selfId>/index
INDEX_UNIT = struct.Struct(">iqiqq")
"""DLedger index unit (DLedgerMmapFileStore.INDEX_UNIT_SIZE = 32): magic, pos, size, index, term."""


class DLedgerLog(CommitLog):
    """Read-only access to a DLedger data directory as a commit log of records wrapped in entries."""

    def __init__(self, queue: MappedFileQueue, prop_crc_required: bool = False,
                 force_verify_prop_crc: Optional[bool] = None, committed_only: bool = False):
        super().__init__(queue, prop_crc_required, force_verify_prop_crc)
        self._last = None  # (index, term) of the last entry walked in order, for DLedger's continuity checks
        # serve records before committedPos only, as a broker of a group of several peers does (a one-node
        # group commits every entry once it leads): see dledger_checkpoint
        self.committed_only = committed_only
        self.committed: Optional[tuple] = None  # (committedIndex, committedPos) after recovery, when there is one

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
        fetch = self.queue.sequential(index, start)
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
                last = int(entries[min(h + window, len(entries)) - 1]) + ENTRY_HEADER_SIZE + 8
                if last > fetch.ready:
                    fetch.need(last)
                run = self._header_run(buf, entries[h:h + window], info.from_offset)
                window = min(window * 2, MAX_WINDOW) if run == window else MIN_WINDOW
                if run:
                    positions.append(entries[h:h + run] + ENTRY_HEADER_SIZE)
                    pos = int(entries[h + run - 1]) + int(read_be(buf, entries[h + run - 1:h + run] + 4, 4)[0])
                    h += run
                    continue
            if pos + ENTRY_HEADER_SIZE + 8 > fetch.ready:
                fetch.need(pos + ENTRY_HEADER_SIZE + 8)
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
        if len(records):  # the records (the entries' bodies) are parsed below
            fetch.need(max(pos, int(records[-1]) + 8))
            self.queue.ensure_records(index, records[-1:])
        fields = parse_records(buf, records, crc_mode=self.crc_mode if check_crc else 0)
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
                        ensure=self.queue.records_ensurer(index),
                        release=lambda a, b: self.queue.release(index, a, b),
                        problem_position=int(fields.position[first]) if len(bad) else None)

    def queues_end_after_recovery(self, valid_end: int, walks: list, abnormal: bool) -> int:
        """Where recovery truncates the consume queues (``truncateDirtyLogicFiles``). After a normal exit: the
        log's end. After an abnormal one ``dledgerRecoverAbnormally`` ends at ``processOffset``, the start of the
        last file walked plus the sizes of the RECORDS in it that pass ``checkMessageAndReturnSize`` (CRCs
        included): the 48-byte entry headers are not counted, so it lies 48 bytes per entry of that file before
        the log's end, and units at or past it are cut (observed with the real 5.3.3 store: the last records'
        units go; re-dispatch from committedPos brings back those at or past it, see :meth:`redispatch_from`).
        With ``committed_only`` nothing at or past committedPos is kept either."""
        end = valid_end
        if abnormal:
            last = next((w for w in reversed(walks) if len(w)), None)
            if last is None:
                end = self.queue.files[walks[-1].file_index].from_offset if walks else self.queue.min_offset
            else:
                fields = last.fields_at()
                bad = np.flatnonzero(self.check_crcs(last.buffer(), fields))
                sizes = fields.total_size[:int(bad[0])] if len(bad) else fields.total_size
                end = self.queue.files[last.file_index].from_offset + int(sizes.sum())
        return min(end, valid_end)

    def redispatch_from(self, abnormal: bool) -> Optional[int]:
        """Where the reput service starts dispatching on opening: ``getConfirmOffset`` = ``getMaxOffset`` =
        committedPos (the log's start without one), after either exit; records from there to the served end
        get the units their queues lack."""
        return self.committed[1] if self.committed is not None else self.queue.min_offset

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
            end = files[index].from_offset + walk.end_position
            self.committed = self._committed(walks)
            if self.committed_only:  # getMaxOffset: committedPos, else the log's start (nothing served)
                end = min(end, self.committed[1] if self.committed is not None else self.queue.min_offset)
            return end, walks

    def _committed(self, walks: list) -> Optional[tuple]:
        """(committedIndex, committedPos) as ``DLedgerMmapFileStore.recover`` / ``updateCommittedIndex`` derive
        them from the checkpoint: clamped to the last entry, None when the file or key is missing (-1), when
        the log has no entry or the index is before its first entry."""
        checkpoint = read_dledger_checkpoint(self.queue.directory.parent)
        entries = [(w, w.positions - ENTRY_HEADER_SIZE) for w in walks if len(w)]
        if checkpoint is None or checkpoint.committed_index < 0 or not entries:
            return None
        last_walk, last_entries = entries[-1]
        end_index = int(read_be(last_walk.buffer(), last_entries[-1:] + 8, 8)[0])
        first = self.queue.buffer(0)
        begin_index = int(ENTRY_HEADER.unpack_from(memoryview(first), 0)[2]) if len(first) >= ENTRY_HEADER_SIZE else 0
        wanted = min(checkpoint.committed_index, end_index)
        if wanted < begin_index:
            return None
        for walk, starts in entries:
            buf = walk.buffer()
            hit = np.flatnonzero(read_be(buf, starts + 8, 8) == wanted)
            if len(hit):
                at = int(starts[hit[0]])
                size = int(read_be(buf, np.array([at + 4]), 4)[0])
                return wanted, self.queue.files[walk.file_index].from_offset + at + size
        return wanted, self._entry_end_from_index(wanted)

    def _entry_end_from_index(self, entry_index: int) -> int:
        """pos + size of entry ``entry_index`` from DLedger's index files (entries before the walked files)."""
        directory = self.queue.directory.parent / INDEX_DIR
        byte = entry_index * INDEX_UNIT.size
        for info in list_offset_files(directory):
            if info.from_offset <= byte and byte + INDEX_UNIT.size <= info.from_offset + info.length:
                with info.path.open("rb") as fh:
                    fh.seek(byte - info.from_offset)
                    magic, pos, size, index, _term = INDEX_UNIT.unpack(fh.read(INDEX_UNIT.size))
                if magic == DLEDGER_MAGIC and index == entry_index and size > ENTRY_HEADER_SIZE:
                    return pos + size
                raise StoreFormatError(f"DLedger index unit of committed entry {entry_index}: expected magic "
                                       f"{DLEDGER_MAGIC} and index {entry_index}, found magic {magic}, index {index}, "
                                       f"size {size}", info.path, byte - info.from_offset)
        raise StoreFormatError(f"DLedger committed entry {entry_index} (checkpoint committedIndex) is in no data "
                               f"file walked and no index file holds its unit at byte {byte}", directory)

    def first_phy_offset(self, index: int) -> Optional[int]:
        """PHYSICALOFFSET of the first record of file ``index`` (in the first entry's body; None without one)."""
        buf = self.queue.buffer(index)
        if len(buf) < ENTRY_HEADER_SIZE * 2 or ENTRY_HEADER.unpack_from(memoryview(buf), 0)[0] != DLEDGER_MAGIC:
            return None
        fields = parse_records(buf, np.array([ENTRY_HEADER_SIZE]))
        return int(fields.phy_offset[0]) if fields.valid[0] else None

    def first_store_timestamp(self, index: int) -> int:
        """Store timestamp of the first record of file ``index`` (in the first entry's body)."""
        self.queue.ensure(index, 0, ENTRY_HEADER_SIZE + FIRST_RECORD_HEAD)
        buf = self.queue.buffer(index)
        if len(buf) < ENTRY_HEADER_SIZE or ENTRY_HEADER.unpack_from(memoryview(buf), 0)[0] != DLEDGER_MAGIC:
            return 0
        fields = parse_records(buf, np.array([ENTRY_HEADER_SIZE]))
        return int(fields.store_timestamp[0]) if fields.valid[0] else 0


__all__ = ["DLedgerLog", "ENTRY_HEADER", "ENTRY_HEADER_SIZE", "DLEDGER_MAGIC", "DLEDGER_BLANK_MAGIC"]
