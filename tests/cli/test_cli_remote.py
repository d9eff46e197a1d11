"""The CLI's read commands on a store on S3 and on GCS (the test servers) print what they print for the local copy."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import run

pytestmark = pytest.mark.remote  # a real S3-compatible server: `make test-remote`


@pytest.fixture(scope="module")
def s3_store(s3_server, golden_store_path):
    uri = s3_server.upload(golden_store_path, "rst", "cli-remote/broker-a/store")
    flags = ["--fs", f"endpoint={s3_server.endpoint}", "--fs", "scheme=http", "--fs", "anonymous=true",
             "--fs", "region=us-east-1"]
    return uri, flags


def same(text: str, uri: str, local) -> str:
    return text.replace(uri, "STORE").replace(str(local), "STORE")


def test_inspect_dump_query_verify_and_lag_print_the_same_from_s3(s3_store, golden_store_path, golden_view):
    uri, flags = s3_store
    inspected = json.loads(run("inspect", uri, "--json", *flags).stdout)
    local = json.loads(run("inspect", golden_store_path, "--json").stdout)
    for report in (inspected, local):
        report.pop("path")
        report.pop("disk_bytes")  # allocated blocks locally, object sizes remotely
        report["topic_table"].pop("path")
    assert inspected == local
    topic = next(t["topic"] for t in local["topics"] if not t["topic"].startswith(("%", "RMQ_SYS")))
    dumped = run("dump", uri, "--topic", topic, "--format", "jsonl", *flags).stdout
    assert dumped and dumped == run("dump", golden_store_path, "--topic", topic, "--format", "jsonl").stdout
    query = golden_view["queries"][0]
    found = run("query", uri, "--topic", query["topic"], "--key", query["key"], "--json", *flags).stdout
    assert found and found == run("query", golden_store_path, "--topic", query["topic"], "--key", query["key"],
                                  "--json").stdout
    checked = run("verify", uri, *flags, check=False)
    assert checked.returncode == run("verify", golden_store_path, check=False).returncode
    offsets = json.dumps({topic: {"0": 0}})
    assert same(run("lag", uri, "--offsets", offsets, *flags).stdout, uri, golden_store_path) == \
        same(run("lag", golden_store_path, "--offsets", offsets).stdout, uri, golden_store_path)


@pytest.mark.slow
def test_inspect_and_dump_print_the_same_from_gcs(gcs_server, golden_store_path):
    """The gcp-storage-emulator server: ``--fs`` as for S3, without a region."""
    uri = gcs_server.upload(golden_store_path, "rst", "cli-remote/broker-a/store")
    flags = ["--fs", f"endpoint=http://{gcs_server.endpoint}", "--fs", "anonymous=true"]
    inspected = json.loads(run("inspect", uri, "--json", *flags).stdout)
    local = json.loads(run("inspect", golden_store_path, "--json").stdout)
    for report in (inspected, local):
        report.pop("path")
        report.pop("disk_bytes")
        report["topic_table"].pop("path")
    assert inspected == local
    topic = next(t["topic"] for t in local["topics"] if not t["topic"].startswith(("%", "RMQ_SYS")))
    dumped = run("dump", uri, "--topic", topic, "--format", "jsonl", *flags).stdout
    assert dumped and dumped == run("dump", golden_store_path, "--topic", topic, "--format", "jsonl").stdout
