"""Every record of the golden store decodes to exactly what the real RocketMQ stored (manifest.jsonl)."""

from collections import Counter

import pyarrow as pa
import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.store import COLUMNS, RAW_COLUMNS
from tests.store.reference import keys_tokens, sha256

ALL = COLUMNS + RAW_COLUMNS
TRANSACTION_TYPE = {0x0: "NOT_TYPE", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}


@pytest.fixture(scope="module")
def scanned(golden_store):
    """(rows, batch sizes) of a full scan with every column, raw ones included."""
    rows, sizes = [], []
    for batch in golden_store.scan_raw(columns=ALL):
        assert batch.schema.names == list(ALL)
        sizes.append(batch.num_rows)
        rows.extend(batch.to_pylist())
    return rows, sizes


@pytest.fixture(scope="module")
def rows(scanned):
    return scanned[0]


def ms(ts) -> int:
    """A pyarrow timestamp[ms, UTC] as it comes out of to_pylist -> epoch milliseconds."""
    return round(ts.timestamp() * 1000)


def test_scan_returns_every_record_once_in_commitlog_order(rows, manifest, golden_view):
    assert len(rows) == len(manifest) == golden_view["summary"]["commitLogRecords"] == 20003
    assert [r["commitLogOffset"] for r in rows] == [m["commitLogOffset"] for m in manifest]


def test_scan_includes_records_that_are_in_no_consume_queue(rows, manifest):
    kinds = Counter(TRANSACTION_TYPE[r["sysFlag"] & 0xC] for r in rows)
    assert kinds == Counter(m["transactionType"] for m in manifest)
    assert kinds["PREPARED"] == 400 and kinds["ROLLBACK"] == 159
    not_dispatched = [m["commitLogOffset"] for m in manifest if not m["inConsumeQueue"]]
    assert len(not_dispatched) == 20003 - 19444
    scanned = {r["commitLogOffset"] for r in rows}
    assert set(not_dispatched) <= scanned
    # PREPARED / ROLLBACK records carry queue offset 0 on disk
    assert all(r["queueOffset"] == 0 for r in rows if r["sysFlag"] & 0xC in (0x4, 0xC))


def test_batches_hold_at_most_10000_rows(scanned, golden_store):
    assert max(scanned[1]) <= 10_000 and sum(scanned[1]) == 20003
    small = [b.num_rows for b in golden_store.scan_raw(columns=["queueId"], batch_rows=700)]
    assert max(small) <= 700 and sum(small) == 20003


@pytest.mark.parametrize("field", ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "msgId",
                                   "uniqKey", "bornHost", "storeHost", "sysFlag", "flag", "reconsumeTimes",
                                   "bodyCRC", "preparedTransactionOffset", "propertiesString"])
def test_scalar_field(rows, manifest, field):
    bad = [(m["commitLogOffset"], r[field], m[field]) for r, m in zip(rows, manifest) if r[field] != m[field]]
    assert not bad, bad[:5]


def test_timestamps_are_exact_milliseconds(rows, manifest):
    bad = [(m["commitLogOffset"], ms(r["storeTimestamp"]), ms(r["bornTimestamp"])) for r, m in zip(rows, manifest)
           if (ms(r["storeTimestamp"]), ms(r["bornTimestamp"])) != (m["storeTimestamp"], m["bornTimestamp"])]
    assert not bad, bad[:5]


def test_timestamp_type_is_utc_milliseconds(golden_store):
    batch = next(golden_store.scan_raw(columns=["bornTimestamp", "storeTimestamp"]))
    assert batch.schema.field("storeTimestamp").type == pa.timestamp("ms", tz="UTC")
    assert batch.schema.field("bornTimestamp").type == pa.timestamp("ms", tz="UTC")


def test_properties_tags_keys(rows, manifest):
    bad = []
    for r, m in zip(rows, manifest):
        props = dict(r["properties"])
        if (props != m["properties"] or r["tags"] != m["properties"].get("TAGS")
                or r["keys"] != keys_tokens(m["properties"].get("KEYS"))
                or r["uniqKey"] != m["properties"].get("UNIQ_KEY")):
            bad.append(m["commitLogOffset"])
    assert not bad, bad[:5]


def test_empty_property_values_are_dropped_like_java(rows, manifest):
    """kind normal-empty-prop stores ``emptyProp\\u0001\\u0002``: present in the raw string, absent from the map."""
    empties = [(r, m) for r, m in zip(rows, manifest) if m["kind"] == "normal-empty-prop"]
    assert len(empties) == 41
    for r, _ in empties:
        assert "emptyProp\u0001\u0002" in r["propertiesString"]
        assert "emptyProp" not in dict(r["properties"])


def test_records_without_uniq_key_or_keys(rows, manifest):
    no_uniq = [r for r, m in zip(rows, manifest) if m["uniqKey"] is None]
    assert no_uniq and all(r["uniqKey"] is None for r in no_uniq)
    no_keys = [r for r, m in zip(rows, manifest) if "KEYS" not in m["properties"]]
    assert no_keys and all(r["keys"] == [] for r in no_keys)


def test_bodies_stored_and_decompressed(rows, manifest):
    codecs = Counter()
    for r, m in zip(rows, manifest):
        assert len(r["rawBody"]) == m["bodyLength"], m["commitLogOffset"]
        assert sha256(r["rawBody"]) == m["bodySha256"], m["commitLogOffset"]
        if m.get("compressionType"):
            codecs[m["compressionType"]] += 1
            assert r["sysFlag"] & 0x1
            assert len(r["body"]) == m["bodyDecompressedLength"], m["commitLogOffset"]
            assert sha256(r["body"]) == m["bodyDecompressedSha256"], m["commitLogOffset"]
        else:
            assert r["body"] == r["rawBody"], m["commitLogOffset"]
    assert codecs == {"ZLIB": 94, "LZ4": 85, "ZSTD": 114}


def test_hosts_cover_ipv6_and_msg_ids_have_both_lengths(rows):
    v6_store = [r for r in rows if r["sysFlag"] & 0x20]
    v6_born = [r for r in rows if r["sysFlag"] & 0x10]
    assert len(v6_store) == 1051 and len(v6_born) == 2067
    assert all(r["storeHost"].startswith("[") and len(r["msgId"]) == 56 for r in v6_store)
    assert all(r["bornHost"].startswith("[") for r in v6_born)
    assert all(len(r["msgId"]) == 32 for r in rows if not r["sysFlag"] & 0x20)


def test_v2_records_with_long_topics(rows, manifest):
    v2 = [r for r, m in zip(rows, manifest) if m["msgVersion"] == "V2"]
    assert len(v2) == 349
    assert all(len(r["topic"]) > 127 and r["topic"].startswith("%RETRY%") for r in v2)


@pytest.mark.parametrize("columns", [["topic", "queueOffset"], ["body"], ["keys", "tags"], ["propertiesString"],
                                     ["msgId", "commitLogOffset", "rawBody"], ["storeTimestamp"]])
def test_column_selection_returns_exactly_those_columns(golden_store, manifest, columns):
    from rocketstore_spark.store import arrow_schema

    expected = arrow_schema(columns)
    scan = pa.Table.from_batches(list(golden_store.scan_raw(columns=columns)), schema=expected)
    assert scan.schema == expected and scan.num_rows == len(manifest)
    queue = list(golden_store.read_queue("TopicTest", 0, columns=columns))
    assert queue and all(b.schema == expected for b in queue)
    got = golden_store.get_message("TopicTest", 0, 0, columns=columns).messages
    assert got.schema == expected and got.num_rows > 0
    assert golden_store.query_by_key("TopicTest", "order-42", columns=columns).schema == expected
    assert golden_store.read_records_at([manifest[5]["commitLogOffset"]], columns).schema == expected
    assert sorted(golden_store.look_message_by_offset(manifest[5]["commitLogOffset"], columns)) == sorted(columns)


def test_column_selection_with_tag_filter_keeps_only_asked_columns(golden_store):
    """The exact tag re-check needs the tags column; it must not leak into the result."""
    for batch in golden_store.read_queue("TopicTest", 0, tags="TagA", columns=["queueOffset"]):
        assert batch.schema.names == ["queueOffset"]
    got = golden_store.get_message("TopicTest", 0, 0, tags="TagA", columns=["queueOffset"]).messages
    assert got.schema.names == ["queueOffset"] and got.num_rows > 0


def test_default_columns_are_the_documented_ones(golden_store):
    batch = next(golden_store.scan_raw())
    assert batch.schema.names == list(COLUMNS)
    keys_type = batch.schema.field("keys").type
    assert pa.types.is_list(keys_type) and keys_type.value_type == pa.string()
    assert batch.schema.field("properties").type == pa.map_(pa.string(), pa.string())
    assert batch.schema.field("body").type == pa.binary()
    assert "rawBody" not in batch.schema.names and "propertiesString" not in batch.schema.names


def test_scan_start_end_window(golden_store, manifest):
    lo, hi = manifest[100]["commitLogOffset"], manifest[2500]["commitLogOffset"]
    got = [o for b in golden_store.scan_raw(lo, hi, columns=["commitLogOffset"])
           for o in b.column(0).to_pylist()]
    assert got == [m["commitLogOffset"] for m in manifest[100:2500]]


def test_unknown_column_is_rejected_by_every_reader(golden_store):
    with pytest.raises(InvalidArgumentError, match="nope"):
        list(golden_store.scan_raw(columns=["topic", "nope"]))
    with pytest.raises(InvalidArgumentError, match="nope"):
        list(golden_store.read_queue("TopicTest", 0, columns=["nope"]))
    with pytest.raises(InvalidArgumentError, match="nope"):
        golden_store.get_message("TopicTest", 0, 0, columns=["nope"])


def test_parsing_only_the_header_fields_a_column_needs_builds_the_same_column(golden_store, manifest):
    """Queue reads parse just the fixed fields their columns use (codec.OPTIONAL_FIXED): for every column, that
    gives the batch a full parse gives, on records with IPv4 and IPv6 hosts, V1 and V2 magic, and compression."""
    import numpy as np

    from rocketstore_spark.store.format.codec import OPTIONAL_FIXED, parse_records
    from rocketstore_spark.store.format.columns import (
        FUSED_BYTES,
        FUSED_COLUMNS,
        FUSED_TEXT_BYTES,
        build_batch,
        decoded_columns_for,
        fixed_fields_for,
        parse_and_decode,
    )

    cl = golden_store.commitlog
    files, positions = cl.locate(np.array([m["commitLogOffset"] for m in manifest], dtype=np.int64))
    for index in np.unique(files):
        buf = cl.queue.buffer(int(index))
        pos = positions[files == index]
        full = parse_records(buf, pos)
        for column in ALL:
            fixed = fixed_fields_for([column])
            partial = parse_records(buf, pos, fixed)
            assert all((getattr(partial, k) is None) == (k in _skipped_attributes(fixed, OPTIONAL_FIXED))
                       for k in full.__dict__ if k != "decoded"), column
            expected = build_batch(buf, full, [column])
            assert build_batch(buf, partial, [column]).equals(expected), column
            # parsed and decoded in one pass, bounded by the records' sizes or by their span
            sizes = full.total_size
            for bound in (int(sizes.sum()), None):
                fused = parse_and_decode(buf, pos, [column], fixed, record_bytes=bound)
                decoded = decoded_columns_for([column])
                limit = FUSED_BYTES if decoded <= FUSED_COLUMNS else FUSED_TEXT_BYTES
                fusable = bool(decoded) and int(sizes.sum()) <= limit
                if not fusable or bound is not None:  # with no bound given, ascending positions give one
                    assert (fused.decoded is not None) == bool(fusable), column
                assert build_batch(buf, fused, [column]).equals(expected), column
        both = parse_records(buf, pos, OPTIONAL_FIXED)
        assert all(np.array_equal(getattr(both, k), v) for k, v in full.__dict__.items())


def _skipped_attributes(fixed, optional) -> set:
    """The RecordBatchFields attributes left None when only ``fixed`` (codec names) is parsed."""
    attribute = {"born_ts": "born_timestamp", "store_ts": "store_timestamp", "reconsume": "reconsume_times",
                 "prepared": "prepared_offset"}
    return {attribute.get(name, name) for name in optional if name not in fixed}
