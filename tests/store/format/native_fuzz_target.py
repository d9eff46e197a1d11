"""A coverage-guided fuzz target (atheris, libFuzzer) for the native decode entry points: arbitrary bytes through
the record checks with every CRC mode, the record walk, the one-pass column decode, and the consume-queue unit
scans. Anything but a RocketStoreError escaping, a crash of the process or a hang is a finding.

    python tests/store/format/native_fuzz_target.py -max_total_time=60 [-timeout=10] [corpus dir]

``tests/store/format/test_native_fuzz.py`` runs it for a bounded time (ROCKETSTORE_FUZZ_SECONDS to lengthen).
"""

import sys

import atheris

with atheris.instrument_imports():
    import numpy as np

    from rocketstore_spark.errors import RocketStoreError
    from rocketstore_spark.store.files.unit_search import valid_units
    from rocketstore_spark.store.format import layout as L
    from rocketstore_spark.store.format.codec import parse_records
    from rocketstore_spark.store.format.columns import COLUMNS, RAW_COLUMNS, build_batch
    from rocketstore_spark.store.format.record_chain import chain_record_starts, magic_candidates
    from rocketstore_spark.store.format.subscription import Subscription

_CRC_MODES = 8  # every combination of CHECK_BODY_CRC, CHECK_PROP_CRC and REQUIRE_PROP_CRC


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, _CRC_MODES - 1)
    count = fdp.ConsumeIntInRange(0, 16)
    raw = [fdp.ConsumeIntInRange(-8, 4200) for _ in range(count)]
    start, stop = fdp.ConsumeIntInRange(-8, 4200), fdp.ConsumeIntInRange(-8, 4200)
    buf = np.frombuffer(fdp.ConsumeBytes(fdp.remaining_bytes()), dtype=np.uint8)
    positions = np.array(raw, dtype=np.int64)
    fields = parse_records(buf, positions, crc_mode=mode)
    valid = np.flatnonzero(fields.valid)
    try:
        batch = build_batch(buf, fields.take(valid), COLUMNS + RAW_COLUMNS, "fuzz")
        assert batch.num_rows == len(valid)
    except RocketStoreError:
        pass  # a compressed body that does not decompress
    chain, _, _ = chain_record_starts(buf, start, stop)
    assert ((chain >= 0) & (chain < len(buf))).all()
    assert len(magic_candidates(buf, start, stop)) <= len(buf)
    units = buf[:len(buf) // L.CQ_STORE_UNIT_SIZE * L.CQ_STORE_UNIT_SIZE].view(L.CQ_UNIT_DTYPE)
    assert len(valid_units(units)) == len(units)
    assert len(Subscription.parse("a || b").matches_units(units)) == len(units)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
