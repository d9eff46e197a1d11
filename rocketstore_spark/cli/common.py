"""What the ``rocketstore`` commands share: the consoles, the file-size options, progress bars, time parsing and
the message table."""

from __future__ import annotations

import datetime as dt
import sys
import warnings
from typing import Iterable, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from ..errors import InvalidArgumentError, StrayFileWarning

BODY_PREVIEW_BYTES = 40  # the body column of a table shows this much, decoded as UTF-8 with replacements

# piped output (files, other programs) gets wide tables and unwrapped messages instead of 80 columns
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)


def mirror(option: str, **kwargs):
    """The flag(s) mirroring read option ``option``, with its documentation as help: both come from the option's
    one definition (:data:`rocketstore_spark.spark.options.READ_SPEC`)."""
    from ..spark.options import SPEC_BY_NAME

    spec = SPEC_BY_NAME[option]
    return typer.Option(None, *spec.cli, help=spec.doc.replace("`", ""), **kwargs)


# The store's file sizes, for stores where they cannot be detected (every command that opens a store takes
# them). The second spellings are the ones of a broker test harness's size arguments ("--commitlog-size 1048576
# --cq-size 6000 --index-slots 5000 --index-num 20000"), so such a file can be passed as it is.
COMMIT_LOG_SIZE = mirror("commitLogFileSize")
CONSUME_QUEUE_SIZE = mirror("consumeQueueFileSize")
INDEX_SLOTS = mirror("indexHashSlots")
INDEX_ENTRIES = mirror("indexMaxEntries")
# The storage variant, where the files leave it open (detected otherwise); a variant harness's store arguments
# spell it the same way ("--variant lmq").
VARIANT = mirror("variant")


STORE_HELP = ("store directory, or a remote store's URI (s3://bucket/path, gs://, hdfs://, webhdfs://, "
              "abfs://; see --fs)")
# A remote store's filesystem settings (FsOptions): --fs endpoint=host:9000 --fs anonymous=true
FS = typer.Option(None, "--fs", help="filesystem setting of a remote store (s3://, gs://, hdfs://, webhdfs://, "
                  "abfs://) as name=value, repeatable: endpoint, region, anonymous, scheme, accessKey, secretKey, "
                  "sessionToken, accountName, accountKey (abfs://), user (hdfs://, webhdfs://), retries, "
                  "connectTimeout, requestTimeout (credentials otherwise from the provider's standard chain)")


def fs_given(values) -> dict:
    """``--fs name=value`` pairs as the store API's ``fs_options``."""
    out = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected name=value, found {item!r}", param_hint="--fs")
        out[name.strip()] = value.strip()
    return out
# The broker settings the files leave open (BrokerSettings), spelled as a variant harness's store.args spells them
# ("--variant batch-cq --batch-topics BatchTopic", "--force-verify-prop-crc true", "--dledger-self n0
# --dledger-peers n0-127.0.0.1:PORT"), so such a file can be passed as it is; --dledger-group changes nothing.
BATCH_TOPICS = mirror("batchTopics")
BCQ_SIZE = mirror("batchConsumeQueueFileSize")
FORCE_VERIFY = mirror("forceVerifyPropCrc")
DLEDGER_SELF = mirror("dledgerSelfId")
DLEDGER_PEERS = mirror("dledgerPeers")
COMMITLOG_PATH = mirror("commitLogPath")
DLEDGER_GROUP = typer.Option(None, "--dledger-group", help="DLedger group (accepted, it does not change reads)")


def settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                   commitlog_path=None) -> dict:
    """The broker-setting options given, as RocketStore.open keyword arguments."""
    force = None
    if force_verify_prop_crc is not None:
        if force_verify_prop_crc.strip().lower() not in ("true", "false"):
            raise typer.BadParameter(f"--force-verify-prop-crc must be true or false, found {force_verify_prop_crc!r}")
        force = force_verify_prop_crc.strip().lower() == "true"
    given = dict(batch_topics=batch_topics, batch_consume_queue_file_size=bcq_size, force_verify_prop_crc=force,
                 dledger_self_id=dledger_self, dledger_peers=dledger_peers, commit_log_path=commitlog_path)
    return {k: v for k, v in given.items() if v is not None}


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


def parse_time(text: Optional[str], flag: str = "time") -> Optional[int]:
    """Milliseconds since the epoch from digits or an ISO 8601 time (UTC when no zone is given), as the
    ``startingTimestamp`` option takes them."""
    from ..spark.option_spec import parse_timestamp

    if text is None:
        return None
    try:
        return parse_timestamp(flag, text)
    except InvalidArgumentError as e:
        raise typer.BadParameter(str(e).replace(f"option {flag} must be", "expected")) from e


def body_preview(body: Optional[bytes]) -> str:
    """The beginning of a body for one table cell: UTF-8 text as it is, anything else (control characters, bytes
    that are not UTF-8) escaped, so a binary body never breaks the row or the terminal."""
    if body is None:
        return ""
    text = body[:BODY_PREVIEW_BYTES].decode("utf-8", "backslashreplace")
    text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return text + ("…" if len(body) > BODY_PREVIEW_BYTES else "")


def message_table(rows: Iterable[dict]) -> Table:
    """Messages as a table for a terminal: the coordinates, tags, keys, store time and the body's beginning."""
    table = Table("topic", "queue", "offset", "phy offset", "tags", "keys", "store time", "body")
    for row in rows:
        cells = (row["topic"], str(row["queueId"]), str(row["queueOffset"]), str(row["commitLogOffset"]),
                 row["tags"] or "", " ".join(row["keys"] or []), str(row["storeTimestamp"]),
                 body_preview(row.get("body")))
        table.add_row(*(Text(c) for c in cells))  # Text: brackets in a body or tag are not rich markup
    return table


def check_topic(s, topic: Optional[str], queue: Optional[int] = None) -> None:
    """A topic (and queue) named on the command line must exist: an error listing what exists, never an empty
    answer."""
    from ..spark.option_spec import did_you_mean, listing

    if topic is None:
        return
    topics = s.topics()
    if topic not in topics:
        raise InvalidArgumentError(f"--topic: the store has no topic {topic!r}{did_you_mean(topic, topics)}; its "
                                   f"topics are {listing(topics)} (`rocketstore inspect` lists them with queues)")
    if queue is not None and queue not in s.queue_ids(topic):
        raise InvalidArgumentError(f"--queue: topic {topic!r} has no queue {queue}; its queues are "
                                   f"{listing(s.queue_ids(topic))}")


def show_warning(message, category, filename, lineno, file=None, line=None):
    """Stray files skipped while opening a store: one plain line each on stderr, not a Python warning dump."""
    if issubclass(category, StrayFileWarning):
        err.print(f"warning: {message}", style="yellow", markup=False, highlight=False)
    else:
        python_show_warning(message, category, filename, lineno, file, line)


python_show_warning = warnings.showwarning


def print_strays(strays: list) -> None:
    if strays:
        console.print(f"[yellow]skipped {len(strays)} stray entr{'y' if len(strays) == 1 else 'ies'} "
                      "(no part of the store):[/yellow]")
        for stray in strays:
            console.print(f"  {stray}", markup=False, highlight=False)
