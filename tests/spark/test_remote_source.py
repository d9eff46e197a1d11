"""Spark reads a store on S3 (the test server): batch in both scan modes, a glob of two brokers, and an
AvailableNow stream equal the same reads of the local copies; fs.* options are validated at load()."""

from __future__ import annotations

import shutil

import pytest
from chispa import assert_df_equality

from rocketstore_spark.errors import InvalidArgumentError

pytestmark = pytest.mark.remote  # a real S3-compatible server: `make test-remote`


@pytest.fixture(scope="module")
def s3_stores(s3_server, golden_store_path, tmp_path_factory):
    """Two brokers of the golden store on S3 (``s3://rst/spark-remote/archive/broker-{a,b}/store``) and locally."""
    local = tmp_path_factory.mktemp("brokers")
    for broker in ("broker-a", "broker-b"):
        shutil.copytree(golden_store_path, local / broker / "store")
        s3_server.upload(local / broker / "store", "rst", f"spark-remote/archive/{broker}/store")
    options = {"fs.endpoint": s3_server.endpoint, "fs.scheme": "http", "fs.anonymous": "true",
               "fs.region": "us-east-1"}
    return "s3://rst/spark-remote/archive", local, options


def read(spark, path, options, **more):
    return comparable(spark.read.format("rocketstore").options(**options, **more).load(path))


def comparable(df):
    """Maps cannot be sorted or hashed in Spark: properties become their sorted entries."""
    from pyspark.sql import functions as F

    return df.withColumn("properties", F.array_sort(F.map_entries("properties")))


@pytest.mark.parametrize("scan_mode,more", [
    ("queue", {"topics": "TopicTest,orders_v1-EU"}),  # the default suite's: two topics keep the comparison short
    pytest.param("queue", {"includeSystemTopics": "true"}, marks=pytest.mark.slow),
    pytest.param("commitlog", {"includeSystemTopics": "true"}, marks=pytest.mark.slow),
    pytest.param("raw", {"includeSystemTopics": "true"}, marks=pytest.mark.slow)])
def test_a_batch_read_from_s3_equals_the_local_read(spark, s3_stores, scan_mode, more):
    base, local, options = s3_stores
    remote = read(spark, f"{base}/broker-a/store", options, scanMode=scan_mode, **more)
    here = read(spark, str(local / "broker-a" / "store"), {}, scanMode=scan_mode, **more)
    assert remote.count() > 0
    assert_df_equality(remote, here, ignore_row_order=True)


@pytest.mark.slow
def test_a_glob_of_brokers_on_s3_reads_each_once(spark, s3_stores):
    base, local, options = s3_stores
    remote = read(spark, f"{base}/broker-*/store", options, tags="TagA")
    here = read(spark, f"{local}/broker-*/store", {}, tags="TagA")
    assert sorted(r.brokerName for r in remote.select("brokerName").distinct().collect()) == ["broker-a", "broker-b"]
    assert_df_equality(remote, here, ignore_row_order=True)


@pytest.mark.slow
def test_an_available_now_stream_from_s3_equals_the_batch(spark, s3_stores, tmp_path):
    base, local, options = s3_stores
    stream = (spark.readStream.format("rocketstore").options(**options).option("startingOffsets", "earliest")
              .load(f"{base}/broker-a/store")
              .writeStream.format("memory").queryName("remote_stream").trigger(availableNow=True)
              .option("checkpointLocation", str(tmp_path / "cp")).start())
    stream.awaitTermination(300)
    assert_df_equality(comparable(spark.table("remote_stream")), read(spark, str(local / "broker-a" / "store"), {}),
                       ignore_row_order=True)


def test_bad_filesystem_options_fail_at_load(spark, s3_stores):
    base, _, options = s3_stores
    with pytest.raises(Exception, match="unknown filesystem option 'fs.endpiont'"):
        _ = read(spark, f"{base}/broker-a/store", {**options, "fs.endpiont": "x"}).schema
    with pytest.raises(Exception, match="does not exist"):
        _ = read(spark, f"{base}/broker-q/store", options).schema
    assert issubclass(InvalidArgumentError, ValueError)


@pytest.mark.slow
def test_pushed_down_lookups_on_s3_equal_the_local_ones(pushdown, s3_stores, manifest):
    spark = pushdown
    base, local, options = s3_stores
    some = next(m for m in manifest if m["inConsumeQueue"] and m["topic"] == "TopicTest" and m["uniqKey"])
    for where in (f"uniqKey = '{some['uniqKey']}'", f"msgId = '{some['msgId']}'",
                  f"commitLogOffset = {some['commitLogOffset']}",
                  "topic = 'TopicTest' AND queueId = 1 AND queueOffset >= 3 AND queueOffset < 9",
                  "tags = 'TagB'"):
        remote = read(spark, f"{base}/broker-a/store", options, includeSystemTopics="true").where(where)
        here = read(spark, str(local / "broker-a" / "store"), {}, includeSystemTopics="true").where(where)
        assert remote.count() > 0, where
        assert_df_equality(remote, here, ignore_row_order=True)


@pytest.mark.slow
@pytest.mark.parametrize("service", ["gcs", "azure"])
def test_a_batch_read_from_gcs_and_azure_equals_the_local_read(spark, request, golden_store_path, service):
    """gs:// on gcp-storage-emulator and abfs:// on Azurite: the fs.* options reach the executors (the account key
    too) and every row equals the local read."""
    prefix = f"spark-remote/{golden_store_path.parent.name}/store"  # the same broker name as the local store's
    if service == "gcs":
        server = request.getfixturevalue("gcs_server")
        uri = server.upload(golden_store_path, "rst", prefix)
        options = {"fs.endpoint": server.endpoint, "fs.scheme": "http", "fs.anonymous": "true"}
    else:
        server = request.getfixturevalue("azure_server")
        uri = server.upload(golden_store_path, "rst", prefix)
        options = {f"fs.{k}": str(v) for k, v in server.options().items()}
    remote = read(spark, uri, options, includeSystemTopics="true")
    here = read(spark, str(golden_store_path), {}, includeSystemTopics="true")
    assert remote.count() == here.count() > 0
    # the first difference, if any, as one row (chispa would print every row of both sides)
    assert remote.exceptAll(here).limit(1).collect() == [] and here.exceptAll(remote).limit(1).collect() == []
    assert_df_equality(remote, here, ignore_row_order=True)
