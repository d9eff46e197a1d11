"""Planning on the driver, without a Spark session: partitions from consume-queue files only."""

import pickle

from rocketstore_spark.spark.options import parse_read_options
from rocketstore_spark.spark.planning import Pushed, QueuePartition, QueueRangesPartition, plan
from rocketstore_spark.spark.reader import RocketStoreReader
from rocketstore_spark.spark.schema import SPARK_COLUMNS


def _rows(opts, parts):
    reader = RocketStoreReader(opts, SPARK_COLUMNS)
    return [r for p in parts for b in reader.read(p) for r in b.to_pylist()]


def _ranges(parts):
    return [r for p in parts for r in (p.ranges if isinstance(p, QueueRangesPartition)
                                       else [(p.topic, p.queue_id, p.start, p.end)])]


def test_queue_plans_pack_ranges_that_never_cross_a_consume_queue_file(golden_store_path, golden_store, manifest):
    opts = parse_read_options({"path": str(golden_store_path), "maxMessagesPerPartition": "250",
                               "scanMode": "queue"})
    parts = plan(opts, Pushed())
    per_file = golden_store.sizes.consume_queue_file_size // 20
    assert parts and all(isinstance(p, (QueuePartition, QueueRangesPartition)) for p in parts)
    ranges = _ranges(parts)
    assert all(end - start <= 250 and start // per_file == (end - 1) // per_file for _, _, start, end in ranges)
    # small queues share partitions: fewer partitions than ranges, each of at most 250 messages
    assert len(parts) < len(ranges)
    assert all(sum(end - start for _, _, start, end in _ranges([p])) <= 250 for p in parts)
    wanted = {(m["topic"], m["queueId"]) for m in manifest if m["inConsumeQueue"] and not m["topic"].startswith(
        ("RMQ_SYS", "SCHEDULE", "rmq_sys", "%RETRY%", "%DLQ%"))}
    assert {(t, q) for t, q, _, _ in ranges} <= wanted


def test_tag_reads_pack_only_ranges_with_matching_units(golden_store_path, golden_store, manifest):
    path = str(golden_store_path)
    opts = parse_read_options({"path": path, "tags": "TagA", "maxMessagesPerPartition": "400",
                               "includeSystemTopics": "true"})
    parts = plan(opts, Pushed())
    assert parts and all(isinstance(p, QueueRangesPartition) for p in parts)
    per_file = golden_store.sizes.consume_queue_file_size // 20
    for p in parts:
        assert all(start < end and start // per_file == (end - 1) // per_file for _, _, start, end in p.ranges)
    assert pickle.loads(pickle.dumps(parts)) == parts  # small and picklable: paths and offsets only
    expected = sorted(m["commitLogOffset"] for m in manifest if m["inConsumeQueue"] and m["tags"] == "TagA")
    got = sorted(r["commitLogOffset"] for r in _rows(opts, parts))
    assert got == expected
    # every partition but the last is filled up to the budget of matching messages
    plain = plan(parse_read_options({"path": path, "maxMessagesPerPartition": "400", "scanMode": "queue"}), Pushed())
    assert len(parts) < len(plain)
    split = plan(parse_read_options({"path": path, "tags": "TagA", "minPartitions": "5",
                                     "includeSystemTopics": "true"}), Pushed())
    assert len(split) >= 5 and sorted(r["commitLogOffset"] for r in _rows(opts, split)) == expected


def test_pushed_tags_narrow_the_plan_and_unknown_tags_plan_nothing(golden_store_path):
    opts = parse_read_options({"path": str(golden_store_path)})
    assert plan(opts, Pushed(tags={"NoSuchTag"})) == []
    narrowed = plan(opts, Pushed(tags={"TagB"}))
    assert narrowed and all(isinstance(p, QueueRangesPartition) for p in narrowed)


def test_small_batches_are_merged_in_order_and_large_ones_pass_through_uncopied():
    import pyarrow as pa

    from rocketstore_spark.spark.reader import coalesced

    def batch(lo, hi):
        return pa.record_batch({"x": list(range(lo, hi))})

    big = batch(100, 160)
    out = list(coalesced(iter([batch(0, 10), batch(10, 25), batch(25, 40), batch(40, 50), big, batch(160, 161)]),
                         rows=40))
    assert [b.num_rows for b in out] == [40, 10, 60, 1]  # 10+15+15 reach 40; 10 flushed before the big one
    assert out[2] is big
    assert [x for b in out for x in b.column(0).to_pylist()] == list(range(50)) + list(range(100, 161))
    assert list(coalesced(iter([]), rows=40)) == []


def test_a_tag_read_hands_spark_few_large_batches(golden_store_path, manifest):
    opts = parse_read_options({"path": str(golden_store_path), "tags": "TagA", "includeSystemTopics": "true"})
    reader = RocketStoreReader(opts, SPARK_COLUMNS)
    parts = plan(opts, Pushed())
    for part in parts:
        sizes = [b.num_rows for b in reader.read(part)]
        # unmerged, public-a's TagA read comes as ~800 batches of 1-20 rows (one per queue and commit-log file)
        assert sizes and len(sizes) <= sum(sizes) // 5_000 + 1, sizes


def _small_store(root, n, start=0):
    import pyarrow as pa

    from rocketstore_spark.store import RocketStore

    table = pa.table({"topic": ["T"] * n, "queueId": [0] * n, "tags": ["a"] * n,
                      "body": pa.array([f"m{start + i}".encode() for i in range(n)], pa.binary())})
    with RocketStore.open_writer(root, commit_log_file_size=1 << 16, consume_queue_file_size=200,
                          index_hash_slots=16, index_max_entries=64) as w:
        w.append(table)


def age(root, seconds: int = 600) -> None:
    """Every file and directory of ``root`` as if last modified ``seconds`` ago."""
    import os
    import time

    then = time.time_ns() - seconds * 1_000_000_000
    for path in sorted(root.rglob("*"), reverse=True) + [root]:
        os.utime(path, ns=(then, then))


def aged_store(tmp_path, n: int = 12):
    """A small store of ``n`` messages under ``tmp_path``, its files as if written ten minutes ago (a planner's or
    stream's cache trusts their metadata): its root."""
    root = tmp_path / "store"
    _small_store(root, n)
    age(root)
    return root


def test_the_planning_worker_keeps_an_unchanged_store_open_and_replaces_a_changed_one(tmp_path):
    from rocketstore_spark.spark.planning import plan_key
    from rocketstore_spark.spark.store_cache import OPEN_STORES
    from rocketstore_spark.store.files.known_end import forget_known_end

    root = tmp_path / "a" / "store"
    _small_store(root, 15)
    forget_known_end(root)  # as a broker leaves a store: opening walks the commit log (and maps it)
    age(root)  # written a while ago: times close to the open are not trusted (store_snapshot)
    opts = parse_read_options({"path": str(root), "tags": "a"})

    def planned_end():
        return max(end for p in plan(opts, Pushed()) for _, _, _, end in p.ranges)

    assert planned_end() == 15
    first = OPEN_STORES.peek(plan_key(str(root)))
    assert planned_end() == 15 and OPEN_STORES.peek(plan_key(str(root))) is first  # not recovered again
    assert first.commitlog.queue._maps  # its commit-log maps stay open between plans
    _small_store(root, 10, start=15)
    forget_known_end(root)
    assert planned_end() == 25  # the change is seen: a new store, the old one closed
    age(root)
    assert planned_end() == 25  # just written when opened: opened once more, then kept
    second = OPEN_STORES.peek(plan_key(str(root)))
    assert second is not first and not first.commitlog.queue._maps
    assert planned_end() == 25 and OPEN_STORES.peek(plan_key(str(root))) is second
    for i in range(OPEN_STORES.capacity + 2):
        other = tmp_path / f"o{i}" / "store"
        _small_store(other, 3)
        assert plan(parse_read_options({"path": str(other)}), Pushed())
    assert len(OPEN_STORES) <= OPEN_STORES.capacity
    assert plan_key(str(root)) not in OPEN_STORES and not second.commitlog.queue._maps  # evicted, closed


def test_large_tag_reads_estimate_matches_from_samples_and_read_exactly_the_matches(tmp_path, monkeypatch):
    """Past EXACT_COUNT_UNITS the driver samples the consume queues instead of scanning them: no range is
    dropped or trimmed, the estimates pack the partitions, and the tasks still return exactly the matches."""
    import numpy as np
    import pyarrow as pa

    from rocketstore_spark.spark import tag_packing as planning
    from rocketstore_spark.store import RocketStore

    n = 24_000
    rng = np.random.default_rng(3)
    # queue 0: 1% rare spread evenly; queue 1: rare only in a burst (clustered in time) at queue offsets
    # 7500..9000, in the middle of its second consume-queue file
    qid = np.arange(n) % 2
    rare = np.where(qid == 0, rng.random(n) < 0.01, (np.arange(n) >= 15_000) & (np.arange(n) < 18_000))
    table = pa.table({"topic": ["T"] * n, "queueId": pa.array(qid, pa.int32()),
                      "tags": np.where(rare, "rare", "common").tolist(),
                      "body": pa.array([b"m%d" % i for i in range(n)], pa.binary())})
    root = tmp_path / "store"
    with RocketStore.open_writer(root, commit_log_file_size=1 << 20, consume_queue_file_size=20 * 6000) as w:
        w.append(table)
    opts = parse_read_options({"path": str(root), "tags": "rare", "minPartitions": "3"})
    exact = plan(opts, Pushed())
    monkeypatch.setattr(planning, "EXACT_COUNT_UNITS", 1000)
    monkeypatch.setattr(planning, "SAMPLE_BLOCK_UNITS", 200)
    monkeypatch.setattr(planning, "SAMPLE_FRACTION", 4)
    sampled = plan(opts, Pushed())
    # every consume-queue file range is kept whole (nothing is known to be empty without a full scan)
    assert sorted(r for p in sampled for r in p.ranges) == [("T", q, lo, lo + 6000) for q in (0, 1)
                                                            for lo in (0, 6000)]
    assert sorted(r for p in exact for r in p.ranges) != sorted(r for p in sampled for r in p.ranges)
    estimates = {(q, lo): planning._estimated_matches(RocketStore.open(root).consume_queue("T", q),
                                                      planning.Subscription.parse("rare"), lo, lo + 6000)
                 for q in (0, 1) for lo in (0, 6000)}
    assert estimates[(1, 0)] == 0 and 750 <= estimates[(1, 6000)] <= 3000  # samples spread over the range
    assert 30 <= estimates[(0, 0)] <= 300 and 30 <= estimates[(0, 6000)] <= 300
    # packed by the estimates: the burst's range (most of the matches) is a partition of its own
    assert ((("T", 1, 6000, 12000),) in [p.ranges for p in sampled]) and len(sampled) == 2
    expected = sorted(int(i) for i in np.flatnonzero(rare))
    for parts in (exact, sampled):
        got = sorted(int(r["body"][1:]) for r in _rows(opts, parts))
        assert got == expected


def test_a_tag_read_of_many_small_queues_is_planned_from_a_few_queues_per_topic(tmp_path, monkeypatch):
    """Past EXACT_COUNT_UNITS, short ranges get their topic's match rate from at most TOPIC_SAMPLE_RANGES of the
    topic's queues (a store of 20,000 young queues is not read queue by queue on the driver); the tasks still
    return exactly the matches."""
    import numpy as np
    import pyarrow as pa

    from rocketstore_spark.spark import tag_packing
    from rocketstore_spark.store import RocketStore
    from rocketstore_spark.store.files.consume_queue import ConsumeQueue

    topics, queues, n = 6, 8, 4800
    rng = np.random.default_rng(5)
    topic = np.array([f"T{i % topics}" for i in range(n)])
    rare = rng.random(n) < 0.1
    table = pa.table({"topic": topic.tolist(), "queueId": pa.array((np.arange(n) // topics) % queues, pa.int32()),
                      "tags": np.where(rare, "rare", "common").tolist(),
                      "body": pa.array([b"m%d" % i for i in range(n)], pa.binary())})
    root = tmp_path / "store"
    with RocketStore.open_writer(root, commit_log_file_size=1 << 20, consume_queue_file_size=20 * 1000) as w:
        w.append(table)
    opts = parse_read_options({"path": str(root), "tags": "rare"})
    plan(opts, Pushed())  # the store opened and recovered: what follows is the packing's own reading
    monkeypatch.setattr(tag_packing, "EXACT_COUNT_UNITS", 100)
    counted = set()
    real = ConsumeQueue.hash_matches

    def hash_matches(cq, *args, **kwargs):
        counted.add((cq.topic, cq.queue_id))
        return real(cq, *args, **kwargs)

    real_spans = RocketStore.tag_match_spans

    def tag_match_spans(store, ranges, *args, **kwargs):  # the sampled ranges, counted in one pass
        counted.update((t, q) for t, q, _, _ in ranges)
        return real_spans(store, ranges, *args, **kwargs)

    monkeypatch.setattr(ConsumeQueue, "hash_matches", hash_matches)
    monkeypatch.setattr(RocketStore, "tag_match_spans", tag_match_spans)
    parts = plan(opts, Pushed())
    assert 0 < len(counted) <= topics * tag_packing.TOPIC_SAMPLE_RANGES < topics * queues
    monkeypatch.setattr(ConsumeQueue, "hash_matches", real)
    got = sorted(int(r["body"][1:]) for r in _rows(opts, parts))
    assert got == sorted(int(i) for i in np.flatnonzero(rare))


def test_stream_batches_pack_the_ranges_of_many_small_queues_by_size():
    """A micro-batch spread over 1,000 queues is a few tasks, not 1,000; a queue filling a task keeps its own."""
    from rocketstore_spark.spark.planning import StoreHandle
    from rocketstore_spark.spark.stream_reader import pack_ranges

    handle = StoreHandle("/s", "b", 0, (1 << 20, 6000, None, None))
    ranges = [("t", q, 10, 13) for q in range(1000)] + [("big", 0, 0, 500)] + [("u", 1, 7, 8)]
    parts = pack_ranges(handle, ranges, 500)
    assert len(parts) == 9
    assert [len(p.ranges) for p in parts[:6]] == [166] * 6 and len(parts[6].ranges) == 4
    assert isinstance(parts[7], QueuePartition) and (parts[7].topic, parts[7].end) == ("big", 500)
    assert isinstance(parts[8], QueuePartition) and (parts[8].topic, parts[8].start) == ("u", 7)
    covered = [r for p in parts for r in (p.ranges if isinstance(p, QueueRangesPartition) else
                                          [(p.topic, p.queue_id, p.start, p.end)])]
    assert covered == ranges
    assert all(pickle.loads(pickle.dumps(p)) == p for p in parts)
