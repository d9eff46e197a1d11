"""``rocketstore inspect --tiered-path``: where a queue's offsets lie, local store or tiered storage (a real
broker's tiered segments, ``tests/store/files/data/tiered-broker-5.3.3``)."""

import json

from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore
from tests.store.read.test_tiered_history import DATA

runner = CliRunner()


def test_inspect_lists_local_and_tiered_ranges(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()  # a local store that lost everything (all expired)
    out = runner.invoke(app, ["inspect", str(store), "--tiered-path", str(DATA / "segments"), "--json"])
    assert out.exit_code == 0, out.output
    tiered = json.loads(out.stdout)["tiered"]
    assert tiered["broker"] == "broker-e2e"
    assert tiered["queues"] == [{"topic": "history", "queueId": 0, "local": [0, 0], "tiered": [0, 65],
                                 "history": [0, 65]}]
    table = runner.invoke(app, ["inspect", str(store), "--tiered-path", str(DATA / "segments")])
    assert table.exit_code == 0 and "0..65" in table.stdout and "broker-e2e" in table.stdout


def test_inspect_refuses_a_directory_without_segments(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()
    out = runner.invoke(app, ["inspect", str(store), "--tiered-path", str(tmp_path)])
    assert out.exit_code != 0 and "one cluster directory" in str(out.exception or out.output)


def test_query_by_key_searches_the_tiered_index(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()  # the local store lost everything: the tiered index answers
    got = [json.loads(line) for line in (DATA / "by-key.jsonl").read_text().splitlines()]
    wanted = sorted((g["queueOffset"], g["commitLogOffset"]) for g in got if g["key"] == "k3" and g["queueId"] == 0)
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--key", "k3", "--tiered-path",
                              str(DATA / "segments"), "--json"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted((r["queueOffset"], r["commitLogOffset"]) for r in rows) == wanted and len(wanted) > 5
    assert all("k3" in r["keys"] and r["topic"] == "history" for r in rows)
    # without the tiered storage the local store has nothing (and no such topic)
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--key", "k3", "--json"])
    assert out.exit_code != 0 and "no topic 'history'" in str(out.exception or out.output)


def test_query_by_time_searches_the_tiered_queue(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        times = [t for b in history.read_queue("history", 0, columns=["storeTimestamp"])
                 for t in b.column(0).cast("int64").to_pylist()]
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--queue", "0", "--time", str(times[30]),
                              "--tiered-path", str(DATA / "segments"), "--json"])
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout)
    lower = found["lower"]  # the first offset stored at or after the time
    assert times[lower] >= times[30] and (lower == 0 or times[lower - 1] < times[30]) and lower <= 30
    assert found["upper"] >= lower and times[found["upper"]] == times[lower]


def test_a_remote_tiered_path_is_refused(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--key", "k3", "--tiered-path",
                              "s3://bucket/tiered"])
    assert out.exit_code != 0 and "PosixFileSegment" in str(out.exception or out.output)


def test_query_by_queue_offset_reads_the_tiered_queue(tmp_path):
    store = tmp_path / "store"
    RocketStore.open_writer(store).close()
    got = [json.loads(line) for line in (DATA / "received.jsonl").read_text().splitlines()]
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--queue", "0", "--offset", "42",
                              "--tiered-path", str(DATA / "segments"), "--json"])
    assert out.exit_code == 0, out.output
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert (row["queueOffset"], row["commitLogOffset"], row["uniqKey"]) == \
        (42, got[42]["commitLogOffset"], got[42]["msgId"])
    out = runner.invoke(app, ["query", str(store), "--topic", "history", "--queue", "0", "--offset", "65",
                              "--tiered-path", str(DATA / "segments")])
    assert out.exit_code != 0 and "holds offsets 0..64" in str(out.exception or out.output)
