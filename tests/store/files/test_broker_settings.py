"""The broker settings a store's files leave open (``BrokerSettings``: the flags of a variant harness's
``store.args``): each one changes a read as the real store's setting does, is validated when the store is opened,
and the CLI takes the archives' ``sizes.args`` + ``store.args`` as they are."""

import json
import shutil
import subprocess
import sys
import zlib

import pytest

from rocketstore_spark.errors import InvalidArgumentError, StoreConfigError
from rocketstore_spark.store import RocketStore
from tests.store.read.variant_view import load_view, run_vview
from tests.store.reference import commitlog_file_of

FILE_SIZE = 1048576
VARIANTS = ("lmq", "prop-crc", "batch-cq", "rocksdb-cq", "dledger")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_the_cli_takes_every_archives_store_args_as_they_are(variant_golden):
    for name in VARIANTS:
        golden = variant_golden(name)
        flags = (golden / "sizes.args").read_text().split() + \
            (golden / "store.args").read_text().replace("PORT", "40911").split()
        out = _cli("inspect", golden / "store", "--json", *flags)
        assert out.returncode == 0, (name, out.stderr)
        info = json.loads(out.stdout)
        assert info["variant"]["name"] == name, name
        if name == "batch-cq":
            assert info["variant"]["settings"] == {"batch_topics": "BatchTopic", "batch_consume_queue_file_size": 4600}
        if name == "prop-crc":
            assert info["variant"]["settings"] == {"force_verify_prop_crc": True}
        if name == "dledger":
            assert info["variant"]["dledgerCommitted"] == {"committedIndex": 4467, "committedPos": 14851785}
    golden = variant_golden("batch-cq")
    flags = (golden / "sizes.args").read_text().split() + (golden / "store.args").read_text().split()
    rows = _cli("dump", golden / "store", "--topic", "BatchTopic", "--queue", 0, "--limit", 3, "--format", "jsonl",
                *flags)
    assert rows.returncode == 0 and len(rows.stdout.splitlines()) == 3, rows.stderr
    bad = _cli("inspect", variant_golden("prop-crc") / "store", "--force-verify-prop-crc", "yes")
    assert bad.returncode == 2 and "must be true or false" in bad.stderr


@pytest.mark.parametrize("kwargs,message", [
    ({"batch_consume_queue_file_size": 4601}, "positive multiple of 46"),
    ({"batch_consume_queue_file_size": 0}, "positive multiple of 46"),
    ({"force_verify_prop_crc": "true"}, "True, False or None"),
    ({"dledger_self_id": ""}, "non-empty name"),
    ({"dledger_peers": " "}, "at least one peer"),
])
def test_bad_settings_are_refused_when_opening(variant_golden, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        RocketStore.open(variant_golden("dledger") / "store", **kwargs)


def test_dledger_self_id_picks_one_of_several_logs(variant_golden, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(variant_golden("dledger") / "store", store)
    shutil.copytree(store / "dledger-n0", store / "dledger-n1")
    with pytest.raises(StoreConfigError, match="several DLedger logs.*dledgerSelfId"):
        RocketStore.open(store)
    with RocketStore.open(store, dledger_self_id="n1") as s:
        assert s.commitlog.queue.directory == store / "dledger-n1" / "data" and s.max_phy_offset() == 14851785
    with pytest.raises(StoreConfigError, match="no DLedger log for self id 'n9'"):
        RocketStore.open(store, dledger_self_id="n9")


def _last(view):
    """The last record with a body (a record without one has no body CRC to check)."""
    return max((m for m in view["manifest"] if m["bodyLength"] > 0), key=lambda m: m["commitLogOffset"])


def _end(view) -> int:
    last = max(view["manifest"], key=lambda m: m["commitLogOffset"])
    return last["commitLogOffset"] + last["storeSize"]


def _patch(store_dir, offset: int, data: bytes) -> None:
    name, pos = commitlog_file_of(offset, FILE_SIZE)
    with open(store_dir / "commitlog" / name, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def _damage(store_dir, view, kind: str) -> None:
    """The last record with its born timestamp changed (``header``: the body CRC still holds, the property
    CRC not), or with a wrong BODYCRC and the property CRC recomputed over it (``bodycrc``); ``abort`` left."""
    last = _last(view)
    at = last["commitLogOffset"]
    if kind == "header":
        _patch(store_dir, at + 28 + 8 + 4 + 7, b"\x7f")  # the last byte of BORNTIMESTAMP
    else:
        _patch(store_dir, at + 8, (last["bodyCRC"] ^ 1).to_bytes(4, "big", signed=True))
        name, pos = commitlog_file_of(at, FILE_SIZE)
        data = (store_dir / "commitlog" / name).read_bytes()[pos:pos + last["storeSize"]]
        crc = zlib.crc32(data[:-20]) & 0x7FFFFFFF
        digits = "".join(str((crc // 10 ** i) % 10) for i in range(10)).encode()
        _patch(store_dir, at + last["storeSize"] - 11, digits)
    (store_dir / "abort").write_bytes(b"")


@pytest.mark.parametrize("kind,force,kept", [
    ("header", None, False), ("header", False, True), ("header", True, False),
    ("bodycrc", None, False), ("bodycrc", False, False), ("bodycrc", True, True)])
def test_force_verify_prop_crc_decides_which_crc_recovery_checks(variant_golden, tmp_path, kind, force, kept):
    """``checkMessageAndReturnSize``: forceVerifyPropCRC=true checks the property CRC instead of the body CRC,
    false the body CRC only; unset, rocketstore checks both."""
    golden = variant_golden("prop-crc")
    view = load_view(golden)
    store = tmp_path / "store"
    shutil.copytree(golden / "store", store)
    _damage(store, view, kind)
    last = _last(view)
    with RocketStore.open(store, force_verify_prop_crc=force) as s:
        assert s.recovery.mode == "abnormal"
        assert s.max_phy_offset() == (_end(view) if kept else last["commitLogOffset"])


@pytest.mark.slow
@pytest.mark.parametrize("kind,force", [("header", "false"), ("header", "true"), ("bodycrc", "true")])
def test_force_verify_prop_crc_recovery_equals_the_referees(variant_golden, tmp_path, kind, force):
    golden = variant_golden("prop-crc")
    view = load_view(golden)
    store, ours = tmp_path / "store", tmp_path / "ours"
    shutil.copytree(golden / "store", store)
    _damage(store, view, kind)
    shutil.copytree(store, ours)
    real = run_vview(store, tmp_path / "view", golden, ["--force-verify-prop-crc", force])
    with RocketStore.open(ours, force_verify_prop_crc=force == "true") as s:
        assert s.max_phy_offset() == real["summary"]["maxPhyOffset"]
        assert {(q["topic"], q["queueId"]): q["maxOffset"] for q in real["queues"]} == \
            {(t, q): s.max_offset(t, q) for t in s.topics() for q in s.queue_ids(t)}
