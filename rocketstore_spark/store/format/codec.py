"""Vectorised parsing and checking of commit-log records, plus the small Java-compatible helpers.

A batch of records is described by a uint8 buffer (usually one memory-mapped commit-log file) and an array of
record start positions inside it. :func:`parse_records` computes every field position with numpy in one pass,
the way ``CommitLog.checkMessageAndReturnSize`` walks a single record, and reports which records pass
RocketMQ's own checks (magic code, non-negative lengths, length arithmetic of ``calMsgLength``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

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


#: Bytes from a record's start to the end of BODYLEN when both hosts are IPv6: every fixed-position field lies
#: inside this span, so one contiguous copy per record gathers them all.
HEADER_SPAN = L.BORN_HOST_POSITION + L.IPV6_HOST_LENGTH + 8 + L.IPV6_HOST_LENGTH + 4 + 8 + 4


_V4_OFFSETS = {  # where each fixed field sits when both hosts are IPv4 (born host 8 bytes, store host 8 bytes)
    "total": (L.TOTALSIZE_POSITION, ">i4"), "magic": (L.MAGIC_CODE_POSITION, ">i4"),
    "body_crc": (L.BODY_CRC_POSITION, ">i4"), "queue_id": (L.QUEUE_ID_POSITION, ">i4"),
    "flag": (L.FLAG_POSITION, ">i4"), "queue_offset": (L.QUEUE_OFFSET_POSITION, ">i8"),
    "phy_offset": (L.PHYSICAL_OFFSET_POSITION, ">i8"), "sysflag": (L.SYSFLAG_POSITION, ">i4"),
    "born_ts": (L.BORN_TIMESTAMP_POSITION, ">i8"), "store_ts": (56, ">i8"), "reconsume": (72, ">i4"),
    "prepared": (76, ">i8"), "body_len": (84, ">i4"),
}
#: The header of a record with IPv4 hosts as one numpy record type (unaligned, big-endian fields).
V4_HEADER_DTYPE = np.dtype({"names": list(_V4_OFFSETS), "formats": [f for _, f in _V4_OFFSETS.values()],
                            "offsets": [o for o, _ in _V4_OFFSETS.values()], "itemsize": HEADER_SPAN})
_HOST_DEPENDENT = ("store_ts", "reconsume", "prepared", "body_len")  # shifted by 12 per IPv6 host before them


class HeaderRows:
    """The first :data:`HEADER_SPAN` bytes of each record, gathered as rows of one matrix.

    Fancy-indexing a strided "every byte starts a row" view copies each record's header with one memcpy, which
    is several times faster than gathering every field byte by byte; fields are then views of that matrix.
    """

    def __init__(self, buf: np.ndarray, positions: np.ndarray):
        rows = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - HEADER_SPAN + 1, HEADER_SPAN),
                                               strides=(buf.strides[0], buf.strides[0]), writeable=False)
        self.matrix = rows[positions]
        self.v4 = self.matrix.view(V4_HEADER_DTYPE).reshape(-1)

    @staticmethod
    def fits(buf: np.ndarray, positions: np.ndarray) -> bool:
        return len(positions) > 0 and bool(((positions >= 0) & (positions + HEADER_SPAN <= len(buf))).all())

    def field(self, name: str, shift: np.ndarray | None = None) -> np.ndarray:
        """One fixed field as int64; ``shift`` (bytes added by IPv6 hosts, per record) for the fields after
        the born host."""
        if shift is None:
            return self.v4[name].astype(np.int64)
        offset, fmt = _V4_OFFSETS[name]
        width = np.dtype(fmt).itemsize
        out = np.empty(len(self.matrix), dtype=np.int64)
        for extra in np.unique(shift):  # at most three distinct: 0, 12, 24
            rows = shift == extra
            start = offset + int(extra)
            cells = np.ascontiguousarray(self.matrix[rows, start:start + width])
            out[rows] = cells.view(fmt).reshape(-1)
        return out


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

    def __len__(self) -> int:
        return len(self.position)

    def take(self, idx: np.ndarray) -> "RecordBatchFields":
        return RecordBatchFields(**{k: None if v is None else v[idx] for k, v in self.__dict__.items()})


PROBLEM_NONE = 0
PROBLEM_MAGIC = 1
PROBLEM_TRUNCATED = 2
PROBLEM_NEGATIVE_LENGTH = 3
PROBLEM_LENGTH_MISMATCH = 4
PROBLEM_CRC = 5
PROBLEM_PROP_CRC = 6
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


def parse_records(buf: np.ndarray, positions: np.ndarray, fixed=None) -> RecordBatchFields:
    """Parse the records starting at ``positions`` of ``buf``; never reads outside ``buf``.

    Records that fail a check get ``valid=False`` and a ``problem`` code; their later fields are zero.
    ``fixed`` names the :data:`OPTIONAL_FIXED` fields to read (None: all); the others are left None, which a
    body-only scan uses to skip most of the header.
    """
    pos = np.asarray(positions, dtype=np.int64)
    n = len(pos)
    size = len(buf)
    problem = np.zeros(n, dtype=np.int8)
    zeros = np.zeros(n, dtype=np.int64)

    def fail(mask: np.ndarray, code: int) -> None:
        problem[(problem == 0) & mask] = code

    def safe(p: np.ndarray, width: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Read where the field fits in the buffer and the record is still sound (and is one of ``rows``,
        when given); 0 elsewhere."""
        ok = (problem == 0) & (p >= 0) & (p + width <= size)
        if rows is not None:
            fail(rows & ~ok, PROBLEM_TRUNCATED)
            ok &= rows
        else:
            fail(~ok, PROBLEM_TRUNCATED)
        if ok.all():
            return read_be(buf, p, width)
        out = np.zeros(n, dtype=np.int64)
        if ok.any():
            out[ok] = read_be(buf, p[ok], width)
        return out

    if HeaderRows.fits(buf, pos) and fixed is not None:
        head = _fixed_fields_direct(buf, pos, size, fail, problem, fixed)
    elif HeaderRows.fits(buf, pos):
        head = _fixed_fields_from_rows(HeaderRows(buf, pos), pos, size, fail, problem)
    else:
        head = _fixed_fields_one_by_one(pos, size, fail, safe)
    total, magic, sysflag, body_len = head["total"], head["magic"], head["sysflag"], head["body_len"]
    born_host_pos = pos + L.BORN_HOST_POSITION
    born_len = np.where(sysflag & L.BORNHOST_V6_FLAG, L.IPV6_HOST_LENGTH, L.IPV4_HOST_LENGTH)
    store_host_pos = born_host_pos + born_len + 8
    store_len = np.where(sysflag & L.STOREHOSTADDRESS_V6_FLAG, L.IPV6_HOST_LENGTH, L.IPV4_HOST_LENGTH)
    body_len_pos = store_host_pos + store_len + 12
    fail(body_len < 0, PROBLEM_NEGATIVE_LENGTH)
    body_pos = body_len_pos + 4
    topic_len_pos = body_pos + np.maximum(body_len, 0)
    v2 = magic == L.MESSAGE_MAGIC_CODE_V2
    # TOPICLEN is 1 byte (MESSAGE_MAGIC_CODE) or 2 (V2): read each width only for the records that use it
    if not v2.any():
        topic_len = safe(topic_len_pos, 1)
    elif v2.all():
        topic_len = safe(topic_len_pos, 2)
    else:
        topic_len = np.where(v2, safe(topic_len_pos, 2, v2), safe(topic_len_pos, 1, ~v2))
    fail(topic_len < 0, PROBLEM_NEGATIVE_LENGTH)
    topic_pos = topic_len_pos + np.where(v2, 2, 1)
    props_len_pos = topic_pos + np.maximum(topic_len, 0)
    props_len = safe(props_len_pos, 2)
    fail(props_len < 0, PROBLEM_NEGATIVE_LENGTH)
    props_pos = props_len_pos + 2
    fail(props_pos + np.maximum(props_len, 0) > size, PROBLEM_TRUNCATED)
    fail(props_pos + props_len != pos + total, PROBLEM_LENGTH_MISMATCH)
    valid = problem == 0
    keep = lambda a: np.where(valid, a, zeros)  # noqa: E731 - zero the fields of records that failed
    return RecordBatchFields(
        position=pos, total_size=total, magic=magic, body_crc=head["body_crc"], queue_id=head["queue_id"],
        flag=head["flag"], queue_offset=head["queue_offset"], phy_offset=head["phy_offset"], sysflag=sysflag,
        born_timestamp=head["born_ts"], born_host_pos=keep(born_host_pos), store_timestamp=head["store_ts"],
        store_host_pos=keep(store_host_pos), reconsume_times=head["reconsume"], prepared_offset=head["prepared"],
        body_pos=keep(body_pos), body_len=keep(body_len), topic_pos=keep(topic_pos), topic_len=keep(topic_len),
        props_pos=keep(props_pos), props_len=keep(props_len), valid=valid, problem=problem,
    )


def _first_checks(pos, size, total, magic, fail) -> None:
    """The checks on TOTALSIZE and MAGICCODE that decide whether the rest of a record is read at all."""
    fail((magic != L.MESSAGE_MAGIC_CODE) & (magic != L.MESSAGE_MAGIC_CODE_V2), PROBLEM_MAGIC)
    fail(total <= 0, PROBLEM_NEGATIVE_LENGTH)
    fail(pos + total > size, PROBLEM_TRUNCATED)


def _fixed_fields_one_by_one(pos, size, fail, safe) -> dict:
    """The fixed fields read one at a time with bounds checks (records near the end of the buffer)."""
    fail(pos + 48 > size, PROBLEM_TRUNCATED)
    head = {"total": safe(pos, 4), "magic": safe(pos + L.MAGIC_CODE_POSITION, 4)}
    _first_checks(pos, size, head["total"], head["magic"], fail)
    for name in ("body_crc", "queue_id", "flag", "queue_offset", "phy_offset", "sysflag", "born_ts"):
        offset, fmt = _V4_OFFSETS[name]
        head[name] = safe(pos + offset, np.dtype(fmt).itemsize)
    shifts = _host_shifts(head["sysflag"])
    for name in _HOST_DEPENDENT:
        offset, fmt = _V4_OFFSETS[name]
        head[name] = safe(pos + offset + shifts[name], np.dtype(fmt).itemsize)
    return head


def _fixed_fields_direct(buf, pos, size, fail, problem, wanted) -> dict:
    """Only the fields the checks need plus ``wanted``, each gathered straight from the buffer (every header
    fits: :meth:`HeaderRows.fits`); fields of records that failed the first checks are zero, as elsewhere."""
    unknown = set(wanted) - set(OPTIONAL_FIXED)
    if unknown:
        raise InvalidArgumentError(f"unknown fixed fields {sorted(unknown)}; expected some of {OPTIONAL_FIXED}")
    head = {"total": read_be(buf, pos + L.TOTALSIZE_POSITION, 4),
            "magic": read_be(buf, pos + L.MAGIC_CODE_POSITION, 4)}
    _first_checks(pos, size, head["total"], head["magic"], fail)
    sound = problem == 0
    everyone = bool(sound.all())

    def read(name, shift=0):
        offset, fmt = _V4_OFFSETS[name]
        values = read_be(buf, pos + offset + shift, np.dtype(fmt).itemsize)
        return values if everyone else np.where(sound, values, 0)

    head["sysflag"] = read("sysflag")
    shifts = _host_shifts(head["sysflag"])
    for name in OPTIONAL_FIXED + ("body_len",):
        if name == "body_len" or name in wanted:
            head[name] = read(name, shifts[name]) if name in shifts else read(name)
        else:
            head[name] = None
    return head


def _fixed_fields_from_rows(rows: HeaderRows, pos, size, fail, problem) -> dict:
    """The same fields from gathered header rows: every field is in range, so only the record checks apply
    (fields of records that failed them are zero, as in the one-by-one path)."""
    head = {"total": rows.field("total"), "magic": rows.field("magic")}
    _first_checks(pos, size, head["total"], head["magic"], fail)
    sound = problem == 0
    everyone = bool(sound.all())
    for name in ("body_crc", "queue_id", "flag", "queue_offset", "phy_offset", "sysflag", "born_ts"):
        head[name] = rows.field(name) if everyone else np.where(sound, rows.field(name), 0)
    shifts = _host_shifts(head["sysflag"])
    for name in _HOST_DEPENDENT:
        shift = shifts[name] if shifts[name].any() else None
        head[name] = rows.field(name, shift) if everyone else np.where(sound, rows.field(name, shift), 0)
    return head


def _host_shifts(sysflag: np.ndarray) -> dict:
    """Bytes that IPv6 hosts add before each host-dependent field (12 per IPv6 host in front of it):
    STORETIMESTAMP moves with the born host, the fields after the store host with both."""
    extra = L.IPV6_HOST_LENGTH - L.IPV4_HOST_LENGTH
    born = np.where(sysflag & L.BORNHOST_V6_FLAG, extra, 0)
    both = born + np.where(sysflag & L.STOREHOSTADDRESS_V6_FLAG, extra, 0)
    return {"store_ts": born, "reconsume": both, "prepared": both, "body_len": both}


try:  # ISA-L's CRC-32 is zlib's polynomial (java.util.zip.CRC32), about 2.5x faster per body
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib gives identical values
    _crc32 = zlib.crc32


def body_crc32(data) -> int:
    """``UtilAll.crc32``: java.util.zip.CRC32 of the bytes, masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


def check_body_crcs(buf: np.ndarray, fields: RecordBatchFields) -> np.ndarray:
    """Mark records whose stored BODYCRC differs from the body's CRC32 (only bodies longer than 0 are checked,
    as in ``checkMessageAndReturnSize``). Returns the boolean mask of CRC failures."""
    bad = np.zeros(len(fields), dtype=bool)
    mv = memoryview(buf)
    idx = np.flatnonzero(fields.valid & (fields.body_len > 0))
    if len(idx):
        # plain ints and ISA-L's CRC in one comprehension: the per-record cost is the CRC, not numpy scalars
        starts = fields.body_pos[idx].tolist()
        ends = (fields.body_pos[idx] + fields.body_len[idx]).tolist()
        crcs = np.fromiter((_crc32(mv[a:b]) for a, b in zip(starts, ends)), dtype=np.int64, count=len(idx))
        bad[idx] = (crcs & 0x7FFFFFFF) != fields.body_crc[idx]
    fields.problem[bad & (fields.problem == 0)] = PROBLEM_CRC
    fields.valid &= ~bad
    return bad


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
