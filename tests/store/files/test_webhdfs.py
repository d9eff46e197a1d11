"""webhdfs:// and hdfs:// locations without a server: NameNode addresses and their default ports, the options each
takes, what hdfs:// says when pyarrow's HDFS client cannot load, and a WebHDFS port where nothing listens. Reads
against a real HDFS (MiniDFSCluster): ``tests/e2e/test_hdfs.py``."""

import socket

import pytest

from rocketstore_spark.errors import InvalidArgumentError, RemoteReadError, UnsupportedLocationError
from rocketstore_spark.store import FsOptions, RocketStore
from rocketstore_spark.store.files.remote_clients import namenode_address
from rocketstore_spark.store.files.webhdfs import WebHdfsClient, default_user


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheme, authority, expected", [
    ("webhdfs", "nn.example.com", ("nn.example.com", 9870)),
    ("swebhdfs", "nn.example.com", ("nn.example.com", 9871)),
    ("webhdfs", "10.0.0.5:50070", ("10.0.0.5", 50070)),
    ("hdfs", "nn:8020", ("nn", 8020)),
    ("hdfs", "nn", ("nn", 0)),  # libhdfs: the cluster's own configuration (fs.defaultFS) gives the port
])
def test_namenode_addresses_and_their_default_ports(scheme, authority, expected):
    assert namenode_address(scheme, authority) == expected


def test_a_bad_namenode_port_is_refused():
    with pytest.raises(InvalidArgumentError, match="the port 'http' is not a number"):
        namenode_address("webhdfs", "nn:http")


def test_the_hdfs_user_is_an_option_of_the_hdfs_schemes_only(monkeypatch):
    assert FsOptions.parse({"fs.user": "etl"}).user == "etl"
    assert FsOptions.parse({"user": "etl"}).as_dict() == {"user": "etl"}
    with pytest.raises(InvalidArgumentError, match="fs.user is for hdfs:// and webhdfs:// stores, not s3://"):
        RocketStore.open("s3://bucket/store", fs_options={"user": "etl", "endpoint": "127.0.0.1:1"})
    with pytest.raises(InvalidArgumentError, match="fs.endpoint, fs.anonymous mean nothing to webhdfs://"):
        RocketStore.open("webhdfs://nn:9870/store", fs_options={"endpoint": "x:1", "anonymous": "true"})
    monkeypatch.setenv("HADOOP_USER_NAME", "hadoop-etl")
    assert default_user() == "hadoop-etl" and WebHdfsClient("nn", 9870).user == "hadoop-etl"
    assert WebHdfsClient("nn", 9870, user="etl").user == "etl"


def test_hdfs_without_libhdfs_says_to_use_webhdfs(tmp_path, monkeypatch):
    # directories without libjvm.so and libhdfs.so: pyarrow's HadoopFileSystem cannot load
    monkeypatch.setenv("ARROW_LIBHDFS_DIR", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(UnsupportedLocationError) as err:
        RocketStore.open("hdfs://nn.example.com:8020/archive/store")
    message = str(err.value)
    # pyarrow's first error: "Unable to load libjvm/libhdfs"; later ones in the process: "Prior attempt ... failed"
    assert message.startswith("cannot reach hdfs://nn.example.com:8020: ") and "load lib" in message
    assert "libhdfs.so (ARROW_LIBHDFS_DIR" in message and "webhdfs://nn.example.com:9870/<path>" in message
    assert "\n" not in message  # the first line of pyarrow's error, not its list of every path it tried


def test_a_webhdfs_port_without_a_namenode_is_an_error_naming_it():
    port = closed_port()
    with pytest.raises(ConnectionError, match=f"cannot connect to WebHDFS at http://127.0.0.1:{port}.*9870"):
        WebHdfsClient("127.0.0.1", port, connect_timeout=2).status("/store")
    with pytest.raises(RemoteReadError, match=f"reading webhdfs://127.0.0.1:{port}/store failed after 1 attempt"):
        RocketStore.open(f"webhdfs://127.0.0.1:{port}/store", fs_options={"retries": 0})
