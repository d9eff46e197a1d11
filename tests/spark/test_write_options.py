"""Sink options parsed and checked once, on the driver (no Spark session needed)."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.write_options import parse_write_options


def test_flush_disk_type_defaults_to_the_brokers_async_flush(tmp_path):
    opts = parse_write_options({"path": str(tmp_path)}, False)
    assert opts.flush_disk_type == "ASYNC_FLUSH" and not opts.sync_flush
    assert parse_write_options({"path": str(tmp_path), "flushDiskType": "sync_flush"}, False).sync_flush


@pytest.mark.parametrize("options,message", [
    ({"flushDiskType": "NEVER"}, "flushDiskType must be one of"),
    ({"queueSelector": "random"}, "queueSelector must be one of"),
    ({"compressBody": "snappy"}, "compressBody must be one of"),
    ({"storeHost": "nohost"}, "storeHost must be"),
    ({"colour": "red"}, "colour"),
])
def test_bad_options_name_the_option_and_the_choices(tmp_path, options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        parse_write_options({"path": str(tmp_path), **options}, False)


def test_overwrite_needs_confirmation(tmp_path):
    with pytest.raises(InvalidArgumentError, match="overwrite"):
        parse_write_options({"path": str(tmp_path)}, True)
    assert parse_write_options({"path": str(tmp_path), "overwrite": "replace"}, True).path == str(tmp_path)


def test_a_remote_uri_fails_when_the_write_is_set_up_saying_why_and_what_to_do():
    from rocketstore_spark.errors import UnsupportedLocationError

    with pytest.raises(UnsupportedLocationError, match="POSIX record locks and atomic renames.*then copy"):
        parse_write_options({"path": "s3a://bucket/migrated/store"}, False)
