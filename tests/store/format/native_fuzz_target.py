"""A coverage-guided fuzz target (atheris, libFuzzer) for the native decode entry points: arbitrary bytes through
the record checks with every CRC mode, the record walk, the one-pass column decode, topic numbering and the
consume-queue unit scans. Anything but a RocketStoreError escaping, a crash of the process or a hang is a finding.

    python tests/store/format/native_fuzz_target.py -max_total_time=60 [-timeout=10] [corpus dir]

Coverage guides the mutations through the Python layers (atheris instruments ``rocketstore_spark``); the Rust
kernels themselves are not instrumented, so seeds of real records (the test writes them) keep inputs near the
record layout.

``tests/store/format/test_native_fuzz.py`` runs it for a bounded time (ROCKETSTORE_FUZZ_SECONDS to lengthen).
"""

import sys

import atheris
import numpy as np

with atheris.instrument_imports(include=["rocketstore_spark"]):
    from rocketstore_spark.errors import RocketStoreError
    from rocketstore_spark.store.files.unit_search import valid_units
    from rocketstore_spark.store.format import layout as L
    from rocketstore_spark.store.format.codec import parse_records
    from rocketstore_spark.store.format.columns import COLUMNS, RAW_COLUMNS, build_batch, parse_and_decode_kept
    from rocketstore_spark.store.format.queue_test import QueueTest
    from rocketstore_spark.store.format.record_chain import chain_record_starts, magic_candidates
    from rocketstore_spark.store.format.subscription import Subscription

#: The input's first bytes steer the run, the rest is the buffer (a seed: 4 zero bytes and a commit log's start).
CONTROL_BYTES = 4


def one_input(data: bytes) -> None:
    control, raw = data[:CONTROL_BYTES].ljust(CONTROL_BYTES, b"\0"), data[CONTROL_BYTES:]
    buf = np.frombuffer(raw, dtype=np.uint8)
    mode = control[0] & 7  # every combination of CHECK_BODY_CRC, CHECK_PROP_CRC and REQUIRE_PROP_CRC
    start, stop = control[1] - 8, len(buf) - control[2]
    # the records the walk finds from the first byte, and two positions anywhere (inside records, past the end)
    chain, _, _ = chain_record_starts(buf, 0, len(buf))
    assert ((chain >= 0) & (chain < len(buf))).all()
    positions = np.concatenate([chain, np.array([control[3] * 16 - 8, len(buf) - control[3]], dtype=np.int64)])
    fields = parse_records(buf, positions, crc_mode=mode)
    valid = np.flatnonzero(fields.valid)
    # every parsed row, valid or not, tested against two topics' queues (one named by the input)
    test = QueueTest({"a": range(4), bytes(raw[:3]).decode("utf-8", "replace"): [0, control[3]]},
                     [("a", 1, control[1], control[2])])
    try:
        assert len(test.keeps(buf, fields)) == len(positions)
    except RocketStoreError:
        pass  # a topic outside the buffer
    chained, kept = parse_and_decode_kept(buf, chain, COLUMNS, None, test)
    assert len(chained) == len(chain) and ((kept >= 0) & (kept < len(chain))).all()
    assert chained.valid[kept].all()
    if chained.decoded is not None:
        assert all(len(column) == len(kept) for column in chained.decoded.values())
    try:
        batch = build_batch(buf, fields.take(valid), COLUMNS + RAW_COLUMNS, "fuzz")
        assert batch.num_rows == len(valid)
    except RocketStoreError:
        pass  # a compressed body that does not decompress
    walked, _, _ = chain_record_starts(buf, start, stop)
    assert ((walked >= 0) & (walked < len(buf))).all()
    assert len(magic_candidates(buf, start, stop)) <= len(buf)
    units = buf[:len(buf) // L.CQ_STORE_UNIT_SIZE * L.CQ_STORE_UNIT_SIZE].view(L.CQ_UNIT_DTYPE)
    assert len(valid_units(units)) == len(units)
    assert len(Subscription.parse("a || b").matches_units(units)) == len(units)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
