"""df.write.format("rocketstore") on a size-limited tmpfs: a disk already full, and one that fills up while the
driver publishes the staged job. The job fails saying the disk is full, the store is as before, and after space is
freed ``rocketstore recover`` and a next write work."""

from __future__ import annotations

import os
import shutil

import pytest
from typer.testing import CliRunner

from rocketstore_spark.cli.app import app
from rocketstore_spark.store import RocketStore
from tests.store.write.test_disk_full import SIZE_ARGS, SIZES, bodies, fill, free_bytes, size_limited_fs, store_digest
from tests.store.write.test_writer import messages

OPTIONS = {"commitLogFileSize": str(SIZES["commit_log_file_size"]),
           "consumeQueueFileSize": str(SIZES["consume_queue_file_size"]),
           "indexHashSlots": str(SIZES["index_hash_slots"]), "indexMaxEntries": str(SIZES["index_max_entries"])}
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def small_fs(tmp_path):
    with size_limited_fs(tmp_path / "fs") as directory:
        yield directory


def base(fs, name):
    root = fs / name
    with RocketStore.open_writer(root, **SIZES) as w:
        w.append(messages(300))
    return root


def job_frame(spark):
    table = messages(400, start=300)
    rows = list(zip(*(table.column(c).to_pylist() for c in ("topic", "queueId", "body", "tags", "keys"))))
    return spark.createDataFrame(rows, "topic string, queueId int, body binary, tags string, keys array<string>") \
        .repartition(2)


def write(df, root):
    w = df.write.format("rocketstore").mode("append")
    for k, v in OPTIONS.items():
        w = w.option(k, v)
    w.save(str(root))


def fails_and_recovers(spark, fs, root, leave):
    before, expected = store_digest(root), bodies(root)
    df = job_frame(spark)
    filler = fill(fs, leave)
    with pytest.raises(Exception, match="disk is full") as caught:
        write(df, root)
    assert "DiskFullError" in str(caught.value) and "rocketstore" in str(caught.value)
    assert store_digest(root) == before  # Spark aborted the job: its staging is gone too
    filler.unlink()
    result = CliRunner().invoke(app, ["recover", str(root), *SIZE_ARGS])
    assert result.exit_code == 0, result.output
    assert store_digest(root) == before and bodies(root) == expected
    write(df, root)  # with room again the same job goes through
    assert bodies(root) == expected + messages(400, start=300).column("body").to_pylist() or \
        sorted(bodies(root)) == sorted(expected + messages(400, start=300).column("body").to_pylist())
    return str(caught.value)


def test_a_spark_write_to_a_full_disk_fails_cleanly(spark, small_fs):
    fails_and_recovers(spark, small_fs, base(small_fs, "full"), 0)


@pytest.mark.slow
def test_a_spark_write_whose_publication_fills_the_disk_fails_cleanly(spark, small_fs):
    dry = base(small_fs, "dry")
    start = free_bytes(small_fs)
    write(job_frame(spark), dry)
    grew = start - free_bytes(small_fs)  # what the published job occupies: its staging took less
    shutil.rmtree(dry)
    message = fails_and_recovers(spark, small_fs, base(small_fs, "store"), grew - 3 * PAGE)
    assert "staged records" not in message  # staging went through; the driver's publication hit the full disk
