"""A Spark standalone cluster (master + two workers on 127.0.0.1, from the pyspark installation itself):
executors in their own processes read and write a store through the shared filesystem."""

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyspark
import pytest

SPARK_HOME = Path(pyspark.__file__).parent
pytestmark = [pytest.mark.product, pytest.mark.spark]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    logs = tmp_path_factory.mktemp("cluster-logs")
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(logs / "work"))
    hidden = tmp_path_factory.mktemp("hidden-from-executors")
    port, ui = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env,
                              stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)]
    wait_port(port)
    url = f"spark://127.0.0.1:{port}"
    for i in range(2):
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores",
                  "1", "--memory", "1g", "--webui-port", str(free_port())]
        # each worker lives in its own mount namespace where `hidden` is an empty tmpfs: a directory the
        # driver sees and the executors do not, like a store on a disk only the driver's machine mounts
        command = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{hidden}" && exec "$@"', "worker"] + worker
        procs.append(subprocess.Popen(command, env=env, stdout=open(logs / f"worker{i}.log", "w"),
                                      stderr=subprocess.STDOUT))
    time.sleep(6)
    yield url, env, hidden
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=30)


JOB = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession, functions as F
    master, store, out = sys.argv[1:4]
    spark = (SparkSession.builder.master(master).appName("rocketstore-cluster-test")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", "2").config("spark.pyspark.python", sys.executable).getOrCreate())
    import time
    deadline = time.time() + 60
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < 2 and time.time() < deadline:
        time.sleep(0.5)  # executors register with the driver asynchronously
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    df = spark.read.format("rocketstore").load(store)
    n = df.count()
    # a small store is one task by default: four asked for, spread over both executors
    spread = spark.read.format("rocketstore").option("minPartitions", "4").load(store)
    pids = spread.rdd.mapPartitions(lambda _: [os.getpid()]).distinct().count()
    df.where("topic = 'orders'").write.format("rocketstore").mode("append").save(out)
    back = spark.read.format("rocketstore").load(out).count()
    orders = df.where("topic = 'orders'").count()
    print(f"RESULT executors={executors} rows={n} pids={pids} written={back} orders={orders}", flush=True)
    spark.stop()
""")


def test_read_and_write_on_a_standalone_cluster(cluster, sample_store, tmp_path):
    url, env, _hidden = cluster
    out = subprocess.run([sys.executable, "-c", JOB, url, str(sample_store), str(tmp_path / "copy")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    fields = dict(kv.split("=") for kv in line.split()[1:])
    assert int(fields["executors"]) == 2
    assert int(fields["rows"]) == 3000
    assert int(fields["pids"]) >= 2  # partitions really ran in separate executor processes
    assert int(fields["written"]) == int(fields["orders"]) > 0


def test_an_executor_that_cannot_see_the_store_names_path_and_host(cluster, sample_store):
    import shutil

    url, env, hidden = cluster
    store = hidden / "store"
    shutil.copytree(sample_store, store)
    job = textwrap.dedent(f"""
        import sys
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master({url!r}).config("spark.pyspark.python", sys.executable)
                 .config("spark.task.maxFailures", "1").config("spark.cores.max", "2").getOrCreate())
        spark.read.format("rocketstore").load({str(store)!r}).count()
    """)
    out = subprocess.run([sys.executable, "-c", job], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    assert str(store) in out.stderr and "not visible on executor host" in out.stderr
