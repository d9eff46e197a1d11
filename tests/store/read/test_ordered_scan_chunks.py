"""How the ordered scan cuts a stretch into chunks parsed and decoded at a time."""

import pyarrow as pa


def test_ordered_scan_chunks_bound_rows_and_bytes(monkeypatch):
    import numpy as np

    from rocketstore_spark.store.read import ordered_scan

    monkeypatch.setattr(ordered_scan, "PARSE_ROWS", 5)
    monkeypatch.setattr(ordered_scan, "PARSE_BYTES", 1000)
    positions = np.array([0, 100, 200, 300, 400, 500, 600, 700, 3000, 3100, 9000], dtype=np.int64)
    chunks = list(ordered_scan.parse_chunks(positions))
    assert chunks == [(0, 5), (5, 8), (8, 10), (10, 11)]
    assert list(ordered_scan.parse_chunks(np.zeros(0, dtype=np.int64))) == []


def test_a_scan_that_drops_records_decodes_each_kept_record_once(tmp_path, monkeypatch):
    """Once a chunk dropped records (here: another topic's), the chunks after it, in later steps of the stretch
    too, are parsed alone and only their kept records decoded: no chunk is decoded in its parsing pass and then
    again for its kept rows. The rows are those of a scan in one piece."""
    from rocketstore_spark.store import RocketStore
    from rocketstore_spark.store.format import columns as format_columns
    from rocketstore_spark.store.read import ordered_scan

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

        decoded = {"fused": 0, "kept": 0}
        fused, kept = ordered_scan.parse_and_decode, format_columns.decode_columns

        def count_fused(buf, positions, *args, **kwargs):
            decoded["fused"] += len(positions)
            return fused(buf, positions, *args, **kwargs)

        def count_kept(buf, fields, *args, **kwargs):
            decoded["kept"] += len(fields)
            return kept(buf, fields, *args, **kwargs)

        monkeypatch.setattr(ordered_scan, "parse_and_decode", count_fused)
        monkeypatch.setattr(format_columns, "decode_columns", count_kept)
        step = 16 * 1024
        monkeypatch.setattr(ordered_scan, "PARSE_BYTES", step)
        monkeypatch.setattr(ordered_scan, "CHAIN_STEP", step)  # many steps of the stretch, a chunk each
        stepped = pa.Table.from_batches(list(store.scan_queue_records(first, end, selected, columns=columns)))

    assert whole.num_rows == n - n // 10 and stepped.equals(whole)
    steps = -(-(end - first) // step)
    assert steps > 20
    # the first chunk is decoded in its parsing pass (nothing told yet that chunks drop records) and its kept rows
    # again; every later chunk is parsed alone and its kept rows decoded once
    first_chunk = decoded["fused"]
    assert 0 < first_chunk < 3 * n / steps
    assert decoded["kept"] <= whole.num_rows + first_chunk
