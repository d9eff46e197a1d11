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
    from rocketstore_spark.store.format.columns import COLUMNS, RAW_COLUMNS, ValueNumbering, build_batch
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
    try:  # every parsed row's topic, valid or not, numbered by two names (one taken from the input)
        numbers = ValueNumbering([b"a", bytes(raw[:3])]).numbers(buf, fields.topic_pos, fields.topic_len)
        assert ((numbers >= ValueNumbering.NOT_UTF8) & (numbers < 2)).all()
    except RocketStoreError:
        pass  # a topic outside the buffer
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
