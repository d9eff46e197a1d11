"""Prefaulting a staged commit-log file's records before the publisher patches them."""

import ctypes
import mmap
import os

import numpy as np

from rocketstore_spark.store.write import staged_commitlog as sc

PAGE = mmap.PAGESIZE


def _data_ranges(path):
    """The (start, end) ranges of ``path`` that hold blocks (``SEEK_DATA``/``SEEK_HOLE``)."""
    out, at = [], 0
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        while at < size:
            try:
                start = os.lseek(fh.fileno(), at, os.SEEK_DATA)
            except OSError:  # ENXIO: no data after ``at``
                break
            end = os.lseek(fh.fileno(), start, os.SEEK_HOLE)
            out.append((start, end))
            at = end
    return out


def test_prefault_maps_only_the_records_range_and_keeps_the_bytes(tmp_path):
    path = tmp_path / "00000000000000000000"
    size = 64 * PAGE
    records = bytes(range(256)) * 40  # 10,240 bytes from an unaligned offset
    lo = 5 * PAGE + 123
    with open(path, "wb") as fh:
        fh.truncate(size)
        fh.seek(lo)
        fh.write(records)
        os.fsync(fh.fileno())
    assert _data_ranges(path) == [(5 * PAGE, 8 * PAGE)]
    with open(path, "r+b") as fh:
        mm = mmap.mmap(fh.fileno(), size)
    view = np.frombuffer(mm, dtype=np.uint8)
    sc._prefault(view, lo, lo + len(records) + 8)
    assert view[lo:lo + len(records)].tobytes() == records
    view[lo + len(records):lo + len(records) + 8] = 7  # what the patch writes: the last record's store time
    del view
    mm.flush()
    mm.close()
    with open(path, "r+b") as fh:
        os.fsync(fh.fileno())
    # pages before and after the records' range stay holes (a staged file is sparse, full size)
    assert _data_ranges(path) == [(5 * PAGE, 8 * PAGE)]


def test_prefault_in_steps_and_past_the_map_end(tmp_path, monkeypatch):
    monkeypatch.setattr(sc, "PREFAULT_STEP_BYTES", 2 * PAGE)
    path = tmp_path / "00000000000000000000"
    size = 16 * PAGE
    with open(path, "wb") as fh:
        fh.write(b"\x01" * size)
    with open(path, "r+b") as fh:
        mm = mmap.mmap(fh.fileno(), size)
    view = np.frombuffer(mm, dtype=np.uint8)
    sc._prefault(view, 3 * PAGE + 5, size + 100)  # clipped to the map
    assert int(view.sum()) == size
    del view
    mm.close()


def test_prefault_calls_madvise_without_the_gil():
    """``mmap.madvise`` holds the GIL for the whole call (the commit's index thread would stand still while the
    staged files are prefaulted); a ctypes function of a ``CDLL`` releases it during the call, one flagged for the
    Python API would not."""
    fn = sc._MADVISE
    assert isinstance(fn, ctypes._CFuncPtr)
    assert not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI
    assert fn.restype is ctypes.c_int
