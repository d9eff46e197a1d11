"""Writable windows: a file range allocated on disk, then mapped."""

import ctypes
import errno
import os

import numpy as np
import pytest

from rocketstore_spark.store.files import writable_window
from rocketstore_spark.store.files.writable_window import WritableWindow, allocate


def test_a_window_stores_at_file_offsets_and_keeps_the_rest_of_the_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 20_000)
    fd = os.open(path, os.O_RDWR)
    try:
        with WritableWindow.open(fd, 5_000, 12_000, path) as window:  # begins inside a page
            window.write(5_000, b"head")
            window.write(11_996, np.frombuffer(b"tail", np.uint8))
            with pytest.raises(ValueError, match="outside the window"):
                window.write(11_998, b"tail")
            with pytest.raises(ValueError, match="outside the window"):
                window.write(4_999, b"ab")
        window.close()  # twice is fine
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert data[5_000:5_004] == b"head" and data[11_996:12_000] == b"tail"
    assert data[:5_000] == b"x" * 5_000 and data[12_000:] == b"x" * 8_000 and data[5_004:11_996] == b"x" * 6_992


def test_allocating_gives_a_sparse_range_blocks_and_keeps_its_bytes(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 1 << 20)
        os.pwrite(fd, b"kept", 4096)
        before = os.fstat(fd).st_blocks
        assert allocate(fd, 0, 1 << 20, path)
        assert os.fstat(fd).st_blocks > before
        assert os.pread(fd, 4, 4096) == b"kept" and os.fstat(fd).st_size == 1 << 20
    finally:
        os.close(fd)


def test_a_filesystem_that_cannot_allocate_gets_no_window_and_a_full_disk_is_an_error(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"\0" * 8192)
    code = {"errno": errno.EOPNOTSUPP}

    def refusing(fd, mode, offset, length):
        ctypes.set_errno(code["errno"])
        return -1

    monkeypatch.setattr(writable_window, "_FALLOCATE", refusing)
    fd = os.open(path, os.O_RDWR)
    try:
        assert WritableWindow.open(fd, 0, 8192, path) is None
        code["errno"] = errno.ENOSPC
        with pytest.raises(OSError) as caught:
            WritableWindow.open(fd, 0, 8192, path)
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    finally:
        os.close(fd)
