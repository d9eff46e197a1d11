"""A scan whose text grows from batch to batch: the rooms learnt from small properties are outgrown, the batch is
decoded exactly, and every row is what a decode with rooms of the records' bytes gives."""

import pyarrow as pa

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format import columns as C

SIZES = dict(commit_log_file_size=1 << 20, consume_queue_file_size=1000 * 20, index_hash_slots=64,
             index_max_entries=4096)


def test_batches_whose_text_outgrows_the_learnt_rooms_decode_the_same(tmp_path, monkeypatch):
    root = tmp_path / "store"
    small = pa.table({"topic": ["T"] * 200, "queueId": [0] * 200, "body": [b"x" * 50] * 200,
                      "keys": [["k%d" % i] for i in range(200)]})
    large = pa.table({"topic": ["a-much-longer-topic-name-" * 4] * 200, "queueId": [0] * 200,
                      "body": [b""] * 200, "keys": [["key-%d-" % i + "w" * 300, "\u00e9" * 40] for i in range(200)]})
    with RocketStore.open_writer(root, **SIZES) as w:
        w.append(small)
        w.append(large)
    forgot = []
    monkeypatch.setattr(C.TEXT_ROOMS, "forget", lambda: forgot.append(True) or C.TextRooms.forget(C.TEXT_ROOMS))
    with RocketStore.open(root) as s:
        C.TEXT_ROOMS.forget()
        learnt = pa.Table.from_batches(list(s.scan_raw(batch_rows=100)))  # two small batches, then two large
        assert forgot, "the large batches fitted the rooms of the small ones: the test no longer tests a fallback"
        exact, batches = [], s.scan_raw(batch_rows=100)
        while True:
            C.TEXT_ROOMS.forget()  # rooms of the records' bytes for every batch
            batch = next(batches, None)
            if batch is None:
                break
            exact.append(batch)
        assert learnt.equals(pa.Table.from_batches(exact))
        assert learnt.num_rows == 400
        assert learnt.column("keys")[399].as_py() == ["key-199-" + "w" * 300, "\u00e9" * 40]
        assert learnt.column("topic")[399].as_py() == "a-much-longer-topic-name-" * 4
