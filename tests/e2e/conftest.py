"""Fixtures of the end-to-end tests (marker ``e2e``, run by ``make test-e2e``): a real Apache RocketMQ 5.3.3 name
server for the session, brokers per test, the Java-client harness, and the Spark session of the Spark tests.

The JVM jars come from ``make e2e-jars`` (``jars/pom.xml``); without them every test here fails saying so.
"""

import pytest

from tests.e2e.services import Broker, MiniHdfs, NameServer, ServiceError, classpath, run_harness
from tests.spark.conftest import spark  # noqa: F401 - the same local Spark session


def pytest_collection_modifyitems(items):
    for item in items:
        if "/tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def jvm_classpath():
    try:
        return classpath()
    except ServiceError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def namesrv(jvm_classpath, tmp_path_factory):
    server = NameServer(tmp_path_factory.mktemp("namesrv"))
    server.launch()
    yield server
    server.stop()


@pytest.fixture
def broker_factory(namesrv, tmp_path):
    """``broker_factory(store_dir, **config)`` → a started :class:`Broker` (``launch=False``: ports picked, not
    started yet); all are stopped after the test."""
    started = []

    def start(store_dir, name="broker-e2e", launch=True, **config):
        broker = Broker(namesrv, store_dir, tmp_path / f"{name}-{len(started)}", name=name, **config)
        started.append(broker)
        return broker.launch() if launch else broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def harness(namesrv, tmp_path):
    """``harness("produce", topic, 20)`` → the JSON lines of one harness command against the session's name server."""

    def run(command, *args, timeout=180):
        return run_harness(tmp_path / "harness", command, namesrv.addr, *args, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """A real HDFS (MiniDFSCluster) for the session."""
    try:
        classpath("hdfs-lib")
    except ServiceError as e:
        pytest.fail(str(e))
    server = MiniHdfs(tmp_path_factory.mktemp("hdfs"))
    server.launch()
    yield server
    server.stop()
