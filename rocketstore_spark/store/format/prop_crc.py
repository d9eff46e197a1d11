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
property map, so the ``properties`` column does too. The checks themselves are the native record checks'
(``src/record_crc.rs``); this module chooses them and finds the property for variant detection.
"""

from __future__ import annotations

import numpy as np

from ... import _native
from . import layout as L
from .codec import RecordBatchFields, parse_records

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


def crc_mode(prop_crc_required: bool = False, force_verify_prop_crc=None) -> int:
    """The native record checks' CRC flags as ``checkMessageAndReturnSize`` checks: the body CRC of every record
    and the property CRC of those that carry one (``prop_crc_required``: every record must); with
    ``force_verify_prop_crc`` given, True the property CRC only (every record must carry one), False the body
    CRC only."""
    if force_verify_prop_crc is not None:
        return _native.CHECK_PROP_CRC | _native.REQUIRE_PROP_CRC if force_verify_prop_crc else _native.CHECK_BODY_CRC
    mode = _native.CHECK_BODY_CRC | _native.CHECK_PROP_CRC
    return mode | _native.REQUIRE_PROP_CRC if prop_crc_required else mode


def check_record_crcs(buf: np.ndarray, fields: RecordBatchFields, mode: int) -> np.ndarray:
    """Run the CRC checks of ``mode`` (:func:`crc_mode`) on the valid records of ``fields`` (parsed from ``buf``
    without them), marking the failures' ``problem`` and ``valid``; the mask of failures. A walk that checks
    CRCs passes the mode to :func:`~.codec.parse_records` instead, checking each record as it parses it."""
    rows = np.flatnonzero(fields.valid)
    bad = np.zeros(len(fields), dtype=bool)
    if len(rows) and mode:
        checked = parse_records(buf, fields.position[rows], crc_mode=mode)
        failed = rows[~checked.valid]
        fields.problem[failed] = checked.problem[~checked.valid]
        bad[failed] = True
        fields.valid &= ~bad
    return bad


def encode_prop_crc(crc: int) -> bytes:
    """The 20 reserved bytes for ``crc`` (``MessageDecoder.createCrc32``): for tests and corrupting copies."""
    digits = "".join(str((crc // 10 ** i) % 10) for i in range(_DIGITS))
    return (L.PROPERTY_CRC32 + L.NAME_VALUE_SEPARATOR + digits + L.PROPERTY_SEPARATOR).encode()
