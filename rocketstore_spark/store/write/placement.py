"""Where records land in the commit log: ``CommitLog.doAppend``'s placement rule, as a pure function.

A record never straddles two commit-log files. When the next record does not fit in what is left of the
current file (keeping ``END_FILE_MIN_BLANK_LENGTH`` bytes for the marker), the rest of the file becomes a BLANK
marker and the record starts the next file. The appender and the Spark tasks that stage records at their
predicted final offsets both use this one function, so their layouts agree byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import MessageValidationError
from ..format import layout as L

# the smallest possible record: fixed header with IPv4 hosts, empty body, a one-byte topic, no properties
_MIN_RECORD_BYTES = 92


@dataclass(frozen=True)
class Placement:
    phy: np.ndarray  # int64: physical offset of each record
    blanks: tuple  # (phy, length) of the BLANK markers closing files, in order
    end: int  # the commit log's end after these records
    file_size: int  # the commit-log file size the placement used


def place_records(next_phy: int, lengths: np.ndarray, file_size: int) -> Placement:
    """Physical offsets for records of ``lengths`` appended at ``next_phy`` in files of ``file_size`` bytes."""
    lengths = np.asarray(lengths, dtype=np.int64)
    limit = file_size - L.END_FILE_MIN_BLANK_LENGTH
    if len(lengths) and int(lengths.max()) > limit:
        row = int(np.flatnonzero(lengths > limit)[0])
        raise MessageValidationError(f"row {row}: a {int(lengths[row])}-byte record cannot fit in a "
                                     f"{file_size}-byte commit-log file")
    pos = int(next_phy)
    out = np.empty(len(lengths), dtype=np.int64)
    blanks = []
    i = 0
    while i < len(lengths):
        file_end = (pos // file_size + 1) * file_size
        room = file_end - pos
        window = lengths[i:i + room // _MIN_RECORD_BYTES + 2]
        cum = np.cumsum(window)
        fit = int(np.searchsorted(cum, room - L.END_FILE_MIN_BLANK_LENGTH, side="right"))
        if fit:
            out[i:i + fit] = pos + np.concatenate(([0], cum[:fit - 1]))
            pos += int(cum[fit - 1])
            i += fit
        if i < len(lengths) and fit < len(window):
            blanks.append((pos, file_end - pos))
            pos = file_end
    return Placement(out, tuple(blanks), pos, file_size)


__all__ = ["Placement", "place_records"]
