"""How the ordered scan cuts a stretch into chunks parsed and decoded at a time."""

import pyarrow as pa

from rocketstore_spark.store.read import ordered_scan


def test_ordered_scan_chunks_bound_rows_and_bytes(monkeypatch):
    import numpy as np

    monkeypatch.setattr(ordered_scan, "PARSE_ROWS", 5)
    monkeypatch.setattr(ordered_scan, "PARSE_BYTES", 1000)
    positions = np.array([0, 100, 200, 300, 400, 500, 600, 700, 3000, 3100, 9000], dtype=np.int64)
    chunks = list(ordered_scan.parse_chunks(positions))
    assert chunks == [(0, 5), (5, 8), (8, 10), (10, 11)]
    assert list(ordered_scan.parse_chunks(np.zeros(0, dtype=np.int64))) == []


def test_a_scan_that_drops_records_decodes_only_kept_records_in_one_pass(tmp_path, monkeypatch):
    """Each chunk of a stretch is parsed, tested and its kept records decoded in one native pass, in every step
    of the stretch: the dropped records (here: another topic's) are never decoded and no kept record is decoded a
    second time. The rows are those of a scan in one piece."""
    from rocketstore_spark import _native
    from rocketstore_spark.store import RocketStore
    from rocketstore_spark.store.format import columns as format_columns

    n = 6000
    table = pa.table({"topic": ["Kept" if i % 10 else "Other" for i in range(n)], "queueId": [i % 4 for i in range(n)],
                      "body": [b"m-%d" % i * 40 for i in range(n)]})
    with RocketStore.open_writer(tmp_path / "s") as w:
        w.append(table)
    columns = ["topic", "queueId", "queueOffset", "body", "properties"]
    with RocketStore.open(tmp_path / "s") as store:
        first, end = store.commit_log_file_starts()[0], store.max_phy_offset()
        selected = {"Kept": range(4)}
        whole = pa.Table.from_batches(list(store.scan_queue_records(first, end, selected, columns=columns)))

        calls = {"tested": 0, "kept": 0, "again": 0}
        fused, again = _native.decode_records, format_columns.decode_columns

        def count_fused(buf, positions, columns, problems, crc_mode, outputs, test=None, kept=None):
            report = fused(buf, positions, columns, problems, crc_mode, outputs, test, kept)
            if test is not None:
                calls["tested"] += len(positions)
                calls["kept"] += report[1]
            return report

        def count_again(buf, fields, *args, **kwargs):
            calls["again"] += len(fields)
            return again(buf, fields, *args, **kwargs)

        monkeypatch.setattr(_native, "decode_records", count_fused)
        monkeypatch.setattr(format_columns, "decode_columns", count_again)
        step = 16 * 1024
        monkeypatch.setattr(ordered_scan, "PARSE_BYTES", step)
        monkeypatch.setattr(ordered_scan, "CHAIN_STEP", step)  # many steps of the stretch, a chunk each
        stepped = pa.Table.from_batches(list(store.scan_queue_records(first, end, selected, columns=columns)))

    assert whole.num_rows == n - n // 10 and stepped.equals(whole)
    assert -(-(end - first) // step) > 20
    assert calls == {"tested": n, "kept": whole.num_rows, "again": 0}
