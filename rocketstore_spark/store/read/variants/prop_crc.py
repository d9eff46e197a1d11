"""A prop-CRC store (``prop-crc``, ``enabledAppendPropCRC``): the commit log checks each record's ``__CRC32#``
property wherever it checks CRCs (:mod:`...format.prop_crc`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from .part import LogSpec, VariantPart


class PropCrcRecords(VariantPart):
    """Records that must end their properties with ``__CRC32#``."""

    def log_spec(self, spec: Optional[LogSpec]) -> LogSpec:
        return replace(spec, prop_crc_required=True)


__all__ = ["PropCrcRecords"]
