"""hdfs:// stores against a real HDFS (Hadoop's MiniDFSCluster from Maven Central): the golden store copied into
HDFS reads the same through the store API, the CLI and Spark as the local copy.

pyarrow's ``HadoopFileSystem`` (the project's hdfs:// client) loads ``libhdfs.so`` through JNI. That native
library ships only in Hadoop's binary distribution (``lib/native``); Maven Central has Hadoop's jars but not it,
and Debian has no package for it. Where it is installed (``ARROW_LIBHDFS_DIR``), the hdfs:// reads run; otherwise
they are skipped saying so, and only the HDFS copy itself is checked, through WebHDFS."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore_spark.store import RocketStore
from tests.e2e.services import JARS

STORE_PATH = "/golden/public-a/store"


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


def libhdfs_env():
    """The environment pyarrow's HadoopFileSystem needs, or None when libhdfs.so is not on this machine."""
    lib_dir = os.environ.get("ARROW_LIBHDFS_DIR") or (os.environ.get("HADOOP_HOME", "") + "/lib/native")
    if not (Path(lib_dir) / "libhdfs.so").is_file():
        return None
    java_home = os.environ.get("JAVA_HOME") or str(Path(os.path.realpath("/usr/bin/java")).parents[1])
    jars = os.pathsep.join(str(p) for p in sorted((JARS / "hdfs-lib").glob("*.jar")))  # JNI expands no wildcards
    return {"ARROW_LIBHDFS_DIR": lib_dir, "JAVA_HOME": java_home, "CLASSPATH": jars}


@pytest.fixture(scope="module")
def hdfs_uri(hdfs, hdfs_store):
    env = libhdfs_env()
    if env is None:
        pytest.skip("libhdfs.so not found (set ARROW_LIBHDFS_DIR to a Hadoop distribution's lib/native): "
                    "pyarrow's HadoopFileSystem cannot connect without it")
    os.environ.update(env)
    return f"{hdfs.uri}{STORE_PATH}"


def test_store_api_reads_hdfs_like_local(hdfs_uri, hdfs_store):
    with RocketStore.open(hdfs_store) as local, RocketStore.open(hdfs_uri) as remote:
        assert remote.topics() == local.topics()
        for topic in local.topics():
            for q in local.queue_ids(topic):
                assert [b.to_pylist() for b in remote.read_queue(topic, q)] == \
                       [b.to_pylist() for b in local.read_queue(topic, q)]


def test_cli_inspects_hdfs_like_local(hdfs_uri, hdfs_store):
    cli = [sys.executable, "-m", "rocketstore_spark.cli", "inspect", "--json"]
    local = subprocess.run([*cli, str(hdfs_store)], capture_output=True, text=True, check=True).stdout
    remote = subprocess.run([*cli, hdfs_uri], capture_output=True, text=True, check=True).stdout
    assert {k: json.loads(remote)[k] for k in ("topics", "sizes", "min_phy_offset")} == \
           {k: json.loads(local)[k] for k in ("topics", "sizes", "min_phy_offset")}


def test_spark_reads_hdfs_like_local(hdfs_uri, hdfs_store, spark):
    local = spark.read.format("rocketstore").load(str(hdfs_store)).drop("brokerName")
    remote = spark.read.format("rocketstore").load(hdfs_uri).drop("brokerName")
    assert sorted(map(tuple, remote.collect())) == sorted(map(tuple, local.collect()))
