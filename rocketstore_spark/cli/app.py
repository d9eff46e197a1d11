"""``rocketstore``: offline equivalents of mqadmin's queries on a store directory (no broker needed)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..errors import RocketStoreError, UnsupportedVariantError
from ..store import (
    STATE_OPEN,
    RocketStore,
    StoreWriter,
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
    err,
    format_ms,
    fs_given,
    message_table,
    parse_time,
    print_strays,
    progress_bar,
    settings_given,
    show_warning,
    sizes_given,
)

app = typer.Typer(help="Inspect, query, verify, generate and recover Apache RocketMQ store directories.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@app.command()
def inspect(store: Path = typer.Argument(..., help=STORE_HELP),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
            commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
            consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
            index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
            variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
            bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
            dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
            dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS):
    """Storage variant, sizes, topics and queues (offsets, counts, time ranges), index files, checkpoint,
    recovery status."""
    from .report import describe_store

    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers)
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
    table = Table("topic", "queues", "messages", "min..max offsets", "first store time", "last store time")
    for t in info["topics"]:
        table.add_row(t["topic"], str(len(t["queues"])), f"{t['messages']:,}",
                      ", ".join(f"{q['queueId']}:{q['min']}..{q['max']}" for q in t["queues"][:4])
                      + (" …" if len(t["queues"]) > 4 else ""), format_ms(t["first_ms"]), format_ms(t["last_ms"]))
    console.print(table)
    if info["lost"]:
        lost = Table("topic", "queue", "lost offsets", "messages", "first commit-log offset", "file",
                     title=f"[red]{sum(r['messages'] for r in info['lost']):,} messages lost[/red] (their "
                           "consume-queue units point past the commit log's valid end)")
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
    if info["staging"]:
        open_jobs = [j for j in info["staging"] if j["state"] == "open"]
        console.print(f"staged write jobs: {len(info['staging'])} ({len(open_jobs)} open), "
                      f"{sum(j['disk_bytes'] for j in info['staging']):,} bytes — `rocketstore staging` lists them")


@app.command()
def dump(store: Path = typer.Argument(..., help=STORE_HELP),
         topic: Optional[str] = typer.Option(None, help="topic (all topics when omitted)"),
         queue: Optional[int] = typer.Option(None, help="queue id"),
         from_offset: Optional[int] = typer.Option(None, "--from", help="first queue offset"),
         to_offset: Optional[int] = typer.Option(None, "--to", help="queue offset to stop before"),
         tags: Optional[str] = typer.Option(None, help="subscription expression, e.g. 'TagA || TagB'"),
         since: Optional[str] = typer.Option(None, help="store time from (ms or ISO)"),
         until: Optional[str] = typer.Option(None, help="store time before (ms or ISO)"),
         limit: Optional[int] = typer.Option(None, help="stop after this many messages"),
         fmt: str = typer.Option("table", "--format", help="table or jsonl"),
         commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
         consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
         index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
         variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
         bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
         dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
         dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS):
    """Messages of a topic/queue (or everything) as a table or JSON lines."""
    from .report import iter_messages, message_json

    if fmt not in ("table", "jsonl"):
        raise typer.BadParameter("--format must be table or jsonl")
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s, progress_bar() as bar:
        task = bar.add_task("scanning", total=None)

        def counted(rows):
            for row in rows:
                bar.advance(task)
                yield row

        rows = counted(iter_messages(s, topic, queue, from_offset, to_offset, tags, parse_time(since),
                                     parse_time(until), limit))
        if fmt == "jsonl":
            for row in rows:
                sys.stdout.write(message_json(row) + "\n")
            return
        console.print(message_table(rows))


@app.command()
def query(store: Path = typer.Argument(..., help=STORE_HELP),
          topic: Optional[str] = typer.Option(None, help="topic (needed for --key, --uniq-key, --queue, --time)"),
          key: Optional[str] = typer.Option(None, help="a KEYS token"),
          uniq_key: Optional[str] = typer.Option(None, help="a UNIQ_KEY (client message id)"),
          msg_id: Optional[str] = typer.Option(None, help="an offsetMsgId"),
          queue: Optional[int] = typer.Option(None, help="queue id (with --offset or --time)"),
          offset: Optional[int] = typer.Option(None, help="queue offset"),
          time: Optional[str] = typer.Option(None, help="store time (ms or ISO): the queue offset at that time"),
          as_json: bool = typer.Option(False, "--json", help="JSON lines (the default when output is piped)"),
          commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
          consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
          index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
          variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
          bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
          dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
          dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS):
    """Point lookups: by key, UNIQ_KEY, msgId, queue offset, or the queue offset at a time.

    A table on a terminal (bodies abbreviated, like ``dump``); JSON lines with ``--json`` or when piped."""
    from .report import message_json

    as_json = as_json or not sys.stdout.isatty()
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s:
        if msg_id:
            row = s.look_message_by_msg_id(msg_id)
            rows = [row] if row else []
        elif key or uniq_key:
            if not topic:
                raise typer.BadParameter("--key/--uniq-key need --topic")
            rows = s.query_by_key(topic, key or uniq_key).to_pylist()
        elif queue is not None and time is not None:
            if not topic:
                raise typer.BadParameter("--time needs --topic and --queue")
            ts = parse_time(time)
            found = {"topic": topic, "queueId": queue, "timestamp": ts,
                     "lower": s.offset_by_time(topic, queue, ts, "lower"),
                     "upper": s.offset_by_time(topic, queue, ts, "upper")}
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
            rows = [r for b in s.read_queue(topic, queue, offset, offset + 1) for r in b.to_pylist()]
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
def verify(store: Path = typer.Argument(..., help=STORE_HELP),
           commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
           consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
           index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
           variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
           bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
           dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
           dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS):
    """Full structural check (CRC of every record, queues, index, checkpoint); exit 1 on problems."""
    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers)
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
    console.print("[green]store is consistent[/green]")


@app.command()
def generate(store: Path = typer.Argument(..., help="store directory to create or append to"),
             messages: int = typer.Option(100_000, help="number of messages"),
             days: float = typer.Option(3.0, help="store times spread over this many days, ending now"),
             seed: int = typer.Option(42, help="random seed"),
             body_bytes: Optional[int] = typer.Option(None, help="fixed body size (mixed sizes by default)"),
             topics: Optional[int] = typer.Option(None, help="a production-shaped store: this many topics with "
                                                  "Zipf-like popularity (the sample's four topics by default)"),
             queues_per_topic: int = typer.Option(8, help="queues per topic (with --topics)"),
             retry_groups: int = typer.Option(0, help="consumer groups, each with a %RETRY% queue, every tenth "
                                              "with a %DLQ% one (with --topics)"),
             sizes: str = typer.Option("lognormal:600,0.8", "--sizes", help="body sizes with --topics: "
                                       "lognormal:MEAN,SIGMA (mean bytes, sigma of the log) or fixed:BYTES"),
             commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
             consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
             index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES):
    """Write a realistic sample store (topics, queues, tags, keys, mixed bodies, some compressed), or with
    --topics a production-shaped one (many queues, skewed topics, retry queues, mixed sizes)."""
    from .production import ProductionSpec, SizeSpec, generate_production_store
    from .sample import SampleSpec, generate_store

    # sizes for a new store; an existing one must match them
    file_sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries)
    with progress_bar() as bar:
        task = bar.add_task("generating", total=messages)
        advance = lambda n: bar.advance(task, n)  # noqa: E731
        if topics is None:
            result = generate_store(store, SampleSpec(messages=messages, days=days, seed=seed,
                                                      body_bytes=body_bytes), progress=advance, **file_sizes)
        else:
            spec = ProductionSpec(messages=messages, topics=topics, queues_per_topic=queues_per_topic,
                                  retry_groups=retry_groups, seed=seed, days=days,
                                  sizes=SizeSpec.parse(sizes if body_bytes is None else f"fixed:{body_bytes}"))
            result = generate_production_store(store, spec, progress=advance, **file_sizes)
    queues = f" in {result['queues']:,} queues of {result['topics']:,} topics" if "queues" in result else ""
    console.print(f"wrote {result['messages']:,} messages{queues} to {store} (commit log ends at "
                  f"{result['end_phy_offset']:,})")


@app.command()
def recover(store: Path = typer.Argument(..., help="store directory"),
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
def staging(store: Path = typer.Argument(..., help="store directory"),
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


@app.command()
def lag(store: Path = typer.Argument(..., help=STORE_HELP),
        offsets: str = typer.Option(..., help='committed offsets JSON {"broker": {"topic": {"qid": next}}} '
                                              'or a streaming checkpoint directory'),
        commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
        consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
        index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
        variant: Optional[str] = VARIANT, batch_topics: Optional[str] = BATCH_TOPICS,
        bcq_size: Optional[int] = BCQ_SIZE, force_verify_prop_crc: Optional[str] = FORCE_VERIFY,
        dledger_self: Optional[str] = DLEDGER_SELF, dledger_peers: Optional[str] = DLEDGER_PEERS,
        dledger_group: Optional[str] = DLEDGER_GROUP, fs: Optional[list[str]] = FS):
    """How many messages each queue is behind the given committed offsets (a query's progress)."""
    from .report import consumer_lag, load_offsets

    sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries) | \
        settings_given(batch_topics, bcq_size, force_verify_prop_crc, dledger_self, dledger_peers)
    with RocketStore.open(store, variant=variant, fs_options=fs_given(fs), **sizes) as s:
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
        err.print(f"[red]error:[/red] {e}")
        sys.exit(2)

