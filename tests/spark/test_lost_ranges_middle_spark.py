"""Spark reads of a copy of the golden store with a commit-log file missing in the middle: by default the read
fails with DataLossError naming the queue, offsets, count and missing file; with failOnDataLoss=false it returns
the manifest's rows outside that file and the plan warns once; both plans (queue, commitlog) return the same
rows; a stream reads around the lost units and reports them once."""

import json
from collections import Counter

import pytest
from chispa import assert_df_equality

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.spark.options import ReadOptions, parse_read_options
from rocketstore_spark.spark.planning import Pushed, plan
from tests.spark.test_lost_ranges_spark import planned_rows, stream_plan, user_queues
from tests.store.read.test_lost_ranges_middle import drop_files, in_gaps

COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset"]


def expected(manifest, gaps):
    """(rows kept, lost per queue) of the user topics a read selects by default."""
    wanted = ReadOptions(stores=()).wants_topic
    kept = {(m["topic"], m["queueId"], m["cqOffset"], m["commitLogOffset"]) for m in manifest
            if m["inConsumeQueue"] and wanted(m["topic"]) and not in_gaps(m["commitLogOffset"], gaps)}
    lost = Counter((m["topic"], m["queueId"]) for m in manifest
                   if m["inConsumeQueue"] and wanted(m["topic"]) and in_gaps(m["commitLogOffset"], gaps))
    return kept, lost


@pytest.mark.parametrize("scan_mode", ["queue", "commitlog"])
def test_a_missing_middle_file_fails_by_default(spark, golden_copy, manifest, scan_mode):
    gaps = drop_files(golden_copy, (3, 20))
    _, lost = expected(manifest, gaps)
    with pytest.raises(Exception) as info:
        spark.read.format("rocketstore").option("scanMode", scan_mode).load(str(golden_copy)).count()
    text = str(info.value)
    assert "DataLossError" in text and f"{sum(lost.values())} messages of {len(lost)} queues are lost" in text
    assert f"{gaps[0][0]:020d} (missing)" in text and "offsets" in text


def test_a_missing_middle_file_reads_the_rest_on_request_in_both_plans(spark, golden_copy, manifest):
    gaps = drop_files(golden_copy, (3, 20))
    kept, _ = expected(manifest, gaps)

    def read(scan_mode):
        return (spark.read.format("rocketstore").option("scanMode", scan_mode).option("failOnDataLoss", "false")
                .load(str(golden_copy)).select(*COLUMNS))

    by_queue, by_log = read("queue"), read("commitlog")
    assert {tuple(r) for r in by_queue.collect()} == kept
    assert_df_equality(by_queue, by_log, ignore_row_order=True)


def test_the_plan_warns_once_and_bounds_around_the_loss_need_no_flag(golden_copy, manifest, caplog):
    gaps = drop_files(golden_copy, (10,))
    kept, lost = expected(manifest, gaps)
    caplog.set_level("WARNING", logger="rocketstore_spark")
    for scan_mode in ("queue", "commitlog"):
        caplog.clear()
        opts = parse_read_options({"path": str(golden_copy), "failOnDataLoss": "false", "scanMode": scan_mode})
        assert plan(opts, Pushed())
        warnings = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
        assert len(warnings) == 1 and f"{sum(lost.values())} messages of {len(lost)} queues are lost" in warnings[0]
    # endingOffsets at the lost units, or startingOffsets past them, read without the flag
    lost_at = {}
    for m in manifest:
        if m["inConsumeQueue"] and (m["topic"], m["queueId"]) in lost and in_gaps(m["commitLogOffset"], gaps):
            lo, hi = lost_at.get((m["topic"], m["queueId"]), (m["cqOffset"], m["cqOffset"] + 1))
            lost_at[(m["topic"], m["queueId"])] = (min(lo, m["cqOffset"]), max(hi, m["cqOffset"] + 1))
    topics = sorted({t for t, _ in lost})
    for option, bound in (("endingOffsets", 0), ("startingOffsets", 1)):
        offsets = {t: {str(q): lost_at[(t, q)][bound] for tt, q in lost_at if tt == t} for t in topics}
        opts = parse_read_options({"path": str(golden_copy), option: json.dumps(offsets), "topics": ",".join(topics),
                                   "scanMode": "queue"})
        rows = planned_rows(plan(opts, Pushed()))
        want = Counter((t, q) for t, q, o, _ in kept if t in topics and
                       ((t, q) not in lost_at or (o < lost_at[(t, q)][0] if bound == 0 else o >= lost_at[(t, q)][1])))
        assert user_queues(rows) == user_queues(want)


def test_a_stream_reads_around_a_missing_file_and_reports_it_once(golden_copy, manifest, caplog):
    gaps = drop_files(golden_copy, (10,))
    kept, lost = expected(manifest, gaps)
    reader, start, end = stream_plan(golden_copy)
    with pytest.raises(DataLossError) as info:
        reader.partitions(start, end)
    assert f"{sum(lost.values())} messages of {len(lost)} queues are lost" in str(info.value)
    assert f"{gaps[0][0]:020d} (missing)" in str(info.value)

    reader, start, end = stream_plan(golden_copy, failOnDataLoss="false")
    caplog.set_level("WARNING", logger="rocketstore_spark")
    parts = reader.partitions(start, end)
    assert user_queues(planned_rows(parts)) == user_queues(Counter((t, q) for t, q, _, _ in kept))
    warnings = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert len(warnings) == 1
    # the planned ranges hold no lost unit
    lost_units = {(m["topic"], m["queueId"], m["cqOffset"]) for m in manifest
                  if m["inConsumeQueue"] and in_gaps(m["commitLogOffset"], gaps)}
    assert not [(t, q, o) for p in parts for t, q, lo, hi in getattr(p, "ranges", None)
                or [(p.topic, p.queue_id, p.start, p.end)] for o in range(lo, hi) if (t, q, o) in lost_units]


def test_a_live_store_missing_a_middle_file_still_reports_it(golden_copy, manifest, caplog):
    """Units past the records of a store whose lock is held may be records being written, but units pointing into
    a missing middle file are lost whoever writes the store: the stream reads around them and reports them."""
    import subprocess
    import sys
    import textwrap

    gaps = drop_files(golden_copy, (10,))
    kept, lost = expected(manifest, gaps)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(golden_copy / "lock")!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        reader, start, end = stream_plan(golden_copy)
        with pytest.raises(DataLossError, match=f"{sum(lost.values())} messages of {len(lost)} queues are lost"):
            reader.partitions(start, end)
        reader, start, end = stream_plan(golden_copy, failOnDataLoss="false")
        caplog.set_level("WARNING", logger="rocketstore_spark")
        parts = reader.partitions(start, end)
        assert user_queues(planned_rows(parts)) == user_queues(Counter((t, q) for t, q, _, _ in kept))
        assert len([r for r in caplog.records if "are lost" in r.getMessage()]) == 1
    finally:
        holder.stdin.close()
        holder.wait(30)
