"""Real services for the end-to-end tests: Apache RocketMQ 5.3.3's name server and broker, and the JVM harness
driving RocketMQ's own Java client, all from the jars ``make e2e-jars`` resolves into ``jars/target``.

Every process runs with ``user.home`` pointing into its work directory, so RocketMQ's logs
(``<work>/logs/rocketmqlogs``) stay next to the process's own stdout/stderr log; a service that fails to start
raises :class:`ServiceError` naming the service and those logs.
"""

from __future__ import annotations

import getpass
import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JARS = REPO / "jars" / "target"
HARNESS_JAR = JARS / "rocketstore-e2e-harness-0.1.0.jar"
JAVA = os.environ.get("JAVA", "java")
HEAP = os.environ.get("ROCKETSTORE_E2E_HEAP", "-Xmx512m")
START_TIMEOUT = float(os.environ.get("ROCKETSTORE_E2E_START_TIMEOUT", "90"))
# the store sizes of the tests' brokers and of the stores the Spark sink writes for them
STORE_SIZES = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 5000,
               "maxIndexNum": 20000}
SINK_SIZE_OPTIONS = {"commitLogFileSize": str(1 << 20), "consumeQueueFileSize": "6000", "indexHashSlots": "5000",
                     "indexMaxEntries": "20000"}


class ServiceError(RuntimeError):
    pass


def classpath(lib: str = "lib") -> str:
    if not HARNESS_JAR.is_file() or not (JARS / lib).is_dir():
        target = "e2e-hdfs-jars" if lib == "hdfs-lib" else "e2e-jars"
        raise ServiceError(f"the JVM jars are missing ({JARS / lib}): run `make {target}` first")
    return f"{HARNESS_JAR}{os.pathsep}{JARS / lib}/*"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*neighbours: int) -> int:
    """A loopback port that is free together with ``port + d`` for each ``d`` in ``neighbours``."""
    for _ in range(200):
        port = random.randint(20000, 60000)
        if all(port_free(port + d) for d in (0, *neighbours)):
            return port
    raise ServiceError("no free loopback port found")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def jvm(main: str, args, work: Path, lib: str = "lib", heap: str = HEAP) -> list[str]:
    # C1 only: these JVMs live for seconds to minutes on a shared 2-core machine, start-up dominates
    return [JAVA, heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Duser.home={work}",
            "-Drocketmq.client.logUseSlf4j=false", "-cp", classpath(lib), main, *map(str, args)]


class Service:
    """One server process: started, waited for, stopped (SIGTERM as mqshutdown does, then SIGKILL)."""

    def __init__(self, name: str, work: Path):
        self.name, self.work = name, work
        self.log = work / f"{name}.out"
        self.proc = None

    def describe_logs(self) -> str:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return (f"its output is in {self.log}, RocketMQ's own logs in {self.work / 'logs' / 'rocketmqlogs'}"
                f"\n--- last output ---\n{tail}")

    def start(self, cmd, env=None) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.work,
                                         env={**os.environ, **(env or {})}, start_new_session=True)

    def wait_until(self, ready, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"{self.name} exited with status {self.proc.returncode} before {what}; "
                                   + self.describe_logs())
            if ready():
                return
            time.sleep(0.3)
        self.stop()
        raise ServiceError(f"{self.name} did not start within {timeout:.0f} s ({what}); " + self.describe_logs())

    def stop(self, timeout: float = 60) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the JVM's shutdown hooks flush and close the store
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class NameServer(Service):
    """RocketMQ's name server (``NamesrvStartup -c namesrv.conf``) on a free loopback port."""

    def __init__(self, work: Path):
        super().__init__("namesrv", Path(work))
        self.port = free_port()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> "NameServer":
        self.work.mkdir(parents=True, exist_ok=True)
        conf = self.work / "namesrv.conf"
        conf.write_text(f"listenPort={self.port}\n")
        self.start(jvm("org.apache.rocketmq.namesrv.NamesrvStartup", ["-c", conf], self.work),
                   {"ROCKETMQ_HOME": str(self.work)})
        self.wait_until(lambda: port_open(self.port) and "boot success" in self.output(),
                        f"listening on {self.addr}")
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Broker(Service):
    """A master broker (``BrokerStartup -c broker.conf``) serving ``store_dir``, registered with ``namesrv``."""

    cluster = "e2e-cluster"

    def __init__(self, namesrv: NameServer, store_dir: Path, work: Path, name: str = "broker-e2e", **config):
        super().__init__("broker", Path(work))
        self.namesrv, self.store_dir, self.broker_name = namesrv, Path(store_dir), name
        self.extra = config
        self.port = free_port(-2, 1)  # the broker also listens on port-2 (fast channel) and port+1 (HA)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def config(self) -> dict:
        return {
            "brokerClusterName": self.cluster, "brokerName": self.broker_name, "brokerId": 0,
            "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": self.namesrv.addr, "brokerIP1": "127.0.0.1", "listenPort": self.port,
            "haListenPort": self.port + 1,
            "storePathRootDir": self.store_dir, "storePathCommitLog": self.store_dir / "commitlog",
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true",
            "diskMaxUsedSpaceRatio": 95, "deleteWhen": "04", "fileReservedTime": 480,
            **STORE_SIZES, **self.extra,
        }

    def launch(self) -> "Broker":
        self.work.mkdir(parents=True, exist_ok=True)
        conf = self.work / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.config().items()))
        self.start(jvm("org.apache.rocketmq.broker.BrokerStartup", ["-c", conf], self.work),
                   {"ROCKETMQ_HOME": str(self.work)})
        self.wait_until(lambda: port_open(self.port) and "boot success" in self.output(), f"listening on {self.addr}")
        # registered: the name server lists it (the registration can lag "boot success" on a busy machine)
        deadline, names = time.monotonic() + START_TIMEOUT, []
        while self.broker_name not in names:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise ServiceError(f"broker {self.broker_name} did not register with the name server "
                                   f"{self.namesrv.addr} within {START_TIMEOUT:.0f} s (it lists {names}); "
                                   + self.describe_logs())
            time.sleep(1)
            names = [b.get("brokerName") for b in run_harness(self.work / "harness", "brokers", self.namesrv.addr)]
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self):
        return self.launch()

    def __exit__(self, *exc):
        self.stop()


def run_harness(work: Path, *args, timeout: float = 180) -> list[dict]:
    """Runs one harness command; returns its JSON lines."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "harness.err"
    try:
        done = subprocess.run(jvm("org.rocketstore.e2e.Harness", args, work, heap="-Xmx256m"),
                              capture_output=True, text=True, timeout=timeout, cwd=work)
    except subprocess.TimeoutExpired as e:
        raise ServiceError(f"harness {' '.join(map(str, args))} timed out after {timeout} s") from e
    with open(log, "a") as err:
        err.write(f"$ harness {' '.join(map(str, args))}\n{done.stderr}\n")
    if done.returncode != 0:
        raise ServiceError(f"harness {' '.join(map(str, args))} failed ({done.returncode}); stderr in {log}:\n"
                           + done.stderr[-3000:])
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


class MiniHdfs(Service):
    """A real HDFS: Hadoop's MiniDFSCluster (NameNode and one DataNode in one JVM) through its command-line driver
    ``org.apache.hadoop.test.MiniDFSClusterManager``, from the jars ``make e2e-hdfs-jars`` copies into
    ``jars/target/hdfs-lib``. WebHDFS is served on the NameNode's HTTP port."""

    def __init__(self, work: Path):
        super().__init__("hdfs", Path(work))
        self.port = free_port()
        self.http_port = free_port()
        self.details = self.work / "details.json"

    @property
    def uri(self) -> str:
        return f"hdfs://127.0.0.1:{self.port}"

    def launch(self) -> "MiniHdfs":
        self.work.mkdir(parents=True, exist_ok=True)
        args = ["-datanodes", 1, "-nnport", self.port, "-httpport", self.http_port, "-format",
                "-D", f"hdfs.minidfs.basedir={self.work / 'data'}", "-writeDetails", self.details]
        self.start(jvm("org.apache.hadoop.test.MiniDFSClusterManager", args, self.work, lib="hdfs-lib"))
        self.wait_until(lambda: self.details.exists() and port_open(self.http_port),
                        f"NameNode on {self.uri}, WebHDFS on port {self.http_port}")
        return self

    def webhdfs(self, method: str, path: str, op: str, data: bytes = None, **params):
        """One WebHDFS REST call (redirects to the DataNode followed); returns the response body."""
        import urllib.parse
        import urllib.request

        # the OS user that runs the NameNode is HDFS's superuser
        query = urllib.parse.urlencode({"op": op, "user.name": getpass.getuser(), **params})
        url = f"http://127.0.0.1:{self.http_port}/webhdfs/v1{urllib.parse.quote(path)}?{query}"
        for _ in range(3):
            req = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/octet-stream"})
            opener = urllib.request.build_opener(_NoRedirect)
            try:
                with opener.open(req, timeout=60) as resp:
                    return resp.read()
            except urllib.error.HTTPError as e:
                if e.code in (301, 302, 307):
                    url = e.headers["Location"].replace("localhost", "127.0.0.1")
                    continue
                raise ServiceError(f"WebHDFS {op} {path}: HTTP {e.code} {e.read()[:500]!r}") from e
        raise ServiceError(f"WebHDFS {op} {path}: too many redirects")

    def put_tree(self, local: Path, remote: str) -> int:
        """Copies a local directory tree into HDFS through WebHDFS; returns the number of files."""
        count = 0
        for path in sorted(Path(local).rglob("*")):
            target = f"{remote}/{path.relative_to(local).as_posix()}"
            if path.is_dir():
                self.webhdfs("PUT", target, "MKDIRS")
            else:
                self.webhdfs("PUT", target, "CREATE", data=path.read_bytes(), overwrite="true")
                count += 1
        return count


def _no_redirect_handler():
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    return NoRedirect


_NoRedirect = _no_redirect_handler()
