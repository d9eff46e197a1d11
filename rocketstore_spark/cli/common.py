"""What the ``rocketstore`` commands share: the consoles, the file-size options, progress bars, time parsing and
the message table."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Iterable, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

BODY_PREVIEW_BYTES = 40  # the body column of a table shows this much, decoded as UTF-8 with replacements

# piped output (files, other programs) gets wide tables and unwrapped messages instead of 80 columns
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)


# The store's file sizes, for stores where they cannot be detected (every command that opens a store takes
# them). The second spellings are the ones of a broker test harness's size arguments ("--commitlog-size 1048576
# --cq-size 6000 --index-slots 5000 --index-num 20000"), so such a file can be passed as it is.
COMMIT_LOG_SIZE = typer.Option(None, "--commit-log-file-size", "--commitlog-size",
                               help="commit-log file size (mappedFileSizeCommitLog)")
CONSUME_QUEUE_SIZE = typer.Option(None, "--consume-queue-file-size", "--cq-size",
                                  help="consume-queue file size in bytes (mappedFileSizeConsumeQueue)")
INDEX_SLOTS = typer.Option(None, "--index-hash-slots", "--index-slots", help="index hash slots (maxHashSlotNum)")
INDEX_ENTRIES = typer.Option(None, "--index-max-entries", "--index-num", help="index entries (maxIndexNum)")
# The storage variant, where the files leave it open (detected otherwise); a variant harness's store arguments
# spell it the same way ("--variant lmq").
VARIANT = typer.Option(None, "--variant", help="storage variant: default, or features among "
                       "dledger, rocksdb-cq, batch-cq, lmq, prop-crc joined by ',' (detected when absent)")


STORE_HELP = "store directory, or a remote store's URI (s3://bucket/path, gs://, hdfs://, abfs://; see --fs)"
# A remote store's filesystem settings (FsOptions): --fs endpoint=host:9000 --fs anonymous=true
FS = typer.Option(None, "--fs", help="filesystem setting of a remote store (s3://, gs://, hdfs://, abfs://) as "
                  "name=value, repeatable: endpoint, region, anonymous, scheme, accessKey, secretKey, retries, "
                  "connectTimeout, requestTimeout (credentials otherwise from the standard chain)")


def fs_given(values) -> dict:
    """``--fs name=value`` pairs as the store API's ``fs_options``."""
    out = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected name=value, found {item!r}", param_hint="--fs")
        out[name.strip()] = value.strip()
    return out


def sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) -> dict:
    given = dict(commit_log_file_size=commit_log_file_size, consume_queue_file_size=consume_queue_file_size,
                 index_hash_slots=index_hash_slots, index_max_entries=index_max_entries)
    return {k: v for k, v in given.items() if v is not None}


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=err, transient=True)


def format_ms(ms: Optional[int]) -> str:
    if ms is None or ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def parse_time(text: Optional[str]) -> Optional[int]:
    """Milliseconds since the epoch from digits or an ISO-8601 time (UTC when no zone is given)."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise typer.BadParameter(f"expected epoch milliseconds or an ISO time, found {text!r}") from e
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)


def message_table(rows: Iterable[dict]) -> Table:
    """Messages as a table for a terminal: the coordinates, tags, keys, store time and the body's beginning."""
    table = Table("topic", "queue", "offset", "phy offset", "tags", "keys", "store time", "body")
    for row in rows:
        body = row["body"][:BODY_PREVIEW_BYTES].decode("utf-8", "replace") if row.get("body") is not None else ""
        if row.get("body") is not None and len(row["body"]) > BODY_PREVIEW_BYTES:
            body += "…"
        table.add_row(row["topic"], str(row["queueId"]), str(row["queueOffset"]), str(row["commitLogOffset"]),
                      row["tags"] or "", " ".join(row["keys"] or []), str(row["storeTimestamp"]), body)
    return table
