"""The prop-crc golden store (``enabledAppendPropCRC=true``, reopened with ``forceVerifyPropCRC``): detected,
read equal to the real store's answers, its ``__CRC32#`` property verified."""


import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.errors import CorruptRecordError, UnsupportedVariantError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format.prop_crc import encode_prop_crc
from tests.store.read.variant_view import (
    compare_key_queries,
    compare_offsets,
    compare_queue_reads,
    compare_scan_with_manifest,
    compare_time_queries,
    sample_queries,
    variant_fixtures,
)
from tests.store.reference import commitlog_file_of, record_layout

FILE_SIZE = 1048576


golden, view, store, copy = variant_fixtures("prop-crc")


def test_detected_as_prop_crc(store):
    assert store.variant.name == "prop-crc" and store.variant.has("prop-crc")
    assert store.commitlog.prop_crc_required  # as its broker with forceVerifyPropCRC: every record must carry one
    assert any("__CRC32#" in e for e in store.variant.evidence)


def test_recovery_and_offsets_match_the_real_store(store, view):
    assert store.recovery.mode == view["summary"]["recoveryMode"] == "normal"
    compare_offsets(store, view)


def test_every_queue_row_equals_the_real_getmessage(store, view):
    """Every field of every row, the ``__CRC32#`` pair left in ``properties`` as RocketMQ's decoder leaves it."""
    assert compare_queue_reads(store, view) == len(view["messages"]) == 4484
    assert all("__CRC32#" in line["properties"] for line in view["messages"])


def test_scan_with_crc_verification_equals_the_manifest(store, view):
    manifest = view["manifest"]
    assert len(manifest) == view["summary"]["commitLogRecords"] == 4484
    compare_scan_with_manifest(store, manifest, verify_crc=True)
    rows = [r for b in store.scan_raw(columns=["propertiesString"]) for r in b.to_pylist()]
    assert all(r["propertiesString"].endswith(encode_prop_crc(m["propCrc"]["value"]).decode())
               for r, m in zip(rows, manifest))


def test_queue_reads_verify_every_crc(store, view):
    total = sum(b.num_rows for q in view["queues"]
                for b in store.read_queue(q["topic"], q["queueId"], columns=["queueOffset"], verify_crc=True))
    assert total == 4484


def test_key_queries_sample(store, view):
    chosen = sample_queries(view["queries"], 8)
    assert len(chosen) > 1000
    compare_key_queries(store, view["manifest"], chosen)


@pytest.mark.slow
def test_key_queries_all(store, view):
    compare_key_queries(store, view["manifest"], view["queries"])


def test_time_queries(store, view):
    assert len(view["time_queries"]) == 456
    compare_time_queries(store, view["time_queries"])


def test_encoded_digits_are_the_stored_ones(view):
    for m in view["manifest"][:200]:
        assert encode_prop_crc(m["propCrc"]["value"]).decode()[9:19] == m["propCrc"]["digits"]


# --- a broken property CRC -----------------------------------------------------------------------------------



def _victim(view):
    """A dispatched record of the first commit-log file (normal recovery never walks that file), with a body."""
    return next(m for m in view["manifest"][5:] if m["inConsumeQueue"] and m["bodyLength"] > 0
                and m["commitLogOffset"] + m["storeSize"] < FILE_SIZE)


def _patch(store_dir, offset: int, data: bytes) -> str:
    name, pos = commitlog_file_of(offset, FILE_SIZE)
    path = store_dir / "commitlog" / name
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)
    return str(path)


@pytest.mark.parametrize("where", ["born-timestamp", "property-value", "digits"])
def test_a_crc_mismatch_is_a_corrupt_record_naming_file_and_offset(copy, view, where):
    """Bytes the body CRC does not cover: only the property CRC catches them."""
    m = _victim(view)
    start = m["commitLogOffset"]
    lay = record_layout(m)
    if where == "born-timestamp":
        at, data = start + 40 + 7, bytes([(m["bornTimestamp"] & 0xFF) ^ 0x01])
    elif where == "property-value":
        at = start + lay["props_pos"] + m["propertiesString"].encode().index(b"\x01") + 1
        data = b"#"
    else:
        wrong = (m["propCrc"]["value"] + 1) % (1 << 31)
        at, data = start + m["storeSize"] - 20, encode_prop_crc(wrong)
    path = _patch(copy, at, data)
    _, record_pos = commitlog_file_of(start, FILE_SIZE)
    with RocketStore.open(copy) as s:
        assert s.variant.name == "prop-crc"
        plain = [b for b in s.read_queue(m["topic"], m["queueId"], columns=["commitLogOffset"])]
        assert start in pa.Table.from_batches(plain).column(0).to_pylist()  # without verifyCrc: read as stored
        with pytest.raises(CorruptRecordError) as err:
            list(s.read_queue(m["topic"], m["queueId"], columns=["commitLogOffset"], verify_crc=True))
        assert err.value.path == path and err.value.offset == record_pos and "__CRC32#" in str(err.value)
        with pytest.raises(CorruptRecordError) as err:
            list(s.scan_raw(columns=["commitLogOffset"], verify_crc=True))
        assert err.value.path == path and err.value.offset == record_pos


def test_cli_verify_reports_a_property_crc_mismatch(copy, view):
    import subprocess
    import sys

    cli = [sys.executable, "-m", "rocketstore_spark.cli", "verify"]
    assert subprocess.run(cli + [str(copy)], capture_output=True, text=True, timeout=300).returncode == 0
    m = _victim(view)
    _patch(copy, m["commitLogOffset"] + 40 + 7, bytes([(m["bornTimestamp"] & 0xFF) ^ 0x01]))
    out = subprocess.run(cli + [str(copy)], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "__CRC32#" in out.stdout + out.stderr


def test_a_required_crc_property_that_is_missing_fails_verification(copy, view):
    """forceVerifyPropCRC: a record of a prop-crc store without the property is invalid ('__CRC32#' renamed)."""
    m = _victim(view)
    path = _patch(copy, m["commitLogOffset"] + m["storeSize"] - 20, b"__CRC33#")
    with RocketStore.open(copy) as s:
        with pytest.raises(CorruptRecordError) as err:
            list(s.read_queue(m["topic"], m["queueId"], columns=["commitLogOffset"], verify_crc=True))
        assert err.value.path == path
    with RocketStore.open(copy, variant="default") as s:  # told it is a default store: the property is optional
        assert not s.commitlog.prop_crc_required
        rows = [b.num_rows for b in s.read_queue(m["topic"], m["queueId"], columns=["queueId"], verify_crc=True)]
        assert sum(rows) == s.max_offset(m["topic"], m["queueId"])


def test_recovery_cuts_a_torn_last_record_by_its_property_crc(copy, view):
    """The last record's properties zeroed from inside a value (length arithmetic and body CRC still pass): with
    the property CRC required, recovery stops before it, as the real store with forceVerifyPropCRC does."""
    last = max((m for m in view["manifest"]), key=lambda m: m["commitLogOffset"])
    lay = record_layout(last)
    tear = last["commitLogOffset"] + lay["props_pos"] + 3
    _patch(copy, tear, bytes(last["commitLogOffset"] + last["storeSize"] - tear))
    (copy / "abort").write_bytes(b"")
    with RocketStore.open(copy) as s:
        assert s.recovery.mode == "abnormal" and s.max_phy_offset() == last["commitLogOffset"]
    with RocketStore.open(copy, variant="default") as s:  # body CRC and lengths only: the torn record stays
        assert s.max_phy_offset() == last["commitLogOffset"] + last["storeSize"]


def test_writes_into_a_prop_crc_store_are_refused(copy):
    before = sorted((p.name, p.stat().st_size) for p in (copy / "commitlog").iterdir())
    with pytest.raises(UnsupportedVariantError) as err:
        RocketStore.open_writer(copy)
    assert err.value.variant == "prop-crc" and "prop-crc" in str(err.value)
    with pytest.raises(UnsupportedVariantError):
        RocketStore.open_writer(copy, variant="default")  # an override never lets a writer mix layouts
    assert sorted((p.name, p.stat().st_size) for p in (copy / "commitlog").iterdir()) == before
    assert not (copy / "abort").exists()


def test_crc_check_is_vectorised_over_positions(store):
    """The property check reads the 20-byte tails in place (no per-record Python for the layout test)."""
    from rocketstore_spark.store.format.codec import parse_records
    from rocketstore_spark.store.format.prop_crc import has_prop_crc

    buf = store.commitlog.queue.buffer(0)
    walk = store.commitlog.walk_file(0, check_crc=False)
    assert len(walk.fields) > 100 and has_prop_crc(buf, walk.fields).all()
    fields = parse_records(buf, np.array([0]))
    assert has_prop_crc(buf, fields).tolist() == [True]
