"""The plain store, the first part of every store's behaviour: records in ``commitlog/``, consume queues as
``consumequeue/<topic>/<queueId>/`` files (listed when the store opens), and the queues re-dispatch creates are
file queues, a batch consume queue for a BatchCQ topic (``ConsumeQueueStore.findOrCreateConsumeQueue`` picks
the kind by the topic's ``queue.type``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ...files.batch_consume_queue import BatchConsumeQueue
from ...files.byte_source import as_path
from ...files.commitlog import CommitLog
from ...files.consume_queue import ConsumeQueue
from ...files.mapped_file_queue import MappedFileQueue
from ...files.variant import BrokerSettings
from ...format import layout as L
from ...format.inner_batch import BATCH_CONSUMEQUEUE_DIR
from .part import LogSpec, VariantPart


def open_commit_log(files: MappedFileQueue, spec: LogSpec, settings: BrokerSettings) -> CommitLog:
    return CommitLog(files, prop_crc_required=spec.prop_crc_required,
                     force_verify_prop_crc=settings.force_verify_prop_crc)


class PlainStore(VariantPart):
    """The default layout of the store at ``root``; its commit log in ``commitlog/``, or in ``commit_log_paths``
    (the broker's ``storePathCommitLog``: one directory elsewhere, or several read as one multi-path queue)."""

    def __init__(self, root: Path, commit_log_paths: tuple = ()):
        self.root = as_path(root)
        self.commit_log_paths = tuple(as_path(p) for p in commit_log_paths)

    def log_spec(self, spec: Optional[LogSpec]) -> LogSpec:
        directories = self.commit_log_paths or (self.root / L.COMMITLOG_DIR,)
        # a copy's last commit-log file may be cut short
        return LogSpec(directories, cut_last=True, prop_crc_required=False, open=open_commit_log)

    def new_queue(self, store, queues, topic: str, queue_id: int, batch: bool):
        if batch:
            return BatchConsumeQueue(topic, queue_id, store.root / BATCH_CONSUMEQUEUE_DIR / topic / str(queue_id),
                                     store.settings.batch_consume_queue_file_size)
        return ConsumeQueue(topic, queue_id, store.root / L.CONSUMEQUEUE_DIR / topic / str(queue_id),
                            store.sizes.consume_queue_file_size)


__all__ = ["PlainStore", "open_commit_log"]
