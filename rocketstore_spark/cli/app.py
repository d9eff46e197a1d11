"""``rocketstore``: offline equivalents of mqadmin's queries on a store directory (no broker needed)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InvalidArgumentError, RocketStoreError, UnsupportedVariantError
from ..store import (
    STATE_OPEN,
    RocketStore,
    StoreHistory,
    StoreWriter,
    TieredQueues,
    detect_variant,
    parse_age,
    queue_dir_counts,
    remove_staged_jobs,
    resolve_store_root,
    staged_jobs,
    topics_path,
    verify_store,
)
from ..store import register_topics as add_topics
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
    check_topic,
    console,
    err,
    format_ms,
    fs_given,
    message_table,
    mirror,
    parse_time,
    print_strays,
    progress_bar,
    settings_given,
    show_warning,
    sizes_given,
)
from .generate import generate
from .plan import plan_command
from .special import compacted, timers, traces, transactions

MAX_KEY_RESULTS = 64  # a broker answers a key query with at most maxMsgsNumBatch (64) messages

app = typer.Typer(help="Inspect, query, verify, generate and recover Apache RocketMQ store directories.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  rich_markup_mode=None)


@app.command()
def inspect(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
            commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
            consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
            index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
            variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
            bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
            dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
            dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH,
            tiered_path: Optional[str] = mirror("tieredStorePath")):
    """Storage variant, sizes, topics and queues (offsets, counts, time ranges), index files, checkpoint,
    recovery status; with --tiered-path, which queue offsets lie in the local store and which in the broker's
    tiered storage."""
    from .report import describe_store

    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    try:
        s = RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes)
    except UnsupportedVariantError:
        # a variant rocketstore cannot read yet is still reported, then the error (exit status 2)
        root = resolve_store_root(store, fs_given(fs))
        found = detect_variant(root, variant, sizes.get("dledger_self_id"), sizes.get("batch_topics")).as_dict()
        if as_json:
            console.print_json(json.dumps({"path": str(root), "variant": found}))
        else:
            console.print(f"[bold]{root}[/bold]  variant: {found['name']} ({'; '.join(found['evidence'])})")
        raise
    with s:
        info = describe_store(s)
    if tiered_path is not None:
        info["tiered"] = describe_tiered(store, tiered_path, variant, fs_given(fs), sizes)
    if as_json:
        console.print_json(json.dumps(info))
        return
    console.print(f"[bold]{info['path']}[/bold]  recovery: {info['recovery']['mode']}, valid end "
                  f"{info['recovery']['valid_end']:,}" + (f", [red]{info['recovery']['problem']}[/red]"
                                                          if info["recovery"]["problem"] else ""))
    console.print(f"variant: {info['variant']['name']}" + (f" ({'; '.join(info['variant']['evidence'])})"
                                                            if info["variant"]["evidence"] else "")
                  + (f", DLedger committed {info['variant']['dledgerCommitted']}" if info["variant"]["dledgerCommitted"]
                     else ""))
    console.print(f"sizes: {info['sizes']}")
    console.print(f"abort file: {info['abort']}   disk use: {info['disk_bytes']:,} bytes   "
                  f"commit-log files: {info['commitlog_files']}")
    if info["missing_commitlog_files"]:
        console.print(f"[red]commit-log files missing between others:[/red] "
                      f"{', '.join(info['missing_commitlog_files'])} (their messages are lost)")
    table = Table("topic", "queues", "messages", "min..max offsets", "first store time", "last store time")
    for t in info["topics"]:
        table.add_row(t["topic"], str(len(t["queues"])), f"{t['messages']:,}",
                      ", ".join(f"{q['queueId']}:{q['min']}..{q['max']}" for q in t["queues"][:4])
                      + (" …" if len(t["queues"]) > 4 else ""), format_ms(t["first_ms"]), format_ms(t["last_ms"]))
    console.print(table)
    if info["lost"]:
        lost = Table("topic", "queue", "lost offsets", "messages", "first commit-log offset", "file",
                     title=f"[red]{sum(r['messages'] for r in info['lost']):,} messages lost[/red] (their "
                           "consume-queue units point into missing commit-log files or past the commit log's "
                           "valid end)")
        for r in info["lost"]:
            lost.add_row(r["topic"], str(r["queueId"]), f"{r['from']}..{r['to']}", f"{r['messages']:,}",
                         f"{r['phy_offset']:,}", r["file"])
        console.print(lost)
    idx = Table("index file", "entries", "begin", "end", "end phy offset")
    for f in info["index_files"]:
        idx.add_row(f["name"], f"{f['entries']:,}", format_ms(f["begin_ms"]), format_ms(f["end_ms"]),
                    f"{f['end_phy']:,}")
    if info["index_problem"]:
        console.print(f"index: {info['index_problem']}", style="red", markup=False, highlight=False)
    print_strays(info["stray_files"])
    console.print(idx)
    console.print(f"checkpoint: {info['checkpoint']}")
    tt = info["topic_table"]
    console.print(f"broker topic table: {tt['path']} " + (f"[red]{tt['error']}[/red]" if tt["error"] else
                                                          f"lists {tt['topics']} topics" if tt["exists"] else
                                                          "absent"))
    if tt["unlisted"]:
        console.print(f"[yellow]not in the topic table (a broker would not serve them): {', '.join(tt['unlisted'])}"
                      f"[/yellow] — `rocketstore recover {info['path']} --register-topics` adds them")
    if "tiered" in info:
        tiered = Table("topic", "queue", "local offsets", "tiered offsets", "history",
                       title=f"tiered storage {info['tiered']['path']} (broker {info['tiered']['broker']})")
        for q in info["tiered"]["queues"]:
            tiered.add_row(q["topic"], str(q["queueId"]), "{}..{}".format(*q["local"]), "{}..{}".format(*q["tiered"]),
                           "{}..{}".format(*q["history"]))
        console.print(tiered)
    if info["staging"]:
        open_jobs = [j for j in info["staging"] if j["state"] == "open"]
        console.print(f"staged write jobs: {len(info['staging'])} ({len(open_jobs)} open), "
                      f"{sum(j['disk_bytes'] for j in info['staging']):,} bytes — `rocketstore staging` lists them")


def describe_tiered(store, tiered_path: str, variant, fs, sizes) -> dict:
    """Per queue of the history: the offsets the local store holds, those the tiered storage holds, and the whole
    history's (a range ``first..end``, end exclusive; ``0..0`` where a storage holds none)."""
    queues = []
    with RocketStore.open_history(store, tiered_path=tiered_path, variant=variant, fs_options=fs, **sizes) as h:
        for topic in h.topics():
            for qid in h.queue_ids(topic):
                r = h.ranges(topic, qid)
                queues.append({"topic": topic, "queueId": qid, "local": list(r.local), "tiered": list(r.tiered),
                               "history": [r.first, r.end]})
        broker = h.tiered.broker
    return {"path": str(tiered_path), "broker": broker, "queues": queues}


@app.command()
def dump(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
         topic: Optional[str] = typer.Option(None, help="topic (all topics when omitted)"),
         queue: Optional[int] = typer.Option(None, help="queue id"),
         from_offset: Optional[int] = typer.Option(None, "--from", help="first queue offset"),
         to_offset: Optional[int] = typer.Option(None, "--to", help="queue offset to stop before"),
         tags: Optional[str] = mirror("tags"),
         since: Optional[str] = mirror("startingTimestamp"),
         until: Optional[str] = mirror("endingTimestamp"),
         group: Optional[str] = typer.Option(None, help="only what this consumer group has not consumed yet: "
                                             "each queue of its topics from where the group stands (as the "
                                             "startingGroup read option)"),
         limit: Optional[int] = typer.Option(None, help="stop after this many messages"),
         fmt: str = typer.Option("table", "--format", help="table or jsonl"),
         commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
         consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
         index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
         variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
         bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
         dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
         dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Messages of a topic/queue (or everything) as a table or JSON lines; with --group, those a consumer group
    has not consumed yet."""
    from .report import group_starts, iter_messages, message_json

    if fmt not in ("table", "jsonl"):
        raise typer.BadParameter("--format must be table or jsonl")
    if group is not None and from_offset is not None:
        raise typer.BadParameter("give --group or --from, not both: both say where each queue starts")
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    start_ms, end_ms = parse_time(since, "--since"), parse_time(until, "--until")
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s, progress_bar() as bar:
        check_topic(s, topic, queue)
        if topic is not None and from_offset is not None:
            for q in [queue] if queue is not None else s.queue_ids(topic):
                if from_offset < s.min_offset(topic, q):
                    raise InvalidArgumentError(
                        f"--from {from_offset}: {topic}/{q} holds offsets {s.min_offset(topic, q)}.."
                        f"{s.max_offset(topic, q) - 1} (earlier ones expired or never existed); start at "
                        f"--from {s.min_offset(topic, q)} or leave --from out")
        starts = None
        if group is not None:
            starts, warnings = group_starts(s, group, topic, queue)
            for line in warnings:
                err.print(f"warning: {line}")
        task = bar.add_task("scanning", total=None)

        def counted(rows):
            for row in rows:
                bar.advance(task)
                yield row

        if topic is None and starts is None and s.missing_commit_log_files():
            err.print(f"commit-log files missing between others: {', '.join(s.missing_commit_log_files())}; the "
                      "messages they held are not in this dump (`rocketstore inspect` lists the queues' lost "
                      "offsets)", style="yellow", markup=False, highlight=False)
        rows = counted(iter_messages(s, topic, queue, from_offset, to_offset, tags, start_ms, end_ms, limit,
                                     starts))
        if fmt == "jsonl":
            for row in rows:
                sys.stdout.write(message_json(row) + "\n")
            return
        console.print(message_table(rows))


@app.command()
def query(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
          topic: Optional[str] = typer.Option(None, help="topic (needed for --key, --uniq-key, --queue, --time)"),
          key: Optional[str] = typer.Option(None, help="a KEYS token"),
          uniq_key: Optional[str] = typer.Option(None, help="a UNIQ_KEY (client message id)"),
          msg_id: Optional[str] = typer.Option(None, help="an offsetMsgId"),
          queue: Optional[int] = typer.Option(None, help="queue id (with --offset or --time)"),
          offset: Optional[int] = typer.Option(None, help="queue offset"),
          time: Optional[str] = typer.Option(None, help="store time (ms or ISO): the queue offset at that time"),
          max_results: int = typer.Option(MAX_KEY_RESULTS, "--max", min=1, help="with --key/--uniq-key: at most "
                                          "this many messages (the broker answers at most 64)"),
          since: Optional[str] = mirror("startingTimestamp"), until: Optional[str] = mirror("endingTimestamp"),
          as_json: bool = typer.Option(False, "--json", help="JSON lines (the default when output is piped)"),
          commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
          consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
          index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
          variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
          bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
          dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
          dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH, tiered_path: Optional[str] = mirror("tieredStorePath")):
    """Point lookups: by key, UNIQ_KEY, msgId, queue offset, or the queue offset at a time.

    With --tiered-path, --key/--uniq-key also search the broker's tiered index, and --time and --offset its tiered
    queues (history the local store no longer holds), as the broker's queryMessage, searchOffset and pulls do.

    A table on a terminal (bodies abbreviated, like dump); JSON lines with --json or when piped."""
    from .report import message_json

    as_json = as_json or not sys.stdout.isatty()
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s:
        # with --tiered-path, keys, times and queue offsets: the local store and the broker's tiered storage (closed
        # with the store)
        lookups = s if tiered_path is None else StoreHistory(s, TieredQueues(tiered_path))
        if msg_id:
            row = s.look_message_by_msg_id(msg_id)
            rows = [row] if row else []
        elif key or uniq_key:
            if not topic:
                raise typer.BadParameter("--key/--uniq-key need --topic")
            check_topic(lookups, topic)
            begin, end = parse_time(since, "--since") or 0, parse_time(until, "--until")
            rows = lookups.query_by_key(topic, key or uniq_key, max_num=max_results, begin=begin,
                                        end=end).to_pylist()
            if len(rows) >= max_results:
                err.print(f"{len(rows)} messages: the lookup stops at --max {max_results} (a broker answers at most "
                          f"{MAX_KEY_RESULTS}), so there may be more; raise --max or narrow the time with --since/"
                          "--until", style="yellow", markup=False, highlight=False)
        elif queue is not None and time is not None:
            if not topic:
                raise typer.BadParameter("--time needs --topic and --queue")
            check_topic(lookups, topic, queue)
            ts = parse_time(time, "--time")
            found = {"topic": topic, "queueId": queue, "timestamp": ts,
                     "lower": lookups.offset_by_time(topic, queue, ts, "lower"),
                     "upper": lookups.offset_by_time(topic, queue, ts, "upper")}
            if as_json:
                sys.stdout.write(json.dumps(found) + "\n")
            else:
                table = Table(*found)
                table.add_row(*(str(v) for v in found.values()))
                console.print(table)
            return
        elif queue is not None and offset is not None:
            if not topic:
                raise typer.BadParameter("--offset needs --topic and --queue")
            check_topic(lookups, topic, queue)
            first, end = lookups.min_offset(topic, queue), lookups.max_offset(topic, queue)
            if not first <= offset < end:
                raise InvalidArgumentError(f"--offset {offset}: {topic}/{queue} holds offsets {first}..{end - 1}"
                                           if end > first else f"--offset {offset}: {topic}/{queue} holds no message")
            rows = [r for b in lookups.read_queue(topic, queue, offset, offset + 1) for r in b.to_pylist()]
        else:
            raise typer.BadParameter("give one of --key, --uniq-key, --msg-id, --queue with --offset or --time")
    if not rows:
        err.print("[yellow]no message found[/yellow]")
        raise typer.Exit(1)
    if not as_json:
        console.print(message_table(rows))
        return
    for row in rows:
        sys.stdout.write(message_json(row) + "\n")


@app.command()
def verify(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
           commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
           consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
           index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
           variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
           bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
           dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
           dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Full structural check (CRC of every record, queues, index, checkpoint); exit 1 on problems."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s, progress_bar() as bar:
        tasks = {}

        def report(phase, done, total):
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        problems = verify_store(s, report)
        strays = [str(stray) for stray in s.stray_files]
    print_strays(strays)
    if problems:
        table = Table("where", "problem", title=f"{len(problems)} problem(s)")
        for p in problems[:200]:
            table.add_row(p.where, p.message)
        console.print(table)
        raise typer.Exit(1)
    what = {"commit log": "every record (length, CRC) of {} commit-log file(s)",
            "consume queues": "every unit of {} consume queue(s)", "index": "every entry of {} index file(s)"}
    checked = [what.get(phase, phase + " ({})").format(f"{bar.tasks[t].total or 0:,.0f}") for phase, t in tasks.items()]
    console.print(f"[green]store is consistent[/green]: checked {', '.join(checked + ['the checkpoint'])}")


app.command()(generate)
app.command(name="plan")(plan_command)
app.command()(transactions)
app.command()(timers)
app.command()(traces)
app.command()(compacted)


@app.command()
def recover(store: Path = typer.Argument(..., metavar="STORE", help="store directory"),
            register_topics: bool = typer.Option(False, "--register-topics", help="also add every topic with "
                                                 "queues that the broker's topic table (config/topics.json) "
                                                 "lacks, so that a broker serves it"),
            commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
            consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
            index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES):
    """Finish or roll back an interrupted sink commit and repair a crashed tail."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries)
    writer = StoreWriter.open(store, **sizes)
    actions = writer.recovery_actions
    try:
        if register_topics:
            added = add_topics(store, queue_dir_counts(store))
            actions.append(f"added topics {', '.join(added)} to {topics_path(store)}" if added
                           else f"every topic is in {topics_path(store)} already")
    finally:
        writer.close()
    for line in actions or ["nothing to recover: the store was closed cleanly"]:
        console.print(line)
    for job in (j for j in staged_jobs(store) if j.state == STATE_OPEN):
        console.print(f"kept staging of job {job.job_id}: {job.disk_bytes:,} bytes, last written "
                      f"{format_ms(job.last_write_ms)} (its job may still be running; `rocketstore staging {store} "
                      f"--remove {job.job_id}` removes it)")


@app.command()
def staging(store: Path = typer.Argument(..., metavar="STORE", help="store directory"),
            remove: Optional[list[str]] = typer.Option(None, "--remove", help="job id whose staging to remove "
                                                       "(repeatable); a task of it still running then fails"),
            older_than: Optional[str] = typer.Option(None, help="remove every job not written to for this long "
                                                     "(90m, 12h, 7d) and every closed one"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Staged files of Spark write jobs: list them; remove those of jobs whose driver died before committing."""
    if not store.is_dir():
        raise typer.BadParameter(f"{store} is not a directory", param_hint="STORE")
    if remove or older_than is not None:
        age = parse_age(older_than) if older_than is not None else None
        removed = remove_staged_jobs(store, list(remove or []), older_than_s=age)
        for job in removed:
            console.print(f"removed job {job.job_id} ({job.state}, {job.disk_bytes:,} bytes)")
        if not removed:
            console.print("nothing to remove")
        return
    jobs = staged_jobs(store)
    if as_json:
        console.print_json(json.dumps([j.as_dict() for j in jobs]))
        return
    table = Table("job", "state", "disk bytes", "files", "last write")
    for j in jobs:
        table.add_row(j.job_id, j.state, f"{j.disk_bytes:,}", str(j.files), format_ms(j.last_write_ms))
    console.print(table if jobs else "nothing staged")


GROUP_HELP = "consumer group (its committed offsets in the broker's config/consumerOffset.json)"


def group_table(rows: list[dict]) -> Table:
    table = Table("group", "topic", "queue", "committed", "max offset", "lag", "next message stored")
    for r in rows:
        table.add_row(r["group"], r["topic"], str(r["queueId"]), f"{r['committedOffset']:,}", f"{r['maxOffset']:,}",
                      f"{r['lag']:,}", format_ms(r["nextMessageStoreTime"]))
    return table


@app.command()
def groups(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
           group: Optional[str] = typer.Option(None, "--group", help="only this consumer group"),
           topic: Optional[str] = typer.Option(None, "--topic", help="only this topic"),
           as_json: bool = typer.Option(False, "--json", help="JSON lines, one per group and queue"),
           commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
           consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
           index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
           variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
           bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
           dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
           dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH):
    """Consumer groups: each group's committed offset per queue (the broker's config/consumerOffset.json and
    lmqConsumerOffset.json), the queue's max offset, the lag and the store time of the group's next message."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s:
        if group is not None:
            s.group_starting_offsets(group)  # an unknown group: an error listing the known ones
        rows = s.consumer_offsets(group, topic)
    if as_json:
        for r in rows:
            sys.stdout.write(json.dumps(r) + "\n")
        return
    if not rows:
        console.print("no committed consumer offsets" + (f" of topic {topic}" if topic else ""))
        return
    console.print(group_table(rows))
    by_group: dict = {}
    for r in rows:
        by_group[r["group"]] = by_group.get(r["group"], 0) + r["lag"]
    console.print("total lag: " + ", ".join(f"{g} {n:,}" for g, n in by_group.items()))


@app.command()
def lag(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
        offsets: Optional[str] = typer.Option(None, help='committed offsets JSON {"broker": {"topic": {"qid": next}}} '
                                                         'or a streaming checkpoint directory'),
        group: Optional[str] = typer.Option(None, "--group", help=GROUP_HELP + "; instead of --offsets"),
        commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
        consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
        index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
        variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
        bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
        dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
        dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS,
        commitlog_path: Optional[str] = COMMITLOG_PATH):
    """How many messages each queue is behind the given committed offsets (a query's progress) or a consumer
    group's (--group)."""
    from .report import consumer_lag, load_offsets

    if (offsets is None) == (group is None):
        raise typer.BadParameter("give either --offsets (JSON or a streaming checkpoint) or --group (a consumer "
                                 "group of the store's broker)")
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers,
                       commitlog_path)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s:
        if group is not None:
            s.group_starting_offsets(group)  # an unknown group: an error listing the known ones
            rows = [{"topic": r["topic"], "queueId": r["queueId"], "committed": r["committedOffset"],
                     "max": r["maxOffset"], "lag": r["lag"]} for r in s.consumer_offsets(group)]
        else:
            rows = consumer_lag(s, load_offsets(offsets))
    table = Table("topic", "queue", "committed", "max offset", "lag")
    for r in rows:
        table.add_row(r["topic"], str(r["queueId"]), str(r["committed"]), str(r["max"]), f"{r['lag']:,}")
    console.print(table)
    console.print(f"total lag: {sum(r['lag'] for r in rows):,}")


def main() -> None:
    warnings.showwarning = show_warning
    try:
        app()
    except RocketStoreError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        sys.exit(2)

