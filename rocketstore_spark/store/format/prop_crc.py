"""The whole-record CRC property that 5.2+ brokers append with ``enabledAppendPropCRC=true``.

The last 20 bytes (``CommitLog.CRC32_RESERVED_LEN``) of such a record's properties are one property:

=======  =====  ==========================================================================================
offset   bytes  content
=======  =====  ==========================================================================================
0        8      ``__CRC32#`` (``MessageConst.PROPERTY_CRC32``)
8        1      ``\\u0001`` (``MessageDecoder.NAME_VALUE_SEPARATOR``)
9        10     ASCII digits of ``UtilAll.crc32`` (CRC32 & 0x7FFFFFFF) of the record's bytes before these 20,
                least significant digit first, padded with ``0`` at the end (``MessageDecoder.createCrc32``)
19       1      ``\\u0002`` (``MessageDecoder.PROPERTY_SEPARATOR``)
=======  =====  ==========================================================================================

The CRC is computed after QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are filled in, so it covers the record
exactly as stored. ``checkMessageAndReturnSize`` verifies it instead of the body CRC when the broker runs with
``forceVerifyPropCRC``; a record without the property then fails. RocketMQ's decoder keeps the pair in the
property map, so the ``properties`` column does too.
"""

from __future__ import annotations

import zlib

import numpy as np

from . import layout as L
from .codec import PROBLEM_PROP_CRC, RecordBatchFields, check_body_crcs

#: The 9 bytes that open the reserved tail: name and separator.
_PREFIX = np.frombuffer((L.PROPERTY_CRC32 + L.NAME_VALUE_SEPARATOR).encode(), dtype=np.uint8)
_DIGITS = 10  # the CRC's decimal digits
_END = ord(L.PROPERTY_SEPARATOR)


def crc_tail_positions(fields: RecordBatchFields) -> np.ndarray:
    """Where each record's reserved 20 bytes would start (the end of its properties minus 20)."""
    return fields.props_pos + fields.props_len - L.CRC32_RESERVED_LEN


def has_prop_crc(buf: np.ndarray, fields: RecordBatchFields) -> np.ndarray:
    """Per (valid) record: do its properties end with the ``__CRC32#`` pair?"""
    out = fields.valid & (fields.props_len >= L.CRC32_RESERVED_LEN)
    rows = np.flatnonzero(out)
    if not len(rows):
        return out
    tail = crc_tail_positions(fields)[rows]
    cells = buf[tail[:, None] + np.arange(L.CRC32_RESERVED_LEN)]
    digits = cells[:, len(_PREFIX):len(_PREFIX) + _DIGITS]
    ok = ((cells[:, :len(_PREFIX)] == _PREFIX).all(axis=1) & (cells[:, -1] == _END)
          & ((digits >= ord("0")) & (digits <= ord("9"))).all(axis=1))
    out[rows] = ok
    return out


def stored_prop_crcs(buf: np.ndarray, fields: RecordBatchFields, rows: np.ndarray) -> np.ndarray:
    """The CRC the digits of ``rows`` encode (read last digit first, as ``checkMessageAndReturnSize`` does)."""
    start = crc_tail_positions(fields)[rows] + len(_PREFIX)
    digits = (buf[start[:, None] + np.arange(_DIGITS)].astype(np.int64) - ord("0"))
    weights = 10 ** np.arange(_DIGITS, dtype=np.int64)  # digit i (first = least significant) weighs 10**i
    return (digits * weights).sum(axis=1)


def record_crc(buf: np.ndarray, position: int, total_size: int) -> int:
    """``UtilAll.crc32`` of a record's bytes before its reserved CRC tail."""
    return zlib.crc32(memoryview(buf)[position:position + total_size - L.CRC32_RESERVED_LEN]) & 0x7FFFFFFF


def check_prop_crcs(buf: np.ndarray, fields: RecordBatchFields, required: bool = False) -> np.ndarray:
    """Mark records whose ``__CRC32#`` digits differ from the CRC of their bytes (and, with ``required`` — the
    broker's ``forceVerifyPropCRC`` — records that lack the property). Returns the mask of failures."""
    present = has_prop_crc(buf, fields)
    bad = fields.valid & ~present if required else np.zeros(len(fields), dtype=bool)
    rows = np.flatnonzero(present)
    if len(rows):
        stored = stored_prop_crcs(buf, fields, rows)
        for row, expected in zip(rows.tolist(), stored.tolist()):
            if record_crc(buf, int(fields.position[row]), int(fields.total_size[row])) != expected:
                bad[row] = True
    fields.problem[bad & (fields.problem == 0)] = PROBLEM_PROP_CRC
    fields.valid &= ~bad
    return bad


def check_record_crcs(buf: np.ndarray, fields: RecordBatchFields, prop_crc_required: bool = False,
                      force_verify_prop_crc=None) -> np.ndarray:
    """The body CRC of every record and the property CRC of those that carry one; the mask of failures. With
    ``force_verify_prop_crc`` given, as ``checkMessageAndReturnSize`` checks: True the property CRC only (every
    record must carry one), False the body CRC only."""
    if force_verify_prop_crc is not None:
        if force_verify_prop_crc:
            return check_prop_crcs(buf, fields, True)
        return check_body_crcs(buf, fields)
    bad = check_body_crcs(buf, fields)
    return bad | check_prop_crcs(buf, fields, prop_crc_required)


def encode_prop_crc(crc: int) -> bytes:
    """The 20 reserved bytes for ``crc`` (``MessageDecoder.createCrc32``): for tests and corrupting copies."""
    digits = "".join(str((crc // 10 ** i) % 10) for i in range(_DIGITS))
    return (L.PROPERTY_CRC32 + L.NAME_VALUE_SEPARATOR + digits + L.PROPERTY_SEPARATOR).encode()
