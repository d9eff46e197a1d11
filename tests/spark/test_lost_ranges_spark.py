"""Spark reads of a cut copy of the golden store: lost messages fail the read by default (DataLossError naming the
queue, offsets, count and file) in every plan, and with failOnDataLoss=false the read returns what is left."""

import json
from collections import Counter

import pytest

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
