"""Commit-log files deleted by the broker's expiry, before its cleaner removed the consume-queue files that
point into them (the broker deletes those a cleaning cycle later; a copy taken in between holds both)."""

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.store import RocketStore

SIZES = dict(commit_log_file_size=64 * 1024, consume_queue_file_size=100 * 20, index_hash_slots=64,
             index_max_entries=4096)
COUNT = 2000


@pytest.fixture
def expired_store(tmp_path):
    root = tmp_path / "store"
    table = pa.table({"topic": ["T"] * COUNT, "queueId": [i % 4 for i in range(COUNT)],
                      "body": [b"m-%d" % i * 20 for i in range(COUNT)]})
    with RocketStore.open_writer(root, **SIZES) as w:
        w.append(table)
    for old in sorted((root / "commitlog").iterdir())[:3]:
        old.unlink()
    return root


def test_min_offset_skips_consume_queue_files_that_point_only_at_expired_records(expired_store):
    with RocketStore.open(expired_store) as s:
        oldest = s.min_phy_offset()
        assert oldest == 3 * SIZES["commit_log_file_size"]
        for qid in s.queue_ids("T"):
            phy = s.consume_queue("T", qid).units(0, s.max_offset("T", qid))["phy_offset"].astype(np.int64)
            first_live = int(np.flatnonzero(phy >= oldest)[0])
            assert first_live > 100  # the whole first consume-queue file (100 units) and part of the next
            assert s.min_offset("T", qid) == first_live
            rows = [r for b in s.read_queue("T", qid, start=s.min_offset("T", qid), columns=["queueOffset"])
                    for r in b.column(0).to_pylist()]
            assert rows == list(range(first_live, s.max_offset("T", qid)))  # no data-loss error from earliest


def test_expired_units_past_the_min_offset_raise_or_are_skipped_with_a_warning(expired_store, caplog):
    with RocketStore.open(expired_store) as s:
        lo = s.min_offset("T", 0)
        with pytest.raises(DataLossError, match="expired|gone|before the oldest"):
            list(s.read_queue("T", 0, start=lo - 5))
        rows = [r for b in s.read_queue("T", 0, start=lo - 5, fail_on_data_loss=False, columns=["queueOffset"])
                for r in b.column(0).to_pylist()]
        assert rows[0] == lo
    assert f"skipping 5 messages between offsets {lo - 5} and {lo - 1}" in caplog.text
