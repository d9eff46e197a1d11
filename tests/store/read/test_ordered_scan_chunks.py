"""How the ordered scan cuts a stretch into chunks parsed and decoded at a time."""


def test_ordered_scan_chunks_bound_rows_and_bytes(monkeypatch):
    import numpy as np

    from rocketstore_spark.store.read import ordered_scan

    monkeypatch.setattr(ordered_scan, "PARSE_ROWS", 5)
    monkeypatch.setattr(ordered_scan, "PARSE_BYTES", 1000)
    positions = np.array([0, 100, 200, 300, 400, 500, 600, 700, 3000, 3100, 9000], dtype=np.int64)
    chunks = list(ordered_scan.parse_chunks(positions))
    assert chunks == [(0, 5), (5, 8), (8, 10), (10, 11)]
    assert list(ordered_scan.parse_chunks(np.zeros(0, dtype=np.int64))) == []
