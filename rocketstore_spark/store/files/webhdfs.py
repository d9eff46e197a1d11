"""WebHDFS, HDFS's REST interface on the NameNode's HTTP port, as a ``pyarrow`` filesystem: what
``webhdfs://namenode:9870/path`` (``swebhdfs://``: over TLS) stores are read through. It needs nothing but
Python: no JVM, no Hadoop installation, no ``libhdfs.so`` (which ``hdfs://`` needs through pyarrow's
``HadoopFileSystem``).

Three operations are used, each one HTTP request on a kept-alive connection (one per thread and server):

* ``GETFILESTATUS`` (a path's type, size and modification time) and ``LISTSTATUS`` (a directory's entries) on
  the NameNode; a recursive listing asks for each directory of one level in parallel;
* ``OPEN`` with ``offset`` and ``length``: the NameNode answers with a redirect (307) to a DataNode holding the
  block, which sends exactly those bytes. The DataNode's address is kept for that block of that file (block sizes
  come from the listings): a later read inside the same block goes to it directly, one request instead of two
  (should it fail, the read asks the NameNode again). Reads fetch no more than asked for, never a whole file.

Simple authentication only: every request carries ``user.name`` (``fs.user``, else ``HADOOP_USER_NAME``, else
the OS user, as Hadoop's own clients do). A cluster secured by Kerberos (SPNEGO) answers 401, which is an error
saying so. The server's ``RemoteException`` becomes ``FileNotFoundError``, ``PermissionError`` or ``OSError``
with the server's message, which :class:`~.remote_fs.RemoteFilesystem` turns into the store's errors.
"""

from __future__ import annotations

import getpass
import http.client
import io
import json
import os
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pyarrow as pa
from pyarrow import fs as pafs

DEFAULT_HTTP_PORT = 9870  # dfs.namenode.http-address's port (Hadoop 3)
DEFAULT_HTTPS_PORT = 9871  # dfs.namenode.https-address's port
API_PREFIX = "/webhdfs/v1"
LIST_THREADS = 8  # directories of one level listed at once by a recursive listing
MAX_REDIRECTS = 3
# what a request on a kept-alive connection that the server closed meanwhile fails with: sent again on a new one
_STALE_CONNECTION = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError,
                     BrokenPipeError)


def default_user() -> str:
    """The user WebHDFS's simple authentication names: ``HADOOP_USER_NAME``, else the OS user."""
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class WebHdfsClient:
    """The NameNode at ``host:port`` over HTTP (or HTTPS with ``tls``): file status, listings and ranged reads."""

    def __init__(self, host: str, port: int, *, tls: bool = False, user: Optional[str] = None,
                 connect_timeout: float = 5.0, request_timeout: float = 30.0):
        self.host, self.port, self.tls = host, port, tls
        self.user = user or default_user()
        self.connect_timeout, self.request_timeout = connect_timeout, request_timeout
        self._local = threading.local()  # this thread's kept-alive connections by (https, host, port)
        self._block_sizes: dict[str, int] = {}  # a file's HDFS block size (blockSize), from its status
        # (file, block number) -> the DataNode URL (scheme, host, port, path, query pairs less offset and length)
        # the NameNode redirected a read of that block to
        self._datanodes: dict[tuple[str, int], tuple] = {}

    @property
    def address(self) -> str:
        return f"{'swebhdfs' if self.tls else 'webhdfs'}://{self.host}:{self.port}"

    def status(self, path: str) -> Optional[dict]:
        """``path``'s FileStatus (``type`` FILE or DIRECTORY, ``length``, ``modificationTime`` in ms), or None
        when it does not exist."""
        try:
            status = json.loads(self._call(path, "GETFILESTATUS"))["FileStatus"]
        except FileNotFoundError:
            return None
        self._note_block_size(path, status)
        return status

    def list(self, path: str) -> list[dict]:
        """The FileStatus of each entry of directory ``path`` (``pathSuffix`` its name); FileNotFoundError when
        ``path`` does not exist."""
        statuses = json.loads(self._call(path, "LISTSTATUS"))["FileStatuses"]["FileStatus"]
        for status in statuses:
            self._note_block_size(f"{path.rstrip('/')}/{status.get('pathSuffix', '')}", status)
        return statuses

    def _note_block_size(self, path: str, status: dict) -> None:
        if status.get("type") == "FILE" and int(status.get("blockSize") or 0) > 0:
            self._block_sizes[path] = int(status["blockSize"])

    def read(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of file ``path`` from ``offset`` (fewer at the end of the file)."""
        if length <= 0:
            return b""
        block_size = self._block_sizes.get(path)
        block = offset // block_size if block_size and offset // block_size == (offset + length - 1) // block_size \
            else None  # a read that spans blocks asks the NameNode each time
        datanode = self._datanodes.get((path, block)) if block is not None else None
        if datanode is not None:
            scheme, host, port, target, pairs = datanode
            query = urlencode([*pairs, ("offset", offset), ("length", length)])
            try:
                status, _, body = self._request(scheme, host, port, f"{target}?{query}")
                if status == 200:
                    return body
            except OSError:
                pass
            self._datanodes.pop((path, block), None)  # gone, or the block moved: ask the NameNode again
        body, (scheme, host, port, target) = self._call_at(path, "OPEN", offset=offset, length=length)
        if block is not None and (host, port) != (self.host, self.port):
            location = urlsplit(target)
            pairs = tuple((k, v) for k, v in parse_qsl(location.query) if k not in ("offset", "length"))
            self._datanodes[(path, block)] = (scheme, host, port, location.path, pairs)
        return body

    def _call(self, path: str, op: str, **params) -> bytes:
        return self._call_at(path, op, **params)[0]

    def _call_at(self, path: str, op: str, **params) -> tuple[bytes, tuple]:
        """The body of ``op``'s answer, and the URL (scheme, host, port, path and query) that gave it: the
        NameNode's, or the DataNode's it redirected to."""
        query = urlencode({"op": op, "user.name": self.user, **params})
        url = ("https" if self.tls else "http", self.host, self.port, f"{API_PREFIX}{quote(path)}?{query}")
        for _ in range(MAX_REDIRECTS + 1):
            status, headers, body = self._request(*url)
            if status in (301, 302, 303, 307, 308):  # OPEN: to the DataNode that holds the block
                target = urlsplit(headers.get("location", ""))
                if not target.hostname:
                    raise OSError(f"WebHDFS {op} {path} at {self.address}: redirect without a location")
                https = target.scheme == "https"
                url = ("https" if https else "http", target.hostname, target.port or (443 if https else 80),
                       target.path + (f"?{target.query}" if target.query else ""))
                continue
            if status >= 300:
                raise _remote_error(status, body, op, path, self.address, self.user)
            return body, url
        raise OSError(f"WebHDFS {op} {path} at {self.address}: more than {MAX_REDIRECTS} redirects")

    def _request(self, scheme: str, host: str, port: int, target: str) -> tuple[int, dict, bytes]:
        """One GET on this thread's kept-alive connection to ``host:port`` (a fresh one when the server closed
        it meanwhile); returns (status, headers by lower-case name, body)."""
        if not hasattr(self._local, "connections"):
            self._local.connections = {}
        connections, key = self._local.connections, (scheme, host, port)
        while True:
            connection = connections.pop(key, None)
            reused = connection is not None
            if connection is None:
                connection = self._connect(scheme, host, port)
            try:
                connection.request("GET", target)
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as e:
                connection.close()
                if reused and isinstance(e, _STALE_CONNECTION):
                    continue  # the server closed the kept-alive connection: once more on a new one
                raise OSError(f"WebHDFS request to {scheme}://{host}:{port} failed: {type(e).__name__}: {e}") from e
            if response.will_close:
                connection.close()
            else:
                connections[key] = connection
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body

    def _connect(self, scheme: str, host: str, port: int) -> http.client.HTTPConnection:
        if scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=self.connect_timeout,
                                                     context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self.connect_timeout)
        try:
            connection.connect()
        except OSError as e:
            hint = ("is it the NameNode's HTTP port, dfs.namenode.http-address, 9870 by default?"
                    if (host, port) == (self.host, self.port) else
                    "the DataNode the NameNode redirected the read to: is its HTTP address reachable from here?")
            raise ConnectionError(f"cannot connect to WebHDFS at {scheme}://{host}:{port}: {e} ({hint})") from e
        connection.sock.settimeout(self.request_timeout)
        return connection


def _remote_error(status: int, body: bytes, op: str, path: str, address: str, user: str) -> OSError:
    """The exception of an error answer: the server's RemoteException (Java class and message) when it sent one."""
    try:
        remote = json.loads(body)["RemoteException"]
        exception, message = remote.get("exception", ""), remote.get("message", "")
    except (ValueError, KeyError, TypeError):
        exception, message = "", body[:300].decode("utf-8", "replace")
    text = f"WebHDFS {op} {path} at {address}: HTTP {status} {exception}: {' '.join(message.split())}"
    if status == 404 or exception == "FileNotFoundException":
        return FileNotFoundError(2, text, path)
    if status == 401:
        return PermissionError(f"{text} (the cluster wants Kerberos authentication, which webhdfs:// does not "
                               "offer: read it through hdfs:// with Hadoop's native client)")
    if status == 403 or exception in ("AccessControlException", "SecurityException"):
        return PermissionError(f"{text} (permission denied to user {user!r}: set fs.user to a user allowed to read "
                               "the store)")
    return OSError(text)


class WebHdfsFile(io.RawIOBase):
    """A file read through WebHDFS: each ``read`` is one ranged ``OPEN`` from the current position."""

    def __init__(self, client: WebHdfsClient, path: str, size: Optional[int] = None):
        super().__init__()
        self._client, self._path, self._size, self._pos = client, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        if self._size is None:
            status = self._client.status(self._path)
            if status is None:
                raise FileNotFoundError(2, f"{self._client.address}{self._path} does not exist", self._path)
            self._size = int(status["length"])
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos}.get(whence)
        self._pos = max((self.size() if base is None else base) + offset, 0)
        return self._pos

    def read(self, size: int = -1) -> bytes:
        length = self.size() - self._pos if size is None or size < 0 else size
        data = self._client.read(self._path, self._pos, length)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        memoryview(buffer).cast("B")[:len(data)] = data
        return len(data)


class WebHdfsHandler(pafs.FileSystemHandler):
    """The read side of ``pyarrow.fs.FileSystemHandler`` over a :class:`WebHdfsClient` (wrap it in
    ``pyarrow.fs.PyFileSystem``); paths are absolute HDFS paths (``/key``). Writing is refused: remote stores
    are read-only for rocketstore."""

    def __init__(self, client: WebHdfsClient):
        self.client = client

    def __eq__(self, other):
        return isinstance(other, WebHdfsHandler) and other.client is self.client

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return id(self.client)

    def get_type_name(self) -> str:
        return "webhdfs"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other) -> bool:
        return self == other

    def get_file_info(self, paths):
        return [_file_info(path, self.client.status(path)) for path in paths]

    def get_file_info_selector(self, selector):
        base = selector.base_dir.rstrip("/") or "/"
        try:
            level = [(base, self.client.list(base))]
        except FileNotFoundError:
            if selector.allow_not_found:
                return []
            raise
        infos = []
        with ThreadPoolExecutor(LIST_THREADS) as pool:
            while level:
                children = []
                for parent, statuses in level:
                    for status in statuses:
                        info = _file_info(f"{parent.rstrip('/')}/{status['pathSuffix']}", status)
                        infos.append(info)
                        if selector.recursive and info.type == pafs.FileType.Directory:
                            children.append(info.path)
                level = list(zip(children, pool.map(self.client.list, children)))
        return infos

    def open_input_file(self, path: str):
        return pa.PythonFile(WebHdfsFile(self.client, path), mode="r")

    def open_input_stream(self, path: str):
        return self.open_input_file(path)

    def _read_only(self, *args, **kwargs):
        raise OSError(f"{self.client.address}: remote stores are read-only for rocketstore")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


def _file_info(path: str, status: Optional[dict]):
    if status is None:
        return pafs.FileInfo(path, pafs.FileType.NotFound)
    mtime_ns = int(status.get("modificationTime", 0)) * 1_000_000
    if status.get("type") == "DIRECTORY":
        return pafs.FileInfo(path, pafs.FileType.Directory, mtime_ns=mtime_ns)
    return pafs.FileInfo(path, pafs.FileType.File, size=int(status.get("length", 0)), mtime_ns=mtime_ns)


def webhdfs_filesystem(host: str, port: int, *, tls: bool, user: Optional[str], connect_timeout: float,
                       request_timeout: float):
    """A ``pyarrow.fs.PyFileSystem`` reading the HDFS whose NameNode serves WebHDFS at ``host:port``."""
    client = WebHdfsClient(host, port, tls=tls, user=user, connect_timeout=connect_timeout,
                           request_timeout=request_timeout)
    return pafs.PyFileSystem(WebHdfsHandler(client))


__all__ = ["WebHdfsClient", "WebHdfsFile", "WebHdfsHandler", "webhdfs_filesystem", "default_user",
           "DEFAULT_HTTP_PORT", "DEFAULT_HTTPS_PORT"]
