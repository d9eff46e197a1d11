"""``rocketstore transactions``, ``timers``, ``traces`` and ``compacted``: the special topics' views (the tables
``pendingTransactions``, ``timerMessages``, ``messageTraces`` and ``compactedValues`` of a Spark read)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..errors import InvalidArgumentError
from ..store import RMQ_SYS_TRACE_TOPIC, TIMER_STATES, TRACE_TYPES, RocketStore
from .common import (
    BATCH_TOPICS,
    BCQ_SIZE,
    COMMIT_LOG_SIZE,
    COMMITLOG_PATH,
    CONSUME_QUEUE_SIZE,
    DLEDGER_GROUP,
    DLEDGER_PEERS,
    DLEDGER_SELF,
    FORCE_VERIFY,
    FS,
    INDEX_ENTRIES,
    INDEX_SLOTS,
    STORE_HELP,
    VARIANT,
    console,
    format_ms,
    fs_given,
    mirror,
    settings_given,
    sizes_given,
)

JSON_HELP = "JSON lines, one per message (body in base64)"


def json_line(row: dict) -> str:
    row = dict(row)
    if row.get("body") is not None:
        row["body"] = base64.b64encode(row["body"]).decode()
    return json.dumps(row)


def show(rows: list, as_json: bool, nothing: str, columns: tuple, cells, summary) -> None:
    """``rows`` as JSON lines, or as a table of ``columns`` (``cells(row)``: a row's cells) followed by
    ``summary(rows)``; ``nothing`` when there are none."""
    if as_json:
        for r in rows:
            sys.stdout.write(json_line(r) + "\n")
        return
    if not rows:
        console.print(nothing)
        return
    table = Table(*columns)
    for r in rows:
        table.add_row(*cells(r))
    console.print(table)
    console.print(summary(rows))


def _open(store, fs, variant, sizes):
    return RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes)


def transactions(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
                 topic: Optional[str] = typer.Option(None, "--topic", help="only messages of this (real) topic"),
                 as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
                 commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
                 consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
                 index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
                 variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
                 bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
                 dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
                 dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
                 commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Unresolved transactions: the half messages the broker still waits on a commit or rollback for (those it
    would go on checking with their producers), with their real topic and queue, transaction id, producer group,
    born time and how often they were checked."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers, commitlog_path)
    with _open(store, fs, variant, sizes) as s:
        rows = s.pending_transactions(topic)
    show(rows, as_json, "no unresolved transaction" + (f" of topic {topic}" if topic else ""),
         ("topic", "queue", "transaction id", "producer group", "born", "checks", "half offset"),
         lambda r: (r["topic"], str(r["queueId"]), r["transactionId"], r["producerGroup"] or "-",
                    format_ms(r["bornTimestamp"]), str(r["checkTimes"]), f"{r['halfOffset']:,}"),
         lambda rows: f"{len(rows):,} unresolved transaction(s)")


def timers(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
           topic: Optional[str] = typer.Option(None, "--topic", help="only messages of this (real) topic"),
           state: Optional[str] = typer.Option(None, "--state", help="only messages in this state: "
                                                                     + ", ".join(TIMER_STATES)),
           as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
           commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
           consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
           index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
           variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
           bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
           dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
           dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
           commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Timer messages (sent with a delivery time): their real topic and queue, delivery time, rolls and state in
    the broker's timer wheel (pending, delivered, rolled, cancelled)."""
    if state is not None and state not in TIMER_STATES:
        raise InvalidArgumentError(f"--state must be one of {', '.join(TIMER_STATES)}, found {state!r}")
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers, commitlog_path)
    with _open(store, fs, variant, sizes) as s:
        rows = s.timer_messages(topic, state)

    def counts(rows) -> str:
        by_state: dict = {}
        for r in rows:
            by_state[r["state"]] = by_state.get(r["state"], 0) + 1
        return ", ".join(f"{n:,} {name}" for name, n in by_state.items())

    show(rows, as_json, "no timer message" + (f" of topic {topic}" if topic else "")
         + (f" in state {state}" if state else ""),
         ("topic", "queue", "uniq key", "state", "deliver at", "rolls", "timer offset"),
         lambda r: (r["topic"], str(r["queueId"]), r["uniqKey"], r["state"], format_ms(r["deliverTime"]),
                    str(r["rollTimes"]), f"{r['timerQueueOffset']:,}"),
         counts)


def traces(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
           trace_topic: Optional[str] = mirror("traceTopic"),
           msg_id: Optional[str] = typer.Option(None, "--msg-id", help="only the records of this message (its "
                                                                      "UNIQ_KEY, the msgId a producer sees)"),
           trace_type: Optional[str] = typer.Option(None, "--type", help="only records of this type: "
                                                                          + ", ".join(TRACE_TYPES)),
           as_json: bool = typer.Option(False, "--json", help="JSON lines, one per trace record"),
           commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
           consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
           index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
           variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
           bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
           dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
           dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
           commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Message traces: the records clients with message trace on (enableMsgTrace) wrote to the trace topic,
    decoded: who sent or consumed which message, when, how long it took and whether it succeeded."""
    if trace_type is not None and trace_type not in TRACE_TYPES:
        raise InvalidArgumentError(f"--type must be one of {', '.join(TRACE_TYPES)}, found {trace_type!r}")
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers, commitlog_path)
    with _open(store, fs, variant, sizes) as s:
        rows = s.message_traces(trace_topic or RMQ_SYS_TRACE_TOPIC, msg_id, trace_type)
    show(rows, as_json, f"no trace record in {trace_topic or RMQ_SYS_TRACE_TOPIC}",
         ("type", "time", "group", "topic", "msg id", "cost ms", "success"),
         lambda r: (r["traceType"], format_ms(r["timestamp"]), r["groupName"] or "-", r["topic"] or "-",
                    r["msgId"] or "-", "-" if r["costTime"] is None else str(r["costTime"]),
                    "-" if r["success"] is None else str(r["success"]).lower()),
         lambda rows: f"{len(rows):,} trace record(s)")


def compacted(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
              topic: Optional[str] = typer.Option(None, "--topic", help="only this compaction topic"),
              as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
              commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
              consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
              index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
              variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
              bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
              dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
              dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
              commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Compaction topics (cleanup.policy=COMPACTION): the latest value per key of each queue, what a consumer
    ends up with."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers, commitlog_path)
    with _open(store, fs, variant, sizes) as s:
        rows = s.compacted_values(topic)
    show(rows, as_json, "no compacted value" + (f" in topic {topic}" if topic else ""),
         ("topic", "queue", "key", "offset", "source", "versions", "stored", "body bytes"),
         lambda r: (r["topic"], str(r["queueId"]), r["key"], f"{r['queueOffset']:,}", r["source"], str(r["versions"]),
                    format_ms(r["storeTimestamp"]), f"{len(r['body']):,}"),
         lambda rows: f"{len(rows):,} key(s)")
