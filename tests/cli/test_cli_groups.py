"""``rocketstore groups``, ``lag --group`` and ``dump --group`` on a store carrying a real broker's consumer offsets
(``tests/store/files/data/consumerOffset-broker-5.3.3.json``, with what its admin API answered)."""

import json

from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore
from tests.cli.test_cli_errors import user_error
from tests.store.files.test_consumer_offsets import ADMIN, config_store

runner = CliRunner()


def invoke(*args):
    out = runner.invoke(app, [str(a) for a in args])
    return out


def test_dump_group_lists_what_the_group_has_not_consumed(tmp_path):
    root = config_store(tmp_path)
    committed = {o["queueId"]: o["consumerOffset"] for o in ADMIN if o["group"] == "g-pull"}
    with RocketStore.open(root) as store:
        expected = sorted((q, off) for q in store.queue_ids("orders")
                          for off in range(committed.get(q, 0), store.max_offset("orders", q)))
    out = invoke("dump", root, "--group", "g-pull", "--format", "jsonl")
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert sorted((r["queueId"], r["queueOffset"]) for r in rows) == expected and expected
    # one queue, and a topic given explicitly
    out = invoke("dump", root, "--group", "g-pull", "--topic", "orders", "--queue", 1, "--format", "jsonl")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["queueOffset"] for r in rows) == [off for q, off in expected if q == 1]
    # a group that consumed everything: nothing to dump
    out = invoke("dump", root, "--group", "g-push", "--format", "jsonl")
    assert out.exit_code == 0 and not [line for line in out.stdout.splitlines() if line.startswith("{")]


def test_dump_group_mistakes_are_explained(tmp_path):
    root = config_store(tmp_path)
    message = user_error("dump", root, "--group", "g-nope")  # the user's error, no traceback
    assert "'g-nope'" in message and "g-pull" in message
    message = user_error("dump", root, "--group", "CID_RMQ_SYS_TRANS", "--topic", "orders")
    assert "committed no offset for topic 'orders'" in message and "RMQ_SYS_TRANS" in message
    out = invoke("dump", root, "--group", "g-pull", "--from", 3)
    assert out.exit_code != 0 and "--group or --from" in out.output


def test_lag_group_totals_the_broker_diff(tmp_path):
    root = config_store(tmp_path)
    diff = sum(o["brokerOffset"] - o["consumerOffset"] for o in ADMIN if o["group"] == "g-pull")
    out = invoke("lag", root, "--group", "g-pull")
    assert out.exit_code == 0, out.output
    assert f"total lag: {diff:,}" in out.stdout
