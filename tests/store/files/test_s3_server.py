"""The S3 server the remote-store tests use is real and faithful: a store uploaded to it reads back byte for byte
through pyarrow's S3 filesystem (whole objects, ranges, listings), and a missing object is an error."""

import hashlib

import pytest
from pyarrow import fs


def test_an_uploaded_store_reads_back_byte_for_byte(s3_server, golden_store_path):
    uri = s3_server.upload(golden_store_path, "golden", "public-a/store")
    assert uri == "s3://golden/public-a/store"
    s3 = s3_server.filesystem()
    local = {p.relative_to(golden_store_path).as_posix(): p for p in golden_store_path.rglob("*") if p.is_file()}
    listed = {i.path.removeprefix("golden/public-a/store/"): i.size
              for i in s3.get_file_info(fs.FileSelector("golden/public-a/store", recursive=True))
              if i.type == fs.FileType.File}
    assert listed == {name: path.stat().st_size for name, path in local.items()}
    commitlog = sorted(n for n in local if n.startswith("commitlog/"))[0]
    with s3.open_input_file(f"golden/public-a/store/{commitlog}") as remote:
        data = local[commitlog].read_bytes()
        assert remote.read_at(len(data) - 8192, 4096) == data[4096:-4096]  # (nbytes, offset)
        assert hashlib.sha256(remote.read_at(len(data), 0)).digest() == hashlib.sha256(data).digest()
    with pytest.raises(FileNotFoundError):
        s3.open_input_file("golden/public-a/store/no-such-file")
