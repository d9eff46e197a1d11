"""A queue's end by binary search equals ``ConsumeQueue.recover``'s forward scan (first invalid unit), on sparse
and on fully written files, on a filesystem that reports holes wrongly, and across several files; it reads a
few pages, not the file."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.store.files import file_reads
from rocketstore_spark.store.files.consume_queue import ConsumeQueue
from rocketstore_spark.store.files.file_reads import counting
from rocketstore_spark.store.format import layout as L

PER_FILE = 20_000  # units per file (400 KB): big enough for the search to probe, small enough to write fast


def units(count: int, first_phy: int = 0) -> np.ndarray:
    out = np.zeros(count, dtype=L.CQ_UNIT_DTYPE)
    out["phy_offset"] = first_phy + np.arange(count) * 100
    out["size"] = 100
    return out


def write_queue(directory, counts, per_file=PER_FILE, sparse=True, torn_unit=False):
    """Files of ``counts[i]`` valid units each, then zeros (a hole when ``sparse``)."""
    directory.mkdir(parents=True)
    phy = 0
    for i, count in enumerate(counts):
        path = directory / f"{i * per_file * L.CQ_STORE_UNIT_SIZE:020d}"
        data = units(count, phy).tobytes()
        phy += count * 100
        if torn_unit:  # a unit whose offset is written but whose size is not: invalid, ends the queue
            torn = units(1, phy)
            torn["size"] = 0
            data += torn.tobytes()
        with open(path, "wb") as fh:
            fh.write(data if sparse else data + bytes(per_file * L.CQ_STORE_UNIT_SIZE - len(data)))
            fh.truncate(per_file * L.CQ_STORE_UNIT_SIZE)
    return directory


def linear_end(directory, per_file=PER_FILE):
    """The broker's forward scan, from the third-last file."""
    files = sorted(directory.iterdir())
    index = max(len(files) - 3, 0)
    while True:
        u = np.frombuffer(files[index].read_bytes(), dtype=L.CQ_UNIT_DTYPE)
        bad = np.flatnonzero((u["phy_offset"] < 0) | (u["size"] <= 0))
        count = int(bad[0]) if len(bad) else len(u)
        if count < len(u) or index + 1 >= len(files):
            return int(files[index].name) // L.CQ_STORE_UNIT_SIZE + count
        index += 1


COUNTS = [0, 1, 204, 205, 1023, 1024, 1025, 4096, 9999, PER_FILE - 1, PER_FILE]


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("count", COUNTS)
def test_the_end_of_one_file_is_the_first_invalid_unit(tmp_path, count, sparse):
    d = write_queue(tmp_path / "q", [count], sparse=sparse, torn_unit=count % 2 == 1)
    with counting() as cost:
        cq = ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE)
    assert cq.max_offset == linear_end(d) == count
    assert cost.files_opened == 1
    assert cost.bytes_read <= 24 * 1024  # a window of 1,024 units and a few probes, whatever the file's length


@pytest.mark.parametrize("count", [3, 700, 5000, PER_FILE - 1])
def test_a_filesystem_that_misreports_holes_costs_a_longer_search_not_a_wrong_end(tmp_path, monkeypatch, count):
    d = write_queue(tmp_path / "q", [count])
    monkeypatch.setattr(file_reads.OpenFile, "data_end", lambda self, length: 4096)
    assert ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE).max_offset == count
    monkeypatch.setattr(file_reads.OpenFile, "data_end", lambda self, length: length)
    assert ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE).max_offset == count


@pytest.mark.parametrize("counts", [[PER_FILE] * 5 + [17], [PER_FILE] * 4 + [0], [PER_FILE, 5], [PER_FILE] * 3])
def test_across_files_the_search_starts_at_the_third_last_file(tmp_path, counts):
    d = write_queue(tmp_path / "q", counts, sparse=False)
    with counting() as cost:
        cq = ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE)
    assert cq.max_offset == linear_end(d) == sum(counts)
    assert cost.files_opened <= 3


def test_a_default_size_file_with_150000_units_costs_a_few_pages(tmp_path):
    d = write_queue(tmp_path / "q", [150_000], per_file=300_000, sparse=False)
    with counting() as cost:
        cq = ConsumeQueue("T", 0, d, L.DEFAULT_CONSUME_QUEUE_FILE_SIZE)
    assert cq.max_offset == 150_000
    assert cost.pages_read <= 16 and cost.bytes_read <= 24 * 1024  # of 6 MB
    assert cq.last_unit_end() == 150_000 * 100
    # units point forward through the commit log: the first at or past an offset is a search too
    with counting() as cost:
        assert cq.first_at_or_past(1234 * 100 + 1) == 1235
        assert list(cq.phy_offsets_between(100_000 * 100, 100_003 * 100)) == [10_000_000, 10_000_100, 10_000_200]
    assert cost.bytes_read <= 3 * 24 * 1024


def test_truncation_cuts_at_the_first_unit_past_the_valid_end(tmp_path):
    d = write_queue(tmp_path / "q", [PER_FILE, 300])
    cq = ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE)
    cq.truncate_at_phy((PER_FILE + 250) * 100)
    assert cq.max_offset == cq.disk_max_offset == PER_FILE + 250
    cq = ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE)
    cq.truncate_at_phy(10 * 100)  # even the last file's first unit is past it: back into the first file
    assert cq.max_offset == 10


def test_no_descriptor_outlives_a_read(tmp_path):
    d = write_queue(tmp_path / "q", [PER_FILE, 40])
    before = len(os.listdir("/proc/self/fd"))
    cq = ConsumeQueue("T", 0, d, PER_FILE * L.CQ_STORE_UNIT_SIZE)
    assert len(cq.units(PER_FILE - 5, PER_FILE + 5)) == 10
    assert len(os.listdir("/proc/self/fd")) == before


# --- first unit at or past a commit-log offset --------------------------------------------------------------

def _counting_reader(phys: np.ndarray):
    calls = []

    def read(a, b):
        calls.append((a, b))
        out = np.zeros(max(0, min(b, len(phys)) - a), dtype=L.CQ_UNIT_DTYPE)
        out["phy_offset"] = phys[a:a + len(out)]
        return out

    return read, calls


@given(n=st.integers(1, 120_000), seed=st.integers(0, 2**32 - 1), bursty=st.booleans(),
       fillers=st.integers(0, 3000), data=st.data())
@settings(max_examples=150, deadline=None)
def test_the_first_unit_at_or_past_an_offset_is_searchsorted(n, seed, bursty, fillers, data):
    """Interpolation with bisection fallback finds exactly what a full scan finds, for any non-decreasing units
    (steady, bursts and long pauses, filler units at 0 first), in a bounded number of reads."""
    from rocketstore_spark.store.files.unit_search import WINDOW_UNITS, first_at_or_past

    rng = np.random.default_rng(seed)
    gaps = rng.integers(0, 2000, n)
    if bursty:  # most units close together, a few pauses as long as everything else
        gaps = np.where(rng.random(n) < 0.001, rng.integers(0, 10**9, n), gaps // 50)
    phys = np.cumsum(gaps).astype(np.int64)
    phys[:min(fillers, n)] = 0
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    target = data.draw(st.integers(-1, int(phys[-1]) + 2) | st.sampled_from(phys.tolist()[:: max(1, n // 50)]))
    read, calls = _counting_reader(phys)
    expected = lo + int(np.searchsorted(phys[lo:hi], target, side="left"))
    assert first_at_or_past(read, lo, hi, target) == expected
    # at worst a bisection's probes, each after a failed guess, plus the ends and the last window
    assert len(calls) <= 3 + 2 * max(1, int(np.log2(max(hi - lo, 1) / WINDOW_UNITS)) + 1)


def test_a_steady_queue_is_searched_in_a_few_reads():
    """Units at a steady pace (the common case): the first guess's window holds the answer."""
    from rocketstore_spark.store.files.unit_search import first_at_or_past

    phys = np.arange(300_000, dtype=np.int64) * 1000 + np.random.default_rng(1).integers(0, 900, 300_000)
    phys.sort()
    for target in (12_345_678, 150_000_000, 299_000_000):
        read, calls = _counting_reader(phys)
        assert first_at_or_past(read, 0, len(phys), target) == int(np.searchsorted(phys, target))
        assert len(calls) <= 4
