"""Vectorised parsing and checking of commit-log records, plus the small Java-compatible helpers.

A batch of records is described by a uint8 buffer (usually one memory-mapped commit-log file) and an array of
record start positions inside it. :func:`parse_records` reads every fixed field and variable-field position in
one native pass, the way ``CommitLog.checkMessageAndReturnSize`` walks a single record, and reports which
records pass RocketMQ's own checks (magic code, non-negative lengths, length arithmetic of ``calMsgLength``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ... import _native
from ...errors import InvalidArgumentError
from . import layout as L
from .java_hash import tags_code_of

_INT_DTYPES = {1: ">i1", 2: ">i2", 4: ">i4", 8: ">i8"}


def read_be(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Signed big-endian integers of ``width`` bytes at each of ``pos`` (all positions must be in range)."""
    if len(pos) == 0:
        return np.zeros(0, dtype=np.int64)
    pos = np.asarray(pos, dtype=np.int64)
    if buf.flags.c_contiguous and len(buf) >= width:
        # "an integer at every byte offset": an unaligned big-endian view of the buffer, gathered once (2x the
        # byte-matrix gather below)
        every = np.ndarray(shape=(len(buf) - width + 1,), dtype=_INT_DTYPES[width], buffer=buf, strides=(1,))
        return every[pos].astype(np.int64)
    cells = buf[pos[:, None] + np.arange(width)]
    return np.ascontiguousarray(cells).view(_INT_DTYPES[width]).reshape(-1).astype(np.int64)


def native_bytes(buf) -> np.ndarray:
    """``buf`` as the native kernels take it: one C-contiguous run of bytes (a memory map's array as it is)."""
    buf = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    if buf.dtype != np.uint8 or not buf.flags.c_contiguous:
        buf = np.ascontiguousarray(buf).view(np.uint8).reshape(-1)
    return buf


@dataclass
class RecordBatchFields:
    """Struct of arrays: the fixed fields and the positions of the variable ones for a batch of records
    (an optional fixed field that was not asked for is None)."""

    position: np.ndarray
    total_size: np.ndarray
    magic: np.ndarray
    body_crc: np.ndarray
    queue_id: np.ndarray
    flag: np.ndarray
    queue_offset: np.ndarray
    phy_offset: np.ndarray
    sysflag: np.ndarray
    born_timestamp: np.ndarray
    born_host_pos: np.ndarray
    store_timestamp: np.ndarray
    store_host_pos: np.ndarray
    reconsume_times: np.ndarray
    prepared_offset: np.ndarray
    body_pos: np.ndarray
    body_len: np.ndarray
    topic_pos: np.ndarray
    topic_len: np.ndarray
    props_pos: np.ndarray
    props_len: np.ndarray
    valid: np.ndarray
    problem: np.ndarray  # per record: 0 ok, else one of the PROBLEM_* codes below
    # the variable-length columns decoded in the parsing pass (name → Arrow array, see
    # :func:`.columns.parse_and_decode`), or None
    decoded: Optional[dict] = None

    def __len__(self) -> int:
        return len(self.position)

    def take(self, idx: np.ndarray) -> "RecordBatchFields":
        """The records ``idx`` (their decoded columns are left behind: a batch built of them decodes again)."""
        return RecordBatchFields(**{k: None if v is None else v[idx] for k, v in self.__dict__.items()
                                    if k != "decoded"})


# the record checks' codes, declared by the native kernel that applies them
PROBLEM_NONE = _native.PROBLEM_NONE
PROBLEM_MAGIC = _native.PROBLEM_MAGIC
PROBLEM_TRUNCATED = _native.PROBLEM_TRUNCATED
PROBLEM_NEGATIVE_LENGTH = _native.PROBLEM_NEGATIVE_LENGTH
PROBLEM_LENGTH_MISMATCH = _native.PROBLEM_LENGTH_MISMATCH
PROBLEM_CRC = _native.PROBLEM_CRC
PROBLEM_PROP_CRC = _native.PROBLEM_PROP_CRC
PROBLEM_DESCRIPTIONS = {
    PROBLEM_MAGIC: "magic code is neither MESSAGE_MAGIC_CODE (0xDAA320A7) nor MESSAGE_MAGIC_CODE_V2 (0xDAA320AB)",
    PROBLEM_TRUNCATED: "record fields run past the end of the file",
    PROBLEM_NEGATIVE_LENGTH: "a length field (total, body, topic or properties) is negative",
    PROBLEM_LENGTH_MISMATCH: "TOTALSIZE does not equal the length implied by the field lengths (calMsgLength)",
    PROBLEM_CRC: "body CRC32 does not match the stored BODYCRC",
    PROBLEM_PROP_CRC: "record CRC32 does not match its __CRC32# property (or a required one is missing)",
}


#: Fixed fields only some columns need (codec names); the others are read for every record, because the record
#: checks and the positions of the variable fields depend on them.
OPTIONAL_FIXED = ("body_crc", "queue_id", "flag", "queue_offset", "phy_offset", "born_ts", "store_ts", "reconsume",
                  "prepared")


#: RecordBatchFields' name of each optional fixed field
_OPTIONAL_FIELD = {"body_crc": "body_crc", "queue_id": "queue_id", "flag": "flag", "queue_offset": "queue_offset",
                   "phy_offset": "phy_offset", "born_ts": "born_timestamp", "store_ts": "store_timestamp",
                   "reconsume": "reconsume_times", "prepared": "prepared_offset"}


def parse_records(buf: np.ndarray, positions: np.ndarray, fixed=None, crc_mode: int = 0) -> RecordBatchFields:
    """Parse the records starting at ``positions`` of ``buf``; never reads outside ``buf``.

    Records that fail a check get ``valid=False`` and a ``problem`` code; their later fields are zero.
    ``fixed`` names the :data:`OPTIONAL_FIXED` fields to return (None: all); the others are left None.
    ``crc_mode`` adds CRC checks to the others (see :func:`.prop_crc.crc_mode`; 0: none).
    One native kernel reads and checks every record, the way ``CommitLog.checkMessageAndReturnSize`` walks one.
    """
    check_fixed(fixed)
    pos = np.require(positions, dtype=np.int64, requirements=["C", "A"])
    columns, problem = header_outputs(len(pos))
    _native.parse_records(native_bytes(buf), pos, columns, problem, crc_mode)
    return fields_of(pos, columns, problem, fixed)


def check_fixed(fixed) -> None:
    """``fixed`` names only :data:`OPTIONAL_FIXED` fields (or is None)."""
    if fixed is not None:
        unknown = set(fixed) - set(OPTIONAL_FIXED)
        if unknown:
            raise InvalidArgumentError(f"unknown fixed fields {sorted(unknown)}; expected some of {OPTIONAL_FIXED}")


def header_outputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The arrays the native parse of ``n`` records fills: ``HEADER_COLUMNS × n`` int64 fields, int8 problems."""
    return np.empty((len(_native.HEADER_COLUMNS), n), dtype=np.int64), np.empty(n, dtype=np.int8)


def fields_of(pos: np.ndarray, columns: np.ndarray, problem: np.ndarray, fixed=None) -> RecordBatchFields:
    """The :class:`RecordBatchFields` of the records at ``pos`` from the native parse's outputs (the optional
    fixed fields not named by ``fixed`` left None)."""
    fields = dict(zip(_native.HEADER_COLUMNS, columns))
    if fixed is not None:
        for name in set(OPTIONAL_FIXED) - set(fixed):
            fields[_OPTIONAL_FIELD[name]] = None
    return RecordBatchFields(position=pos, valid=problem == 0, problem=problem, **fields)


def body_crc32(data) -> int:
    """``UtilAll.crc32``: java.util.zip.CRC32 of the bytes, masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


# --- ids and hosts ---------------------------------------------------------------------------------------------


def format_host(address: bytes, port: int) -> str:
    """A host as Java's ``InetSocketAddress`` prints it here: ``a.b.c.d:port`` or ``[x:x:x:x:x:x:x:x]:port``."""
    if len(address) == 4:
        return ".".join(str(b) for b in address) + f":{port}"
    groups = [(address[i] << 8) | address[i + 1] for i in range(0, 16, 2)]
    return "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """Inverse of :func:`format_host`; accepts compressed IPv6 text too."""
    import ipaddress

    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected 'a.b.c.d:port' or '[v6]:port', found {text!r}")
    host = host.strip("[]")
    return ipaddress.ip_address(host).packed, int(port)


def offset_msg_id(store_address: bytes, port: int, phy_offset: int) -> str:
    """``MessageDecoder.createMessageId``: hex of store address ‖ port (4) ‖ physical offset (8), uppercase."""
    return (store_address + port.to_bytes(4, "big") + phy_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_msg_id(msg_id: str) -> tuple[bytes, int, int]:
    """``MessageDecoder.decodeMessageId``: (address, port, physical offset) from a 32- or 56-char offsetMsgId."""
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"expected a 32 or 56 hex-character offsetMsgId, found {len(msg_id)} characters")
    addr_len = len(raw) - 12
    return raw[:addr_len], int.from_bytes(raw[addr_len:addr_len + 4], "big"), int.from_bytes(raw[-8:], "big")


def dispatch_tags_code(topic: str, properties: dict, store_timestamp: int,
                       delay_levels_ms=L.DEFAULT_DELAY_LEVELS_MS) -> int:
    """The consume-queue tagsCode the store computes at dispatch (``checkMessageAndReturnSize``).

    For ``SCHEDULE_TOPIC_XXXX`` with a DELAY level it is the delivery time (store time + the level's delay,
    the level clamped to the highest); otherwise the Java hash of the TAGS property (0 when absent).
    """
    if topic == L.SCHEDULE_TOPIC:
        level_text = properties.get(L.PROPERTY_DELAY_TIME_LEVEL)
        if level_text is not None:
            level = min(int(level_text), len(delay_levels_ms))
            if level > 0:
                return store_timestamp + delay_levels_ms[level - 1]
    return tags_code_of(properties.get(L.PROPERTY_TAGS))
