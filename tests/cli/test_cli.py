"""The rocketstore CLI, run as a user would run it."""

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "rocketstore_spark.cli"]


def run(*args, check=True):
    out = subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stderr + out.stdout
    return out


def run_here(*args, check=True):
    """The CLI run in this process (no interpreter start-up, for tests that run many commands): returncode,
    stdout and stderr as :func:`run` gives them, a user error printed as ``main`` prints it (exit code 2)."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from rocketstore_spark.cli.app import app
    from rocketstore_spark.errors import RocketStoreError

    result = CliRunner().invoke(app, [str(a) for a in args])
    code, stderr = result.exit_code, result.stderr
    if isinstance(result.exception, RocketStoreError):
        code, stderr = 2, stderr + f"error: {result.exception}\n"
    elif result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = SimpleNamespace(returncode=code, stdout=result.stdout, stderr=stderr)
    if check:
        assert code == 0, out.stderr + out.stdout
    return out


def run_on_terminal(*args) -> str:
    """Run the CLI with its standard output on a pseudo-terminal (as in an interactive shell); what it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(CLI + [str(a) for a in args], stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "220"})
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
    return b"".join(chunks).decode("utf-8", "replace")


def test_help_on_every_command():
    for command in ("inspect", "dump", "query", "verify", "generate", "recover", "staging", "lag"):
        assert "Usage" in run(command, "--help").stdout


def test_generate_inspect_verify(tmp_path):
    store = tmp_path / "s"
    assert "wrote 2,000 messages" in run("generate", store, "--messages", 2000, "--commit-log-file-size",
                                         1 << 20).stdout
    info = json.loads(run("inspect", store, "--json").stdout)
    assert {t["topic"] for t in info["topics"]} == {"orders", "payments", "clickstream", "audit-log"}
    assert sum(t["messages"] for t in info["topics"]) == 2000 and info["recovery"]["mode"] == "normal"
    assert "consistent" in run("verify", store).stdout
    shown = run("inspect", store).stdout
    assert "orders" in shown and "index file" in shown


def test_generate_a_production_shaped_store(tmp_path):
    """Many topics with skewed popularity, a retry queue per consumer group, mixed sizes, default file sizes."""
    store = tmp_path / "s"
    out = run("generate", store, "--messages", 20_000, "--topics", 40, "--queues-per-topic", 4, "--retry-groups",
              20, "--sizes", "lognormal:300,1.0", "--commit-log-file-size", 1 << 24).stdout
    assert "wrote 20,000 messages in 182 queues of 62 topics" in " ".join(out.split())
    info = json.loads(run("inspect", store, "--json").stdout)
    counts = {t["topic"]: t["messages"] for t in info["topics"]}
    assert sum(counts.values()) == 20_000
    assert counts["topic-00000"] > 5 * counts.get("topic-00039", 0)  # Zipf-like: the first topic dominates
    assert sum(1 for t in counts if t.startswith("%RETRY%group-")) >= 10
    assert {f.stat().st_size for f in (store / "consumequeue").glob("*/*/*")} == {6_000_000}  # broker default
    assert "bad sizes" in run("generate", tmp_path / "x", "--topics", 2, "--sizes", "zipf:3", check=False).stderr


def test_inspect_shows_topics_a_broker_would_not_serve_and_recover_registers_them(tmp_path):
    store = tmp_path / "s"
    run("generate", store, "--messages", 300, "--commit-log-file-size", 1 << 20)
    table = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert set(table) == {"orders", "payments", "clickstream", "audit-log"}  # the writer listed what it wrote
    (store / "config" / "topics.json").unlink()  # a store copied without the broker's config directory
    shown = run("inspect", store).stdout
    assert "not in the topic table" in shown and "--register-topics" in shown
    assert "added topics audit-log, clickstream, orders, payments" in run("recover", store,
                                                                          "--register-topics").stdout
    info = json.loads(run("inspect", store, "--json").stdout)
    assert info["topic_table"]["unlisted"] == [] and info["topic_table"]["topics"] == 4
    assert "already" in run("recover", store, "--register-topics").stdout
    (store / "config" / "topics.json").write_text("{broken")
    info = json.loads(run("inspect", store, "--json").stdout)  # the rest of the report still comes
    assert "unparsable" in info["topic_table"]["error"] and info["topics"]


def test_dump_and_query(sample_store):
    lines = run("dump", sample_store, "--topic", "orders", "--queue", 1, "--from", 2, "--to", 5,
                "--format", "jsonl").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["queueOffset"] for r in rows] == [2, 3, 4]
    key = rows[0]["keys"][0]
    assert any(json.loads(x)["queueOffset"] == 2 for x in run("query", sample_store, "--topic", "orders",
                                                                 "--key", key).stdout.splitlines())
    by_id = json.loads(run("query", sample_store, "--msg-id", rows[0]["msgId"]).stdout)
    assert by_id["uniqKey"] == rows[0]["uniqKey"]
    at_time = json.loads(run("query", sample_store, "--topic", "orders", "--queue", 1, "--time",
                             rows[1]["storeTimestamp"]).stdout)
    assert at_time["lower"] <= 3
    table = run("dump", sample_store, "--topic", "payments", "--limit", 3).stdout
    assert "payments" in table
    missing = run("query", sample_store, "--topic", "orders", "--key", "no-such-key", check=False)
    assert missing.returncode == 1


def test_query_prints_a_table_on_a_terminal_and_json_lines_with_json(sample_store):
    rows = [json.loads(line) for line in run("dump", sample_store, "--topic", "orders", "--queue", 0, "--limit", 40,
                                             "--format", "jsonl").stdout.splitlines()]
    long_body = next(r for r in rows if len(r.get("body") or "") > 60 and r["keys"])
    shown = run_on_terminal("query", sample_store, "--topic", "orders", "--key", long_body["keys"][0])
    assert "phy offset" in shown and "store time" in shown and str(long_body["commitLogOffset"]) in shown
    assert long_body["body"][:20] in shown and long_body["body"] not in shown and "…" in shown
    assert not shown.lstrip().startswith("{")
    as_json = run_on_terminal("query", sample_store, "--topic", "orders", "--key", long_body["keys"][0], "--json")
    found = [json.loads(line) for line in as_json.splitlines() if line.strip()]
    assert long_body["commitLogOffset"] in [r["commitLogOffset"] for r in found]
    assert any(r["body"] == long_body["body"] for r in found)  # JSON lines carry the whole body
    at_time = run_on_terminal("query", sample_store, "--topic", "orders", "--queue", 0, "--time",
                              long_body["storeTimestamp"])
    assert "lower" in at_time and "upper" in at_time and not at_time.lstrip().startswith("{")


def test_errors_are_short_and_verify_fails_on_damage(tmp_path, sample_store):
    out = run("inspect", tmp_path / "nothing", check=False)
    assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    broken = tmp_path / "broken"
    shutil.copytree(sample_store, broken)
    commitlog = sorted((broken / "commitlog").iterdir())[0]
    data = bytearray(commitlog.read_bytes())
    data[8:12] = b"\x7f\xff\xff\xff"  # the first record's BODYCRC no longer matches its body
    commitlog.write_bytes(bytes(data))
    result = run("verify", broken, check=False)
    assert result.returncode != 0 and ("CRC" in result.stdout or "problem" in result.stdout)


def test_inspect_and_verify_list_stray_files_and_still_work(tmp_path, sample_store):
    store = tmp_path / "s"
    shutil.copytree(sample_store, store)
    backup = store / "commitlog" / "00000000000000000000~"
    backup.write_bytes(b"editor backup")
    (store / "index" / ".nfs0000000000aa").write_bytes(b"")
    info = json.loads(run("inspect", store, "--json").stdout)
    assert len(info["stray_files"]) == 2 and any(str(backup) in s for s in info["stray_files"])
    shown = run("inspect", store)
    assert "skipped 2 stray entries" in shown.stdout and str(backup) in shown.stdout
    assert "warning: skipped stray entry" in shown.stderr and "Traceback" not in shown.stderr
    checked = run("verify", store)
    assert "consistent" in checked.stdout and ".nfs0000000000aa" in checked.stdout


def test_recover_and_lag(tmp_path, sample_store):
    store = tmp_path / "s"
    shutil.copytree(sample_store, store)
    (store / "abort").write_text("1")
    assert "repaired" in run("recover", store).stdout
    assert not (store / "abort").exists()
    assert "nothing to recover" in run("recover", store).stdout
    offsets = json.dumps({"orders": {"0": 0}})
    out = run("lag", store, "--offsets", offsets).stdout
    assert "total lag" in out and "orders" in out
    assert Path(store / "lock").exists()


def test_staging_lists_and_removes_abandoned_jobs(tmp_path, sample_store):
    from rocketstore_spark.store.write.staging import stage
    from tests.store.write.test_writer import messages, no_job_leftovers

    store = tmp_path / "s"
    shutil.copytree(sample_store, store)
    assert "nothing staged" in run("staging", store).stdout
    stage(store, "deadjob", "p0", [messages(30, start=10_000)], store_host="10.0.0.1:10911")
    listed = json.loads(run("staging", store, "--json").stdout)
    assert [(j["job_id"], j["state"]) for j in listed] == [("deadjob", "open")] and listed[0]["disk_bytes"] > 0
    assert "staged write jobs: 1 (1 open)" in run("inspect", store).stdout
    assert "kept staging of job deadjob" in run("recover", store).stdout  # recovery never guesses it is dead
    assert "nothing to remove" in run("staging", store, "--older-than", "1d").stdout
    bad = run("staging", store, "--remove", "nope", check=False)
    assert bad.returncode == 2 and "no staged job 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    assert "removed job deadjob" in run("staging", store, "--remove", "deadjob").stdout
    assert no_job_leftovers(store)


def test_every_store_command_takes_the_sizes_including_a_harness_size_file(tmp_path, golden_dir):
    """A store whose index sizes cannot be told from its files: key lookups say which flags to pass and work
    with them; the golden store's ``sizes.args`` (``--commitlog-size … --index-num …``) is accepted as is."""
    from tests.store.write.test_writer import _ambiguous_index_store

    store = _ambiguous_index_store(tmp_path / "s")
    failed = run("query", store, "--topic", "t", "--key", "AMBIG50", check=False)
    assert failed.returncode == 2 and "--index-hash-slots" in failed.stderr
    shown = run("inspect", store)  # the rest of the store is shown, and what to pass for the index
    assert "--index-hash-slots" in shown.stdout and " t " in shown.stdout
    checked = run("verify", store, check=False)
    assert checked.returncode == 1 and "--index-hash-slots" in checked.stdout
    for flags in (("--index-hash-slots", 64, "--index-max-entries", 256), ("--index-slots", 64, "--index-num", 256)):
        rows = [json.loads(line) for line in run("query", store, "--topic", "t", "--uniq-key", "AMBIG50",
                                                 *flags).stdout.splitlines()]
        assert [r["uniqKey"] for r in rows] == ["AMBIG50"]
    golden_flags = (golden_dir / "sizes.args").read_text().split()
    assert "--commitlog-size" in golden_flags
    for command in (("inspect",), ("verify",), ("lag", "--offsets", "{}"), ("dump", "--limit", 1)):
        run(command[0], golden_dir / "store", *command[1:], *golden_flags)
    rows = run("query", golden_dir / "store", "--topic", "TopicTest", "--key", "order-42",
               *golden_flags).stdout.splitlines()
    assert len(rows) == 64  # the hot key: the real store's answer is capped at 64 too


def test_a_remote_uri_gets_a_short_error_naming_it():
    out = run("inspect", "s3://no-such-bucket/archive/store", "--fs", "endpoint=127.0.0.1:9", "--fs", "retries=0",
              "--fs", "scheme=http", "--fs", "region=us-east-1", "--fs", "connectTimeout=1", check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "s3://no-such-bucket/archive" in out.stderr and "failed after 1 attempt(s)" in out.stderr
    assert "bad --fs" in run("inspect", "s3://b/store", "--fs", "endpoint", check=False).stderr.replace("'", "") \
        or "name=value" in run("inspect", "s3://b/store", "--fs", "endpoint", check=False).stderr




def test_a_queue_whose_first_unit_cannot_be_read_is_described_without_its_times(variant_golden, tmp_path):
    """Fuzz case 632812995623: a damaged key in a RocksDB consume queue leaves TopicTest's queues without a readable
    first unit; the description still covers every topic."""
    from rocketstore_spark.cli.report import describe_store
    from rocketstore_spark.store import RocketStore
    from tests.store.fuzz_cases import make_case

    copy, _ = make_case(632812995623, variant_golden("rocksdb-cq") / "store", tmp_path)
    with RocketStore.open(copy) as s:
        unreadable = [q for q in s.queue_ids("TopicTest") if s.max_offset("TopicTest", q) > s.min_offset("TopicTest", q)
                      and not len(s.consume_queue("TopicTest", q).units(s.min_offset("TopicTest", q),
                                                                          s.min_offset("TopicTest", q) + 1))]
        assert unreadable  # the damage this test is about
        described = {t["topic"]: t for t in describe_store(s)["topics"]}
    assert set(described) == set(s.topics()) and all(t["first_ms"] for t in described.values())
