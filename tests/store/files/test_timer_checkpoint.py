"""``config/timercheck`` as a real 5.3.3 broker wrote it, and damaged or missing ones."""

import struct
import tarfile

import pytest

from rocketstore_spark.errors import StoreFormatError
from rocketstore_spark.store.files.timer_checkpoint import load_timer_checkpoint, parse_timer_checkpoint
from tests.store.read.test_special_topics import DATA


def test_the_broker_file(tmp_path):
    with tarfile.open(DATA / "special-topics-broker-5.3.3.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    assert (tmp_path / "config" / "timercheck").stat().st_size == 4096
    cp = load_timer_checkpoint(tmp_path)
    # the wheel had read all 20 entries of rmq_sys_wheel_timer (the far messages' rolls included)
    assert cp.last_timer_queue_offset == cp.master_timer_queue_offset == 20
    assert cp.last_read_time_ms % 1000 == 0 and cp.last_read_time_ms > 1_700_000_000_000
    assert cp.data_version_timestamp >= cp.last_read_time_ms - 60_000


def test_older_files_without_a_data_version():
    cp = parse_timer_checkpoint(struct.pack(">4q", 5000, 416, 8, 8), "timercheck")
    assert (cp.last_read_time_ms, cp.last_timer_log_flush_pos, cp.last_timer_queue_offset) == (5000, 416, 8)
    assert cp.data_version_counter == 0


def test_a_short_file_names_itself():
    with pytest.raises(StoreFormatError, match="four longs.*found 12") as e:
        parse_timer_checkpoint(bytes(12), "/s/config/timercheck")
    assert "/s/config/timercheck" in str(e.value)


def test_no_file(tmp_path):
    assert load_timer_checkpoint(tmp_path) is None
