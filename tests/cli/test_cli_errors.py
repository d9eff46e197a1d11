"""User errors of the rocketstore CLI: one line saying what to do, exit status 2, never a Python traceback; and
output that stays readable (escaped binary bodies, help at 80 columns, lookups that say when they are cut)."""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from rocketstore_spark.store import RocketStore

CLI = [sys.executable, "-m", "rocketstore_spark.cli"]


def run(*args, env=None):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def user_error(*args) -> str:
    out = run(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return " ".join(out.stderr.split())


@pytest.mark.parametrize("offsets,expected", [
    ("/nonexistent", "no existing file or directory"),
    ("{bad", "not JSON offsets"),
    ('{"orders": {"0": "x"}}', "must be an integer"),
    ('{"orders": 5}', "expected"),
])
def test_lag_with_bad_offsets_is_one_line(sample_store, offsets, expected):
    assert expected in user_error("lag", sample_store, "--offsets", offsets)


def test_lag_with_an_empty_checkpoint_directory(sample_store, tmp_path):
    assert "no committed batch" in user_error("lag", sample_store, "--offsets", tmp_path)


def test_generate_refuses_a_directory_holding_a_store_unless_appending(tmp_path):
    store = tmp_path / "s"
    assert run("generate", store, "--messages", 50, "--commit-log-file-size", 1 << 20).returncode == 0
    before = sorted(p.name for p in (store / "consumequeue").iterdir())
    message = user_error("generate", store, "--messages", 10)
    assert "already holds a store" in message and "--append" in message
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == before
    appended = run("generate", store, "--messages", 10, "--append", "--seed", 7)
    assert appended.returncode == 0, appended.stderr
    info = json.loads(run("inspect", store, "--json").stdout)
    assert sum(t["messages"] for t in info["topics"]) == 60


def test_unknown_topic_and_queue_are_errors_naming_what_exists(sample_store):
    message = user_error("dump", sample_store, "--topic", "ordrs")
    assert "no topic 'ordrs'" in message and "did you mean 'orders'" in message and "payments" in message
    assert "has no queue 99" in user_error("dump", sample_store, "--topic", "orders", "--queue", 99)
    assert "did you mean 'orders'" in user_error("query", sample_store, "--topic", "ordrs", "--key", "x")


def test_offsets_outside_a_queue_give_its_range(sample_store):
    with RocketStore.open(sample_store) as s:
        first, end = s.min_offset("orders", 0), s.max_offset("orders", 0)
    message = user_error("query", sample_store, "--topic", "orders", "--queue", 0, "--offset", end + 10)
    assert f"holds offsets {first}..{end - 1}" in message
    message = user_error("dump", sample_store, "--topic", "orders", "--queue", 0, "--from", -5)
    assert f"holds offsets {first}..{end - 1}" in message and "fail_on_data_loss" not in message


def test_bad_times_are_errors_and_iso_times_work(sample_store):
    out = run("dump", sample_store, "--topic", "orders", "--since", "yesterday")
    assert out.returncode == 2 and "ISO 8601" in out.stderr and "Traceback" not in out.stderr
    iso = run("dump", sample_store, "--topic", "orders", "--since", "2000-01-01T00:00:00Z", "--limit", 3,
              "--format", "jsonl")
    assert iso.returncode == 0 and len(iso.stdout.splitlines()) == 3


@pytest.fixture(scope="module")
def key_store(tmp_path_factory):
    """200 messages with key order-42 and one with a binary body holding a newline and brackets."""
    path = tmp_path_factory.mktemp("keys") / "store"
    with RocketStore.open_writer(path, commit_log_file_size=1 << 20, consume_queue_file_size=6000,
                          index_hash_slots=4000, index_max_entries=16000) as w:
        w.append(pa.table({"topic": ["orders"] * 200, "queueId": [0] * 200, "body": [b"x"] * 200,
                           "keys": [["order-42"]] * 200}))
        w.append(pa.table({"topic": ["bin"], "queueId": [0], "body": [b"\x00\x01line\nbreak [red]x[/red]\xff"]}))
    return path


def test_key_lookups_say_when_the_cap_cuts_them(key_store):
    capped = run("query", key_store, "--topic", "orders", "--key", "order-42", "--json")
    assert capped.returncode == 0 and len(capped.stdout.splitlines()) == 64
    assert "--max" in capped.stderr and "--since" in capped.stderr
    lifted = run("query", key_store, "--topic", "orders", "--key", "order-42", "--json", "--max", 500)
    assert lifted.returncode == 0 and len(lifted.stdout.splitlines()) == 200 and "--max" not in lifted.stderr
    with RocketStore.open(key_store) as s:
        assert s.query_by_key("orders", "order-42").num_rows == 64
        assert s.query_by_key("orders", "order-42", max_num=1000).num_rows == 200


def test_binary_bodies_are_escaped_in_tables(key_store):
    out = run("dump", key_store, "--topic", "bin", env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    row = [line for line in out.stdout.splitlines() if "bin" in line and "line" in line]
    assert len(row) == 1, out.stdout  # the newline byte did not split the row
    assert "\\x00\\x01line\\nbreak [red]x[/red]\\xff" in row[0]


def test_help_fits_80_columns_and_shows_flags_as_flags():
    out = run("query", "--help", env={"COLUMNS": "80"})
    assert out.returncode == 0
    assert "--json " in out.stdout and "--json <bool>" not in out.stdout and "--json [" not in out.stdout
    assert "…" not in out.stdout and "--commit-log-file-size, --commitlog-size" in out.stdout
    assert "``" not in out.stdout and ":class:" not in out.stdout
    assert all(len(line) <= 80 for line in out.stdout.splitlines())


def test_a_clean_verify_says_what_it_checked(sample_store):
    out = run("verify", sample_store)
    assert out.returncode == 0
    said = " ".join(out.stdout.split())
    assert "consistent" in said and "commit-log file" in said and "consume queue" in said and "index" in said


def test_plan_prints_the_choice_and_its_reason(sample_store):
    out = run("plan", sample_store, "--tags", "paid")
    assert out.returncode == 0, out.stderr
    assert "consume-queue plan" in out.stdout and "tag" in out.stdout and "partition(s)" in out.stdout
    full = json.loads(run("plan", sample_store, "--json", "-o", "maxBytesPerPartition=65536").stdout)
    assert full["choices"] and full["partitions"]
    assert "did you mean 'topics'" in " ".join(user_error("plan", sample_store, "-o", "topcs=orders").split())
