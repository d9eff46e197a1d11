"""Writers refuse a store whose commit log misses files between others (a copy with holes): reads go around the
holes, appends would grow a store that looks whole to a broker."""

import pyarrow as pa
import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store import RocketStore
from tests.store.read.test_lost_ranges_middle import FILE_SIZE, drop_files, store_digest


def test_a_store_with_holes_is_not_appended_to(golden_copy):
    drop_files(golden_copy, (3, 20))
    before = store_digest(golden_copy)
    with pytest.raises(StoreFormatError, match=r"2 missing between others \(00000000000003145728, "
                                               r"00000000000020971520\).*not appended to"):
        with RocketStore.open_writer(golden_copy, commit_log_file_size=FILE_SIZE) as w:
            w.append(pa.table({"topic": ["TopicTest"], "body": [b"x"]}))
    after = store_digest(golden_copy)
    before.pop("lock"), after.pop("lock")  # the lock file is touched by taking the lock, nothing else
    assert after == before and not (golden_copy / "abort").exists()
