"""Reading a real 5.3.3 broker's tiered storage (``tests/store/files/data/tiered-broker-5.3.3``) against what the
broker served a consumer from it, and the rules of a history read with a local store."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rocketstore_spark.errors import CorruptRecordError, InvalidArgumentError
from rocketstore_spark.store import LOCAL, TIERED, QueueRanges, RocketStore
from rocketstore_spark.store.files.tiered_segments import COMMIT_LOG, queue_dirs

DATA = Path(__file__).parents[1] / "files" / "data" / "tiered-broker-5.3.3"
CLIENT_ONLY = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}


def received():
    return [json.loads(line) for line in (DATA / "received.jsonl").read_text().splitlines()]


def test_tiered_rows_are_what_the_broker_served():
    got = received()
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        assert history.topics() == ["history"] and history.queue_ids("history") == [0]
        assert history.ranges("history", 0) == QueueRanges("history", 0, (0, 0), (0, 65))
        rows = [r for b in history.read_queue("history", 0, batch_rows=16) for r in b.to_pylist()]
    assert len(rows) == len(got) == 65
    for row, sent in zip(rows, got):
        assert (row["topic"], row["queueId"], row["queueOffset"]) == (sent["topic"], 0, sent["queueOffset"])
        # the tiered offset, as the broker hands it to a client reading the tiered storage
        assert row["commitLogOffset"] == sent["commitLogOffset"]
        assert row["uniqKey"] == sent["msgId"] and row["tags"] == sent["tags"] and row["keys"] == sent["keys"]
        assert hashlib.sha256(row["body"]).hexdigest() == sent["bodySha256"]
        wanted = {k: v for k, v in sent["properties"].items() if k not in CLIENT_ONLY}
        assert dict(row["properties"]) == wanted
        # the offset msgId: store host and the tiered offset
        assert row["msgId"].endswith(f"{sent['commitLogOffset']:016X}")


def test_a_range_is_clamped_and_read_across_segments():
    with RocketStore.open_history(tiered_path=DATA / "segments") as history:
        rows = [r for b in history.read_queue("history", 0, 40, 90, columns=["queueOffset"]) for r in b.to_pylist()]
    assert [r["queueOffset"] for r in rows] == list(range(40, 65))


def test_damaged_record_names_segment_and_offset(tmp_path):
    copy = tmp_path / "segments"
    shutil.copytree(DATA / "segments", copy)
    (queue,) = queue_dirs(copy)
    second = max((queue.path / COMMIT_LOG).iterdir(), key=lambda p: int(p.name[-20:]))  # the second segment
    data = bytearray(second.read_bytes())
    data[4:8] = b"\0\0\0\0"  # the magic code of the segment's first record
    second.write_bytes(bytes(data))
    with RocketStore.open_history(tiered_path=copy) as history:
        with pytest.raises(CorruptRecordError, match="magic code") as e:
            list(history.read_queue("history", 0))
    assert e.value.path == str(second) and e.value.offset == 0


def test_pieces_prefer_the_local_store_and_fill_from_tiered():
    both = QueueRanges("t", 0, local=(73, 100), tiered=(0, 100))
    assert both.pieces(0, 100) == [(TIERED, 0, 73), (LOCAL, 73, 100)]
    assert both.pieces(80, 90) == [(LOCAL, 80, 90)]
    ahead = QueueRanges("t", 0, local=(0, 10), tiered=(5, 20))  # a local copy older than the tiered storage
    assert ahead.pieces(0, 20) == [(LOCAL, 0, 10), (TIERED, 10, 20)]
    gap = QueueRanges("t", 0, local=(50, 60), tiered=(0, 40))  # nothing holds 40..50
    assert gap.pieces(0, 60) == [(TIERED, 0, 40), (LOCAL, 50, 60)]
    assert (gap.first, gap.end) == (0, 60)
    assert QueueRanges("t", 0, (0, 0), (0, 0)).pieces(0, 0) == []


def test_history_needs_a_source():
    with pytest.raises(InvalidArgumentError, match="local store path, a tiered_path, or both"):
        RocketStore.open_history()
