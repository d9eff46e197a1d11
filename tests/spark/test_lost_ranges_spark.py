"""Spark reads of a cut copy of the golden store: lost messages fail the read by default (DataLossError naming the
queue, offsets, count and file) in every plan and in a stream, and with failOnDataLoss=false the read returns what
is left (a stream warns once); a store whose lock is held (a broker writing it) reports no loss to a stream."""

import json
from collections import Counter

import pytest

from rocketstore_spark.errors import DataLossError
from rocketstore_spark.spark.options import ReadOptions
from tests.store.read.test_lost_ranges import FILE_SIZE, cut_copy, expected


def read(spark, path, **options):
    r = spark.read.format("rocketstore").option("commitLogFileSize", str(FILE_SIZE))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path))


@pytest.mark.parametrize("scan_mode", ["queue", "commitlog", "raw"])
def test_a_cut_copy_fails_by_default_and_reads_what_is_left_on_request(spark, golden_copy, manifest, scan_mode):
    cut_copy(golden_copy, 1, 500_000)
    valid_end, kept, lost = expected(manifest, 500_000)
    if scan_mode != "raw":  # a raw scan reads every queue's records; the others the user topics by default
        wanted = ReadOptions(stores=()).wants_topic
        lost = Counter({k: v for k, v in lost.items() if wanted(k[0])})
        kept = Counter({k: v for k, v in kept.items() if wanted(k[0])})
    with pytest.raises(Exception) as info:
        read(spark, golden_copy, scanMode=scan_mode).count()
    text = str(info.value)
    assert "DataLossError" in text and f"{sum(lost.values())} messages of {len(lost)} queues are lost" in text
    assert str(golden_copy / "commitlog") in text
    df = read(spark, golden_copy, scanMode=scan_mode, failOnDataLoss="false")
    if scan_mode == "raw":  # every record of the commit log up to its valid end (user topics), dispatched or not
        wanted = ReadOptions(stores=()).wants_topic
        assert df.count() == sum(1 for m in manifest
                                 if m["commitLogOffset"] + m["storeSize"] <= valid_end and wanted(m["topic"]))
    else:
        assert df.count() == sum(kept.values())


def test_ending_offsets_before_the_loss_need_no_flag(spark, golden_copy, manifest):
    cut_copy(golden_copy, 1, 500_000)
    _, kept, lost = expected(manifest, 500_000)
    queues = sorted(q for t, q in kept if t == "TopicTest")
    assert any(lost[("TopicTest", q)] for q in queues)
    ending = json.dumps({"TopicTest": {str(q): kept[("TopicTest", q)] for q in queues}})
    assert read(spark, golden_copy, topics="TopicTest", endingOffsets=ending).count() == \
        sum(kept[("TopicTest", q)] for q in queues)
    one_more = json.dumps({"TopicTest": {str(q): kept[("TopicTest", q)] + 1 for q in queues}})
    with pytest.raises(Exception, match="DataLossError"):
        read(spark, golden_copy, topics="TopicTest", endingOffsets=one_more).count()


# --- streaming --------------------------------------------------------------------------------------------


def stream_plan(path, **options):
    """A streaming reader's first micro-batch planned on the driver: (reader, start, end, partitions)."""
    from rocketstore_spark.spark.options import parse_read_options
    from rocketstore_spark.spark.stream_reader import RocketStoreStreamReader

    opts = parse_read_options({"path": str(path), "commitLogFileSize": str(FILE_SIZE),
                               "startingOffsets": "earliest", **options}, stream=True)
    reader = RocketStoreStreamReader(opts, ("topic", "queueId", "queueOffset"))
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    return reader, start, end


def planned_rows(parts) -> Counter:
    rows = Counter()
    for p in parts:
        for topic, qid, lo, hi in getattr(p, "ranges", None) or [(p.topic, p.queue_id, p.start, p.end)]:
            rows[(topic, qid)] += hi - lo
    return rows


def user_queues(counter) -> dict:
    wanted = ReadOptions(stores=()).wants_topic
    return {k: v for k, v in counter.items() if v and wanted(k[0])}


def test_a_stream_of_a_cut_copy_needs_its_lost_messages_and_reports_them_once(golden_copy, manifest, caplog):
    cut_copy(golden_copy, 1, 500_000)
    _, kept, lost = expected(manifest, 500_000)
    lost = user_queues(lost)
    reader, start, end = stream_plan(golden_copy)
    broker = next(iter(end))
    # the batch ends past the lost units: the stream needs them next
    assert {(t, int(q)): n for t, queues in end[broker].items() for q, n in queues.items() if (t, int(q)) in lost} \
        == {k: kept[k] + n for k, n in lost.items()}
    with pytest.raises(DataLossError) as info:
        reader.partitions(start, end)
    text = str(info.value)
    assert f"{sum(lost.values())} messages of {len(lost)} queues are lost" in text
    assert str(golden_copy / "commitlog") in text and "failOnDataLoss=false" in text

    reader, start, end = stream_plan(golden_copy, failOnDataLoss="false")
    caplog.set_level("WARNING", logger="rocketstore_spark")
    parts = reader.partitions(start, end)
    assert user_queues(planned_rows(parts)) == user_queues(kept)
    warnings = [r.getMessage() for r in caplog.records if "are lost" in r.getMessage()]
    assert len(warnings) == 1 and f"{sum(lost.values())} messages of {len(lost)} queues are lost" in warnings[0]
    # the next batch starts past them: nothing more to read, nothing reported again
    caplog.clear()
    assert reader.latestOffset(end, None) == end
    assert not [r for r in caplog.records if "are lost" in r.getMessage()]


def test_a_live_store_reports_no_loss_while_its_lock_is_held(golden_copy, manifest):
    """Units past the records while a broker or writer holds the lock may be records being written: no loss."""
    import subprocess
    import sys
    import textwrap

    cut_copy(golden_copy, 1, 500_000)
    _, kept, _ = expected(manifest, 500_000)
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
        assert user_queues({(t, int(q)): n for t, queues in end[next(iter(end))].items() for q, n in queues.items()}) \
            == user_queues(kept)
        assert user_queues(planned_rows(reader.partitions(start, end))) == user_queues(kept)
    finally:
        holder.stdin.close()
        holder.wait(30)


@pytest.mark.parametrize("fail", [True, False])
def test_a_cut_copy_streamed_available_now(spark, golden_copy, manifest, tmp_path, fail):
    cut_copy(golden_copy, 1, 500_000)
    _, kept, lost = expected(manifest, 500_000)
    out = tmp_path / "out"
    q = (spark.readStream.format("rocketstore").option("commitLogFileSize", str(FILE_SIZE))
         .option("startingOffsets", "earliest").option("failOnDataLoss", str(fail).lower()).load(str(golden_copy))
         .select("topic", "queueId", "queueOffset")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    if fail:
        with pytest.raises(Exception) as info:
            q.awaitTermination()
        lost = user_queues(lost)
        assert "DataLossError" in str(info.value)
        assert f"{sum(lost.values())} messages of {len(lost)} queues are lost" in str(info.value)
        return
    q.awaitTermination()
    rows = spark.read.parquet(str(out)).collect()
    assert Counter((r.topic, r.queueId) for r in rows) == Counter(user_queues(kept))
    assert all(r.queueOffset < kept[(r.topic, r.queueId)] for r in rows)


def test_a_growing_commit_log_reports_no_loss_until_it_is_still(golden_copy, manifest):
    """Units past the records while the commit log grows between triggers may be records being written: the
    loss is reported only once a trigger finds the log as the previous one left it."""
    last = cut_copy(golden_copy, 1, 500_000)
    _, kept, lost = expected(manifest, 500_000)
    lost = user_queues(lost)
    reader, start, end = stream_plan(golden_copy, failOnDataLoss="false")

    def ends():
        latest = reader.latestOffset(start, None)
        return {(t, int(q)): n for t, queues in latest[next(iter(latest))].items() for q, n in queues.items()
                if (t, int(q)) in lost}

    assert ends() == {k: kept[k] + n for k, n in lost.items()}  # still since the first look: certain
    with open(last, "ab") as fh:  # the log grows (zeros: no record completes)
        fh.write(bytes(4096))
    assert ends() == {k: kept[k] for k in lost}  # growing: the stream stops at the last complete record
    assert ends() == {k: kept[k] + n for k, n in lost.items()}  # still again: the loss is certain


def test_the_trigger_that_finds_new_messages_never_waits_for_the_loss_check(tmp_path, monkeypatch):
    """A writer appends between triggers (one of them while it holds the lock) and releases the lock: the
    trigger that finds its messages hands them out from the queue ends alone (the store is not still: no
    recovering open), and the loss check waits for the next trigger that finds the store as this one left it
    (one recovering open, then none while it stays so)."""
    import pyarrow as pa

    from rocketstore_spark.spark.options import parse_read_options
    from rocketstore_spark.spark.stream_reader import RocketStoreStreamReader
    from rocketstore_spark.store import RocketStore

    path = tmp_path / "s"

    def append(n: int, trigger=None) -> None:
        with RocketStore.open_writer(path) as writer:
            if trigger is not None:
                trigger()  # a trigger while the writer holds the store's lock
            writer.append(pa.table({"topic": pa.array(["T"] * n), "queueId": pa.array([i % 4 for i in range(n)],
                                                                                       pa.int32()),
                                    "body": pa.array([b"x" * 100] * n, pa.binary())}))

    append(40)
    opts = parse_read_options({"path": str(path), "startingOffsets": "latest"}, stream=True)
    reader = RocketStoreStreamReader(opts, ("topic", "queueId", "queueOffset"))
    start = reader.initialOffset()
    assert reader.latestOffset(start, None) == start
    recovering = []
    opened = RocketStore.open.__func__

    def counting_open(cls, *args, **kwargs):
        if kwargs.get("valid_end") is None:
            recovering.append(args)
        return opened(cls, *args, **kwargs)

    monkeypatch.setattr(RocketStore, "open", classmethod(counting_open))
    append(20, trigger=lambda: reader.latestOffset(start, None))
    end = reader.latestOffset(start, None)
    assert {q: n - start[b]["T"][q] for b in end for q, n in end[b]["T"].items()} == {str(q): 5 for q in range(4)}
    assert sum(p.end - p.start if hasattr(p, "end") else sum(hi - lo for *_, lo, hi in p.ranges)
               for p in reader.partitions(start, end)) == 20
    assert recovering == []  # the trigger a query waits for: ends and partitions without recovery
    assert reader.latestOffset(end, None) == end and len(recovering) == 1  # still: the loss check, once
    assert reader.latestOffset(end, None) == end and len(recovering) == 1


# --- a cut copy that changes between planning and reading --------------------------------------------------


@pytest.mark.parametrize("scan_mode", ["queue", "commitlog"])
def test_a_cut_copy_growing_or_shrinking_after_planning_never_drops_rows_silently(golden_copy, manifest, scan_mode):
    """Partitions read what their plan saw: a copy that grew since (an rsync still running) gives the planned rows
    (what the plan reported lost stays out of this read), one that shrank fails naming the file and offset."""
    from rocketstore_spark.errors import RocketStoreError
    from rocketstore_spark.spark.options import parse_read_options
    from rocketstore_spark.spark.planning import Pushed, plan
    from rocketstore_spark.spark.reader import RocketStoreReader

    last = cut_copy(golden_copy, 2)
    whole = last.read_bytes()
    options = {"path": str(golden_copy), "scanMode": scan_mode, "failOnDataLoss": "false",
               "commitLogFileSize": str(FILE_SIZE)}
    with open(last, "r+b") as fh:
        fh.truncate(600_000)
    _, kept, _ = expected(manifest, FILE_SIZE + 600_000)
    parts = plan(parse_read_options(options), Pushed())
    last.write_bytes(whole)  # the copy grows back to the whole file
    reader = RocketStoreReader(parse_read_options(options), ("topic", "queueId", "queueOffset"))
    rows = Counter((r["topic"], r["queueId"]) for p in parts for b in reader.read(p) for r in b.to_pylist())
    assert user_queues(rows) == user_queues(kept)

    with open(last, "r+b") as fh:
        fh.truncate(900_000)
    parts = plan(parse_read_options(options), Pushed())
    with open(last, "r+b") as fh:  # the copy shrinks below what was planned
        fh.truncate(500_000)
    reader = RocketStoreReader(parse_read_options(options), ("topic", "queueId", "queueOffset"))
    with pytest.raises(RocketStoreError) as info:
        for p in parts:
            list(reader.read(p))
    assert str(last) in str(info.value)
