"""The commit log: walking records file by file, checking them as recovery does, reading them by offset."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ...errors import CorruptRecordError
from ..format import layout as L
from ..format.codec import PROBLEM_DESCRIPTIONS, RecordBatchFields, parse_records, read_be
from ..format.columns import parse_and_decode
from ..format.prop_crc import check_record_crcs, crc_mode
from .mapped_file_queue import MappedFileQueue

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
RELEASE_BYTES = 16 << 20  # a walk releases the pages it has passed in steps of at least this many bytes

END_BLANK = "blank"  # the file ends with a BLANK marker (or too few bytes for another record)
END_DATA = "end"  # no record starts here: zeros or an unknown magic code (end of written data)
END_INVALID = "invalid"  # a record starts here but fails RocketMQ's checks


FIRST_RECORD_HEAD = 256  # bytes holding a record's fixed fields up to its store timestamp (IPv6 hosts included)
WALK_CHUNK = 1 << 15  # records checked (and hints chained) per step: bounds what a walk holds at once


@dataclass
class FileWalk:
    """Where the valid records of one commit-log file start, and how the walk ended.

    Only the start positions are kept (8 bytes a record); the parsed fields of a whole 1 GiB file would take
    hundreds of megabytes, so they are parsed again on demand for the records a caller selects."""

    file_index: int
    positions: np.ndarray  # start positions of the valid records, in file order
    end_position: int  # position in the file where the walk stopped
    end_kind: str  # END_BLANK, END_DATA or END_INVALID
    problem: str = ""
    buffer: Optional[Callable[[], np.ndarray]] = field(default=None, repr=False)  # the file's bytes
    # where the record that ended the valid ones starts, when not at ``end_position`` (a DLedger entry keeps its
    # place in the log after its record fails RocketMQ's checks)
    problem_position: Optional[int] = None
    # makes the records at the given positions readable before they are parsed again (a remote file's map may
    # have been let go since the walk); None: always readable
    ensure: Optional[Callable[[np.ndarray], None]] = field(default=None, repr=False)
    # lets go of this process's pages of the file in [start, end) (they stay in the page cache); None: keep them
    release: Optional[Callable[[int, int], None]] = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def fields(self) -> RecordBatchFields:
        """Every record's fields, parsed now (large for a full file: prefer :meth:`fields_at` or ``positions``)."""
        return self.fields_at()

    def fields_at(self, idx=None, fixed=None, decode=None) -> RecordBatchFields:
        """Fields of the records ``positions[idx]`` (all when None; they passed the walk's checks); with
        ``decode``, the columns of a batch of those columns decoded in the same pass (see
        :func:`~.columns.parse_and_decode`)."""
        positions = self.positions if idx is None else self.positions[idx]
        if self.ensure is not None:
            self.ensure(positions)
        if decode:
            return parse_and_decode(self.buffer(), positions, decode, fixed)
        return parse_records(self.buffer(), positions, fixed)

    def in_steps(self, idx: Optional[np.ndarray] = None):
        """The record indices ``idx`` (all when None, ascending) in steps of :data:`WALK_CHUNK`; once the caller
        is done with a step, the pages it read are let go, so going over every record of a 1 GiB file holds one
        step's pages rather than the file (what a re-dispatch after a crash does)."""
        idx = np.arange(len(self.positions)) if idx is None else np.asarray(idx)
        for a in range(0, len(idx), WALK_CHUNK):
            step = idx[a:a + WALK_CHUNK]
            yield step
            if self.release is not None and len(step):
                self.release(int(self.positions[step[0]]), int(self.positions[step[-1]]))

    def stored_phy_offsets(self) -> np.ndarray:
        """Each record's PHYSICALOFFSET field (what dispatch and re-dispatch compare), read in steps."""
        return self._stored(None, L.PHYSICAL_OFFSET_POSITION, 8)

    def stored_sysflags(self, idx) -> np.ndarray:
        """The SYSFLAG field of the records ``positions[idx]`` (``idx`` ascending), read in steps."""
        return self._stored(idx, L.SYSFLAG_POSITION, 4)

    def _stored(self, idx, field_position: int, width: int) -> np.ndarray:
        parts = [np.zeros(0, np.int64)]
        for step in self.in_steps(idx):
            positions = self.positions[step]
            if self.ensure is not None:
                self.ensure(positions)
            parts.append(read_be(self.buffer(), positions + field_position, width))
        return np.concatenate(parts)


class CommitLog:
    """Read-only access to ``commitlog/`` as a :class:`MappedFileQueue`."""

    committed: Optional[tuple] = None  # a DLedger log's (committedIndex, committedPos) after recovery

    def __init__(self, queue: MappedFileQueue, prop_crc_required: bool = False,
                 force_verify_prop_crc: Optional[bool] = None):
        self.queue = queue
        self.file_size = queue.file_size
        # a prop-crc store is checked as its broker with forceVerifyPropCRC checks it: a record must carry the
        # __CRC32# property; elsewhere the property is checked where a record carries one. The broker's setting,
        # when given, decides instead (see check_record_crcs)
        self.prop_crc_required = prop_crc_required
        self.force_verify_prop_crc = force_verify_prop_crc
        self.crc_mode = crc_mode(prop_crc_required, force_verify_prop_crc)

    def redispatch_from(self, abnormal: bool) -> Optional[int]:
        """From which commit-log offset opening dispatches recovered records into the queues that lack them
        (None: no re-dispatch): after an abnormal exit, every record recovery walked (``recoverAbnormally``)."""
        return 0 if abnormal else None

    def queues_end_after_recovery(self, valid_end: int, walks: list, abnormal: bool) -> int:
        """Where recovery truncates the consume queues: the commit log's valid end."""
        return valid_end

    def check_crcs(self, buf: np.ndarray, fields: RecordBatchFields) -> np.ndarray:
        """Body CRCs, and the ``__CRC32#`` property CRCs (see :mod:`..format.prop_crc`); the failure mask."""
        return check_record_crcs(buf, fields, self.crc_mode)

    def walk_file(self, index: int, start: int = 0, check_crc: bool = True,
                  hints: Optional[np.ndarray] = None) -> FileWalk:
        """Follow TOTALSIZE from ``start`` through file ``index`` the way recovery does.

        Stops at a BLANK marker, at the end of written data (a magic code that is no record's) or at the first
        record that fails the length arithmetic or, with ``check_crc``, the body CRC. ``hints`` are positions
        known to start records (from consume-queue units): runs of them that chain by TOTALSIZE are taken
        in vectorised steps, and only the gaps between them (records no queue points at) are walked. Records
        are checked :data:`WALK_CHUNK` at a time and the pages behind them released, so a walk of a 1 GiB file
        holds the record starts and one step's pages, not the file.
        """
        buf = self.queue.buffer(index)
        size = len(buf)
        fetch = self.queue.sequential(index, start)
        runs = []
        pos = start
        end_kind = END_BLANK
        mv = memoryview(buf)
        hints = np.zeros(0, dtype=np.int64) if hints is None else \
            _sorted_unique(hints[(hints >= start) & (hints < size)])
        h, released = 0, start
        while pos + 8 <= size:
            if h < len(hints) and hints[h] == pos:
                chain = hints[h:h + WALK_CHUNK]
                if chain[-1] + 8 > fetch.ready:
                    fetch.need(int(chain[-1]) + 8)
                nexts = chain + read_be(buf, chain, 4)
                breaks = np.flatnonzero(nexts[:-1] != chain[1:])
                stop = int(breaks[0]) + 1 if len(breaks) else len(chain)
                runs.append(chain[:stop])
                pos, h = int(nexts[stop - 1]), h + stop
                if pos <= int(chain[stop - 1]) or pos > size:
                    break  # a non-positive or oversized TOTALSIZE: parse_records reports that record
                released = self._release(index, released, int(chain[stop - 1]))
                continue
            if pos + 8 > fetch.ready:
                fetch.need(pos + 8)
            total, magic = _HEAD.unpack_from(mv, pos)
            if magic == L.BLANK_MAGIC_CODE:
                break
            if magic not in (L.MESSAGE_MAGIC_CODE, L.MESSAGE_MAGIC_CODE_V2):
                end_kind = END_DATA
                break
            runs.append(np.array([pos], dtype=np.int64))
            if total <= 0 or pos + total > size:
                break  # parse_records reports it as invalid
            pos += total
            while h < len(hints) and hints[h] < pos:
                h += 1
        del mv
        positions = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
        if len(positions):  # the records' bodies (and the header of one that ended the walk) are read below
            fetch.need(max(pos, int(positions[-1]) + 8))
            self.queue.ensure_records(index, positions[-1:])
        self._release(index, released, size)
        problem, released = "", start
        for a in range(0, len(positions), WALK_CHUNK):
            chunk = positions[a:a + WALK_CHUNK]
            fields = parse_records(buf, chunk, crc_mode=self.crc_mode if check_crc else 0)
            bad = np.flatnonzero(~fields.valid)
            released = self._release(index, released, int(chunk[-1]))
            if len(bad):
                first = int(bad[0])
                end_kind = END_INVALID
                pos = int(fields.position[first])
                problem = PROBLEM_DESCRIPTIONS.get(int(fields.problem[first]), "invalid record")
                positions = positions[:a + first]
                break
        return FileWalk(index, positions, pos, end_kind, problem, lambda: self.queue.buffer(index),
                        ensure=self.queue.records_ensurer(index),
                        release=lambda a, b: self.queue.release(index, a, b))

    def _release(self, index: int, start: int, end: int) -> int:
        """Let go of the pages of file ``index`` in ``[start, end)`` once a walk has passed them (see
        :meth:`MappedFileQueue.release`); returns ``end``, where the next release starts."""
        if end - start >= RELEASE_BYTES:
            self.queue.release(index, start, end)
            return end
        return start

    def recover_end(self, start_index: int, check_crc: bool = True,
                    hints: Optional[np.ndarray] = None) -> tuple[int, list[FileWalk]]:
        """Scan forward from file ``start_index`` to the first invalid record or the end of data.

        ``hints``: absolute offsets known to start records (consume-queue units) to speed the walk up.
        Returns the valid end (absolute offset) and the walks of the scanned files.
        """
        walks = []
        files = self.queue.files
        if not files:
            return 0, walks
        index = max(start_index, 0)
        while True:
            base = files[index].from_offset
            local = None if hints is None else hints[(hints >= base) & (hints < base + self.file_size)] - base
            walk = self.walk_file(index, check_crc=check_crc, hints=local)
            walks.append(walk)
            if walk.end_kind == END_BLANK and index + 1 < len(files):
                index += 1
                continue
            return files[index].from_offset + walk.end_position, walks

    def first_store_timestamp(self, index: int) -> int:
        """Store timestamp of the first record of file ``index`` (0 when it does not start with a record);
        what ``CommitLog.isMappedFileMatchedRecover`` compares with the checkpoint."""
        self.queue.ensure(index, 0, FIRST_RECORD_HEAD)
        buf = self.queue.buffer(index)
        magic = int(np.frombuffer(buf[4:8].tobytes(), ">i4")[0])
        if magic not in (L.MESSAGE_MAGIC_CODE, L.MESSAGE_MAGIC_CODE_V2):
            return 0
        sysflag = int(np.frombuffer(buf[L.SYSFLAG_POSITION:L.SYSFLAG_POSITION + 4].tobytes(), ">i4")[0])
        at = L.BORN_HOST_POSITION + L.host_length(sysflag, L.BORNHOST_V6_FLAG)
        return int(np.frombuffer(buf[at:at + 8].tobytes(), ">i8")[0])

    def first_phy_offset(self, index: int) -> Optional[int]:
        """PHYSICALOFFSET of the first record of file ``index`` (None when it does not start with a record)."""
        buf = self.queue.buffer(index)
        magic = int(np.frombuffer(buf[4:8].tobytes(), ">i4")[0]) if len(buf) >= 8 else 0
        if magic not in (L.MESSAGE_MAGIC_CODE, L.MESSAGE_MAGIC_CODE_V2):
            return None
        at = L.PHYSICAL_OFFSET_POSITION
        return int(np.frombuffer(buf[at:at + 8].tobytes(), ">i8")[0])

    def locate(self, phy_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(file index, position in file) of absolute offsets; file index -1 where no file holds them (before the
        first file, past the last, or in a file missing between them)."""
        phy = np.asarray(phy_offsets, dtype=np.int64)
        if not self.queue.files:
            return np.full(len(phy), -1), phy
        idx = self.queue.indexes_of(phy)
        return idx, np.where(idx >= 0, phy % self.file_size, 0)

    @property
    def missing(self) -> list[tuple[int, int]]:
        """Commit-log ranges ``[start, end)`` of files missing between the first and the last file."""
        return self.queue.missing

    def in_missing(self, phy_offsets: np.ndarray) -> np.ndarray:
        """Whether each commit-log offset lies in a file missing between the first and the last."""
        return self.queue.in_missing(phy_offsets)

    def read_fields(self, index: int, positions: np.ndarray, expected_sizes=None,
                    check_crc: bool = False, what: str = "", fixed=None, copied=None,
                    decode=None) -> RecordBatchFields:
        """Parse the records at ``positions`` of file ``index``; any that fails is a CorruptRecordError.
        ``fixed``: the optional fixed fields to read (see :func:`~.codec.parse_records`; None: all).
        ``decode``: the columns of the batch to build of them, decoded in the same pass (see
        :func:`~.columns.parse_and_decode`).
        ``copied``: the records' bytes copied back to back (:meth:`MappedFileQueue.copy_ranges`, their
        ``expected_sizes`` each) to parse instead of the file's map; the variable fields' positions are then into
        ``copied`` and ``position`` stays the records' place in the file (what errors name)."""
        if copied is None:
            self.queue.ensure_records(index, positions, expected_sizes)
            buf, at = self.queue.buffer(index), positions
        else:
            sizes = np.asarray(expected_sizes, dtype=np.int64)
            buf, at = copied, np.cumsum(sizes) - sizes
        mode = self.crc_mode if check_crc else 0
        if decode:
            bound = None if expected_sizes is None else int(np.asarray(expected_sizes, dtype=np.int64).sum())
            fields = parse_and_decode(buf, at, decode, fixed, mode, bound)
        else:
            fields = parse_records(buf, at, fixed, crc_mode=mode)
        if copied is not None:
            fields.position = np.asarray(positions, dtype=np.int64)
        bad = ~fields.valid
        if expected_sizes is not None:
            bad |= fields.total_size != np.asarray(expected_sizes)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            path = self.queue.files[index].path
            if not fields.valid[i]:
                reason = PROBLEM_DESCRIPTIONS.get(int(fields.problem[i]), "invalid record")
            else:
                reason = (f"expected a record of {int(np.asarray(expected_sizes)[i])} bytes, found TOTALSIZE "
                          f"{int(fields.total_size[i])}")
            raise CorruptRecordError(f"bad commit-log record{what}: {reason}", path, int(fields.position[i]))
        return fields


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort and a neighbour comparison: several times faster than np.unique's hashing
    for the million-element hint arrays of one commit-log file)."""
    ordered = np.sort(np.asarray(values, dtype=np.int64))
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
