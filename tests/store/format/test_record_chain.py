"""Record starts found by following TOTALSIZE among magic-code candidates (commit-log-ordered reads)."""

import struct

import numpy as np
import pytest

from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.record_chain import (
    CHAIN_BAD,
    CHAIN_BLANK,
    CHAIN_DATA,
    CHAIN_STOP,
    chain_record_starts,
    magic_candidates,
)

MAGIC = struct.pack(">i", L.MESSAGE_MAGIC_CODE)
MAGIC_V2 = struct.pack(">i", L.MESSAGE_MAGIC_CODE_V2)


def fake(payload: bytes, magic: bytes = MAGIC) -> bytes:
    """A record as far as the chain looks: TOTALSIZE, MAGICCODE, payload."""
    return struct.pack(">i", 8 + len(payload)) + magic + payload


def test_the_chain_skips_magic_bytes_inside_bodies():
    # bodies holding what looks like records: a lone one, and a chain of two that points at each other
    liar = fake(b"x" * 5)
    bodies = [b"plain", b"ab" + liar + b"cd", liar + liar, b"", b"zz" + MAGIC + b"\xff\xff\xff\xff" + b"q" * 9]
    records = [fake(b, MAGIC_V2 if i % 2 else MAGIC) for i, b in enumerate(bodies)]
    data = b"".join(records)
    buf = np.frombuffer(data + struct.pack(">ii", 64, L.BLANK_MAGIC_CODE) + b"\0" * 56, dtype=np.uint8)
    truth = np.cumsum([0] + [len(r) for r in records])
    assert len(magic_candidates(buf, 0, len(buf))) > len(records)  # the liars are candidates
    positions, end, kind = chain_record_starts(buf, 0, len(buf))
    assert positions.tolist() == truth[:-1].tolist() and (end, kind) == (len(data), CHAIN_BLANK)
    positions, end, kind = chain_record_starts(buf, int(truth[1]), int(truth[3]))
    assert positions.tolist() == truth[1:3].tolist() and (end, kind) == (int(truth[3]), CHAIN_STOP)
    zeros = np.frombuffer(data + b"\0" * 64, dtype=np.uint8)
    assert chain_record_starts(zeros, 0, len(zeros))[1:] == (len(data), CHAIN_DATA)
    bad = np.frombuffer(data + struct.pack(">i", -5) + MAGIC + b"\0" * 64, dtype=np.uint8)
    positions, end, kind = chain_record_starts(bad, 0, len(bad))
    assert (positions[-1], end, kind) == (len(data), len(data), CHAIN_BAD)


@pytest.mark.parametrize("index", [0, 7, -1])
def test_the_chain_equals_recovery_s_walk_on_the_golden_store(golden_store, index):
    log = golden_store.commitlog
    index = index % len(log.queue.files)
    walk = log.walk_file(index, check_crc=False)
    buf = log.queue.buffer(index)
    positions, end, kind = chain_record_starts(buf, 0, len(buf))
    assert positions.tolist() == walk.positions.tolist() and end == walk.end_position
    mid = int(walk.positions[len(walk) // 2])
    positions, end, kind = chain_record_starts(buf, mid, int(walk.positions[-3]))
    assert positions.tolist() == walk.positions[len(walk) // 2:-3].tolist() and kind == CHAIN_STOP


def test_scan_queue_records_rejects_a_stretch_that_stops_early(golden_copy):
    from rocketstore_spark.errors import CorruptRecordError

    with RocketStore.open(golden_copy) as store:
        first = store.commit_log_file_starts()[0]
        walk = store.commitlog.walk_file(0, check_crc=False)
        at = int(walk.positions[10])
    with open(sorted((golden_copy / L.COMMITLOG_DIR).iterdir())[0], "r+b") as fh:
        fh.seek(at + 4)
        fh.write(b"\0\0\0\0")  # a record's magic code gone: the chain ends there
    with RocketStore.open(golden_copy, valid_end=1 << 40) as store:
        with pytest.raises(CorruptRecordError, match="stops early"):
            list(store.scan_queue_records(first, first + 100_000, {"TopicTest": range(8)}))
