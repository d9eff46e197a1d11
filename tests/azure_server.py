"""A real Azure Blob Storage server for the (slow) abfs:// tests: Microsoft's Azurite emulator, from npm, on a free
loopback port with its data in a temporary directory, started and stopped by a session fixture (``conftest.py``).

Azurite is no Python package: ``make azurite`` installs it into ``<venv>/azurite`` with npm, and the fixture runs
that target when it is missing (a clear failure when npm or its registry is not there). Its telemetry is off.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.s3_server import LOOPBACK, free_ports, launch_server, stop_server, wait_until_serving

START_TIMEOUT_S = 60
REPO = Path(__file__).resolve().parents[1]
# Azurite's documented development account and key (public: they work against Azurite only)
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_binary() -> Path:
    """``azurite-blob`` in ``<venv>/azurite``, installed with ``make azurite`` first when it is missing."""
    venv = Path(sys.prefix)
    binary = venv / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        done = subprocess.run(["make", "-C", str(REPO), "azurite", f"VENV={venv}"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)
        if done.returncode != 0 or not binary.exists():
            raise RuntimeError(f"Azurite is missing and `make azurite VENV={venv}` could not install it (it needs "
                               f"npm and the npm registry):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return binary


@dataclass
class AzureServer:
    endpoint: str  # host:port of the blob service
    process: subprocess.Popen
    log_path: Path

    def filesystem(self, account_key: str = ACCOUNT_KEY):
        """A pyarrow Azure filesystem on this server (the development account, plain HTTP)."""
        from pyarrow import fs

        return fs.AzureFileSystem(account_name=ACCOUNT, account_key=account_key, blob_storage_authority=self.endpoint,
                                  blob_storage_scheme="http", dfs_storage_authority=self.endpoint,
                                  dfs_storage_scheme="http")

    def options(self, **more) -> dict:
        """The store's ``fs_options`` for this server; the account comes from the URI or ``accountName``."""
        return {"endpoint": self.endpoint, "scheme": "http", "accountKey": ACCOUNT_KEY, "retries": 1, **more}

    def upload(self, local: Path, container: str, prefix: str) -> str:
        """Copy the directory ``local`` to the container; returns its Hadoop-style URI
        ``abfs://container@devstoreaccount1.dfs.core.windows.net/prefix``."""
        from pyarrow import fs

        azure = self.filesystem()
        azure.create_dir(container)
        fs.copy_files(str(local), f"{container}/{prefix}", source_filesystem=fs.LocalFileSystem(),
                      destination_filesystem=azure)
        return f"abfs://{container}@{ACCOUNT}.dfs.core.windows.net/{prefix}"

    def stop(self) -> None:
        stop_server(self.process)


def start_azure_server(data_dir: Path) -> AzureServer:
    """Start ``azurite-blob`` with its data in ``data_dir`` and wait until a container can be created."""
    binary = azurite_binary()
    data_dir.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    log_path = data_dir / "azurite.log"
    process = launch_server([str(binary), "--blobHost", LOOPBACK, "--blobPort", str(port), "--location",
                             str(data_dir), "--silent", "--skipApiVersionCheck", "--loose", "--disableTelemetry"],
                            log_path, cwd=data_dir)
    server = AzureServer(f"{LOOPBACK}:{port}", process, log_path)
    return wait_until_serving(server, "Azurite", START_TIMEOUT_S)
