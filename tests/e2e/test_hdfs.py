"""HDFS stores against a real HDFS (Hadoop's MiniDFSCluster from Maven Central): the golden store copied into
HDFS reads the same through the store API, the CLI, Spark batch reads and an AvailableNow stream as the local
copy, through both HDFS clients:

* ``webhdfs://`` (:mod:`rocketstore_spark.store.files.webhdfs`, WebHDFS's REST interface on the NameNode's HTTP
  port): pure Python, always run;
* ``hdfs://`` (pyarrow's ``HadoopFileSystem``): loads ``libhdfs.so`` through JNI. That native library ships only
  in Hadoop's binary distribution (``lib/native``): Maven Central's ``hadoop-hdfs-native-client`` jar holds no
  library, and neither Debian nor PyPI packages it. Where it is installed (``ARROW_LIBHDFS_DIR`` or
  ``HADOOP_HOME/lib/native``), the hdfs:// cases run; elsewhere they are skipped, saying which file is missing.
"""

import getpass
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from chispa import assert_df_equality

from rocketstore_spark.errors import RemoteReadError, StoreNotFoundError
from rocketstore_spark.store import RocketStore
from rocketstore_spark.store.files.webhdfs import WebHdfsClient, WebHdfsFile
from tests.e2e.services import JARS, free_port

STORE_PATH = "/golden/public-a/store"
BROKER = {"brokerName": "broker-a"}  # the same brokerName column for the local and the remote copy
STREAM_TOPICS = "TopicTest,orders_v1-EU"  # the stream's topics (the batch read takes them all)


@pytest.fixture(scope="module")
def hdfs_store(hdfs, golden_dir):
    local = golden_dir / "store"
    files = hdfs.put_tree(local, STORE_PATH)
    assert files > 0
    return local


def test_golden_store_copied_into_hdfs(hdfs, hdfs_store):
    for path in sorted(p for p in hdfs_store.rglob("*") if p.is_file()):
        remote = f"{STORE_PATH}/{path.relative_to(hdfs_store).as_posix()}"
        status = json.loads(hdfs.webhdfs("GET", remote, "GETFILESTATUS"))["FileStatus"]
        assert status["length"] == path.stat().st_size, remote
    commitlog = sorted((hdfs_store / "commitlog").iterdir())[0]
    assert hdfs.webhdfs("GET", f"{STORE_PATH}/commitlog/{commitlog.name}", "OPEN") == commitlog.read_bytes()


def libhdfs_dir():
    """Where pyarrow looks for libhdfs.so: ARROW_LIBHDFS_DIR, else HADOOP_HOME/lib/native (None: neither is set)."""
    if os.environ.get("ARROW_LIBHDFS_DIR"):
        return Path(os.environ["ARROW_LIBHDFS_DIR"])
    return Path(os.environ["HADOOP_HOME"]) / "lib" / "native" if os.environ.get("HADOOP_HOME") else None


def libhdfs_env():
    """The environment pyarrow's HadoopFileSystem needs, or None when libhdfs.so is not on this machine."""
    lib_dir = libhdfs_dir()
    if lib_dir is None or not (lib_dir / "libhdfs.so").is_file():
        return None
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath("/usr/bin/java")).parents[1])
    jars = os.pathsep.join(str(p) for p in sorted((JARS / "hdfs-lib").glob("*.jar")))  # JNI expands no wildcards
    return {"ARROW_LIBHDFS_DIR": str(lib_dir), "JAVA_HOME": java_home, "CLASSPATH": jars}


@pytest.fixture(scope="module", params=["webhdfs", "hdfs"])
def remote(request, hdfs, hdfs_store):
    """(the HDFS copy's URI, its fs options, the environment its client needs) for each HDFS client."""
    if request.param == "webhdfs":
        # the OS user that runs the NameNode is HDFS's superuser; fs.user is what WebHDFS sends as user.name
        return f"webhdfs://127.0.0.1:{hdfs.http_port}{STORE_PATH}", {"fs.user": getpass.getuser()}, {}
    env = libhdfs_env()
    if env is None:
        where = f"is not in {libhdfs_dir()}" if libhdfs_dir() else "not found: ARROW_LIBHDFS_DIR and HADOOP_HOME unset"
        pytest.skip(f"hdfs:// needs pyarrow's HadoopFileSystem, whose libhdfs.so {where} (set ARROW_LIBHDFS_DIR to "
                    "a Hadoop binary distribution's lib/native); the webhdfs:// cases read the same store")
    os.environ.update(env)
    return f"{hdfs.uri}{STORE_PATH}", {}, env


def store_options(fs_options: dict) -> dict:
    return {k.removeprefix("fs."): v for k, v in fs_options.items()}


def queue_rows(store):
    return {(topic, q): [row for batch in store.read_queue(topic, q) for row in batch.to_pylist()]
            for topic in store.topics() for q in store.queue_ids(topic)}


def test_store_api_reads_hdfs_like_local(remote, hdfs_store):
    uri, fs_options, _ = remote
    with RocketStore.open(hdfs_store) as local, RocketStore.open(uri, fs_options=store_options(fs_options)) as there:
        assert there.topics() == local.topics()
        assert there.min_phy_offset() == local.min_phy_offset() and there.max_phy_offset() == local.max_phy_offset()
        for topic in local.topics():
            for q in local.queue_ids(topic):
                assert (there.min_offset(topic, q), there.max_offset(topic, q)) == \
                       (local.min_offset(topic, q), local.max_offset(topic, q))
        rows = queue_rows(local)
        assert sum(map(len, rows.values())) > 0
        assert queue_rows(there) == rows


def cli(*args, env=None) -> str:
    done = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fs_flags(fs_options: dict) -> list[str]:
    return [flag for k, v in fs_options.items() for flag in ("--fs", f"{k.removeprefix('fs.')}={v}")]


def test_cli_inspects_and_dumps_hdfs_like_local(remote, hdfs_store):
    uri, fs_options, env = remote
    local = json.loads(cli("inspect", "--json", str(hdfs_store)))
    there = json.loads(cli("inspect", "--json", uri, *fs_flags(fs_options), env=env))
    # where the files are, and the local disk's block-rounded usage (st_blocks), differ by nature
    assert there.pop("path") == uri and local.pop("path") == str(hdfs_store)
    assert there["topic_table"].pop("path") == f"{uri}/config/topics.json"
    local["topic_table"].pop("path")
    assert 0 < there.pop("disk_bytes") <= local.pop("disk_bytes")
    assert there == local
    local_dump = cli("dump", "--format", "jsonl", str(hdfs_store))
    assert local_dump.count("\n") > 0
    assert cli("dump", "--format", "jsonl", uri, *fs_flags(fs_options), env=env) == local_dump


def comparable(df):
    """Maps cannot be sorted or hashed in Spark: properties become their sorted entries."""
    from pyspark.sql import functions as F

    return df.withColumn("properties", F.array_sort(F.map_entries("properties")))


def test_spark_batch_read_of_hdfs_equals_local(remote, hdfs_store, spark):
    uri, fs_options, _ = remote
    there = comparable(spark.read.format("rocketstore").options(**BROKER, **fs_options).load(uri))
    here = comparable(spark.read.format("rocketstore").options(**BROKER).load(str(hdfs_store)))
    assert here.count() > 0
    assert_df_equality(there, here, ignore_row_order=True)


def test_available_now_stream_from_hdfs_equals_local(remote, hdfs_store, spark, tmp_path):
    uri, fs_options, _ = remote
    name = f"hdfs_stream_{uri.split(':', 1)[0]}"
    query = (spark.readStream.format("rocketstore").options(**BROKER, **fs_options).option("topics", STREAM_TOPICS)
             .option("startingOffsets", "earliest").load(uri)
             .writeStream.format("memory").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    assert query.awaitTermination(600)
    assert query.exception() is None
    here = spark.read.format("rocketstore").options(**BROKER).option("topics", STREAM_TOPICS).load(str(hdfs_store))
    streamed = spark.table(name)
    assert streamed.count() == here.count() > 0
    assert_df_equality(comparable(streamed.select(*here.columns)), comparable(here), ignore_row_order=True)


def test_webhdfs_errors_name_the_path_and_the_server(hdfs, hdfs_store):
    missing = f"webhdfs://127.0.0.1:{hdfs.http_port}/golden/no-such-store"
    with pytest.raises(StoreNotFoundError, match="does not exist") as err:
        RocketStore.open(missing)
    assert "/golden/no-such-store" in str(err.value)
    # a file's name where a directory is expected, then a port where no NameNode listens
    commitlog = sorted((hdfs_store / "commitlog").iterdir())[0].name
    with pytest.raises(StoreNotFoundError, match="is a file"):
        RocketStore.open(f"webhdfs://127.0.0.1:{hdfs.http_port}{STORE_PATH}/commitlog/{commitlog}")
    closed = free_port()
    with pytest.raises(RemoteReadError, match=f"cannot connect to WebHDFS at http://127.0.0.1:{closed}") as err:
        RocketStore.open(f"webhdfs://127.0.0.1:{closed}{STORE_PATH}", fs_options={"retries": 0})
    assert f"webhdfs://127.0.0.1:{closed}" in str(err.value)


def test_webhdfs_ranged_reads_equal_the_bytes_within_and_across_blocks(hdfs):
    block = 1 << 20  # the NameNode's smallest block size (dfs.namenode.fs-limits.min-block-size)
    data = bytes(range(256)) * (3 * block // 256 + 100)  # three full blocks and a short fourth
    hdfs.webhdfs("PUT", "/ranges/blocks.bin", "CREATE", data=data, overwrite="true", blocksize=block)
    client = WebHdfsClient("127.0.0.1", hdfs.http_port, user=getpass.getuser())
    status = client.list("/ranges")[0]
    assert (status["pathSuffix"], status["length"], status["blockSize"]) == ("blocks.bin", len(data), block)
    ranges = [(0, 100), (5000, 300), (block - 10, 20), (block + 7, 4096), (2 * block - 1, block + 2),
              (3 * block + 1, 25_600), (len(data) - 5, 100), (12, 34)]  # the last two: past the end, block 0 again
    for offset, length in ranges:
        assert client.read("/ranges/blocks.bin", offset, length) == data[offset:offset + length], (offset, length)
    with WebHdfsFile(client, "/ranges/blocks.bin") as fh:
        fh.seek(-10, 2)
        assert fh.read() == data[-10:] and fh.tell() == len(data)
    with pytest.raises(FileNotFoundError, match="FileNotFoundException"):
        client.read("/ranges/missing.bin", 0, 10)
