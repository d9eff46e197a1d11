"""A DLedger store (``dledger``): the records are the bodies of the entries of ``dledger-<selfId>/data``
(:mod:`...files.dledger_log`), read through their entry headers; its files are never cut short, and with
several peers only the entries the group committed are served."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

from ...files.dledger_checkpoint import peer_count
from ...files.dledger_log import DLedgerLog
from ...files.mapped_file_queue import MappedFileQueue
from ...files.variant import BrokerSettings
from .part import LogSpec, VariantPart


def open_dledger_log(files: MappedFileQueue, spec: LogSpec, settings: BrokerSettings) -> DLedgerLog:
    return DLedgerLog(files, prop_crc_required=spec.prop_crc_required,
                      force_verify_prop_crc=settings.force_verify_prop_crc,
                      committed_only=peer_count(settings.dledger_peers) > 1)


class DLedgerEntries(VariantPart):
    """The log of a DLedger store, in directory ``data`` (``dledger-<selfId>/data``)."""

    def __init__(self, data: Path):
        self.data = data

    def log_spec(self, spec: Optional[LogSpec]) -> LogSpec:
        return replace(spec, directories=(self.data,), cut_last=False, open=open_dledger_log)


__all__ = ["DLedgerEntries", "open_dledger_log"]
