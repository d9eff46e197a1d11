"""A real GCS JSON-API server for the tests: ``gcp-storage-emulator`` (the test extra) in its own process on a free
loopback port, started and stopped by a session fixture (``conftest.py``); its log in a temporary directory.

It keeps the objects in memory: on disk it stores an object as a file of its name, so a directory-marker object
``a/b/`` (what pyarrow's ``create_dir`` and the Cloud console write) and an object ``a/b/c`` collide
(``FileExistsError`` in the server). The server is single-threaded and closes each connection after a request;
pyarrow's client (google-cloud-cpp) talks to it anonymously over plain HTTP.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tests.s3_server import LOOPBACK, free_ports, launch_server, stop_server, wait_until_serving

START_TIMEOUT_S = 60
PROJECT = "rocketstore-test"  # creating a bucket needs a project id; reading does not
# The emulator's server is http.server.HTTPServer: one request at a time, and a listen backlog of 5. The readers
# keep 8 ranged GETs in flight, so connections beyond the backlog were dropped and came back only with TCP's SYN
# retransmission (1 s, then 3 s): a queue read took 10 s instead of 0.2 s. Its requests are still served one at a
# time; only the backlog is raised, before the emulator's own command line runs.
LAUNCH = ("import sys, http.server; http.server.HTTPServer.request_queue_size = 128; "
          "from gcp_storage_emulator.__main__ import main; main(sys.argv[1:])")


@dataclass
class GcsServer:
    endpoint: str  # host:port
    process: subprocess.Popen
    log_path: Path

    def filesystem(self):
        """A pyarrow GCS filesystem on this server (anonymous, plain HTTP)."""
        from pyarrow import fs

        return fs.GcsFileSystem(anonymous=True, endpoint_override=self.endpoint, scheme="http", project_id=PROJECT,
                                retry_time_limit=timedelta(seconds=10))

    def options(self, **more) -> dict:
        """The store's ``fs_options`` for this server (short retries: a failing test fails fast)."""
        return {"endpoint": self.endpoint, "scheme": "http", "anonymous": True, "retries": 1, "request_timeout": 10,
                **more}

    def upload(self, local: Path, bucket: str, prefix: str, markers: bool = False) -> str:
        """Copy the directory ``local`` to ``gs://bucket/prefix``; returns that URI. As ``gcloud storage cp -r``
        does: one object per file and no directory objects, unless ``markers`` (pyarrow's ``copy_files``, which
        writes a ``dir/`` marker object for every directory)."""
        from pyarrow import fs

        gcs = self.filesystem()
        if gcs.get_file_info(bucket).type == fs.FileType.NotFound:
            gcs.create_dir(bucket)
        if markers:
            fs.copy_files(str(local), f"{bucket}/{prefix}", source_filesystem=fs.LocalFileSystem(),
                          destination_filesystem=gcs)
        else:
            for path in sorted(p for p in local.rglob("*") if p.is_file()):
                with gcs.open_output_stream(f"{bucket}/{prefix}/{path.relative_to(local).as_posix()}") as out:
                    out.write(path.read_bytes())
        return f"gs://{bucket}/{prefix}"

    def stop(self) -> None:
        stop_server(self.process)


def start_gcs_server(work_dir: Path) -> GcsServer:
    """Start the emulator (cwd and log in ``work_dir``) and wait until a bucket can be created."""
    work_dir.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    log_path = work_dir / "gcs-emulator.log"
    args = ["start", f"--host={LOOPBACK}", f"--port={port}", "--no-store-on-disk", "--quiet"]
    process = launch_server([sys.executable, "-c", LAUNCH, *args], log_path, cwd=work_dir)
    server = GcsServer(f"{LOOPBACK}:{port}", process, log_path)
    return wait_until_serving(server, "gcp-storage-emulator", START_TIMEOUT_S,
                              "; is it installed? `make test` installs the test extra")
