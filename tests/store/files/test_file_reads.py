"""Ranged reads of local files: records copied out of one file, short spans of many files; what they return,
what they count and how a short or missing file is reported."""

import numpy as np
import pytest

from rocketstore_spark.errors import CorruptRecordError
from rocketstore_spark.store.files.file_reads import counting, read_ranges, read_spans


def test_ranges_of_one_file_are_copied_back_to_back_with_one_read_per_run(tmp_path):
    path = tmp_path / "log"
    data = np.arange(20_000, dtype=np.uint32).view(np.uint8)
    path.write_bytes(data.tobytes())
    starts = np.array([0, 10, 4096, 8190, 70_000], dtype=np.int64)
    lengths = np.array([10, 6, 100, 4, 1], dtype=np.int64)
    with counting() as cost:
        out = read_ranges(path, starts, lengths)
    assert out.tobytes() == b"".join(data[s:s + n].tobytes() for s, n in zip(starts, lengths))
    # [0, 10) and [10, 16) are adjacent: one run; 8190 + 4 crosses a page
    assert (cost.reads, cost.bytes_read, cost.files_opened, cost.pages_read) == (4, 121, 1, 5)


def test_a_range_past_the_end_of_its_file_names_the_file_and_where_it_ends(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(bytes(1000))
    with pytest.raises(CorruptRecordError) as info:
        read_ranges(path, [0, 990], [10, 20])
    assert str(info.value.path) == str(path) and info.value.offset == 1000
    assert "expected 20 bytes of records at byte 990, the file ends after 10" in str(info.value)


def test_spans_of_many_files_tell_which_were_read_whole(tmp_path):
    unit = np.dtype([("a", ">i8"), ("b", ">i4")])
    items = np.zeros(50, dtype=unit)
    items["a"] = np.arange(50)
    for name in ("x", "y"):
        (tmp_path / name).write_bytes(items.tobytes())
    spans = [(str(tmp_path / "x"), 12 * 3, 2), (str(tmp_path / "gone"), 0, 4), (tmp_path / "y", 12 * 48, 5),
             (str(tmp_path / "y"), 0, 1)]
    with counting() as cost:
        out, complete = read_spans(spans, unit)
    assert complete.tolist() == [True, False, False, True]
    assert len(out) == 12
    assert out["a"][:2].tolist() == [3, 4] and out["a"][6:8].tolist() == [48, 49] and out["a"][11] == 0
    # the missing file is not opened, the short one is read as far as it goes
    assert (cost.files_opened, cost.reads, cost.bytes_read) == (3, 3, 24 + 24 + 12)
    empty, none = read_spans([], unit)
    assert len(empty) == 0 and len(none) == 0
