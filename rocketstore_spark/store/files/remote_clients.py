"""A remote store's filesystem options (:class:`FsOptions`), the ``pyarrow.fs`` client of each scheme built from
them, and where in that client's namespace a URI's authority lies.

pyarrow names an object ``bucket/key`` (S3, GCS), ``container/key`` (Azure) or ``/key`` (HDFS, and HDFS through
WebHDFS: :mod:`.webhdfs`); the URI's authority is the bucket for S3 and GCS, the NameNode for HDFS (its RPC port,
8020 by default) and WebHDFS (its HTTP port, 9870 by default, 9871 for ``swebhdfs://``), and for Azure one of::

    abfs://container@account.dfs.core.windows.net/path   (Hadoop's ABFS form; .blob. works too)
    abfs://account.dfs.core.windows.net/container/path   (the container is the first part of the path)
    abfs://container/path                                (the account from fs.accountName)

The account's host suffix (``core.windows.net``, or a sovereign cloud's) is kept unless ``fs.endpoint`` names
another server (Azurite: ``fs.endpoint=127.0.0.1:10000``, ``fs.scheme=http``). Secrets given as options are
checked here (an Azure account key that is not base64 aborts the Azure SDK's process) and never shown.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import NamedTuple, Optional

from ...errors import InvalidArgumentError, UnsupportedLocationError

S3_SCHEMES = ("s3", "s3a", "s3n")
GCS_SCHEMES = ("gs", "gcs")
HDFS_SCHEMES = ("hdfs", "viewfs")
WEBHDFS_SCHEMES = ("webhdfs", "swebhdfs")
NAMENODE_SCHEMES = HDFS_SCHEMES + WEBHDFS_SCHEMES  # names are absolute paths (/key), the authority a NameNode
AZURE_SCHEMES = ("abfs", "abfss")
REMOTE_SCHEMES = S3_SCHEMES + GCS_SCHEMES + HDFS_SCHEMES + WEBHDFS_SCHEMES + AZURE_SCHEMES

AZURE_SERVICES = ("dfs", "blob")  # the account host's service label: <account>.dfs.<suffix>, <account>.blob.<suffix>
SECRET_FIELDS = ("access_key", "secret_key", "session_token", "account_key")
SECRET_ENVIRONMENT = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY", "AZURE_CLIENT_SECRET")

DEFAULT_RETRIES = 4  # attempts after the first, for every request (the client's own retries come on top)
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class FsOptions:
    """Filesystem settings of a remote store: Spark options ``fs.<name>``, CLI ``--fs name=value``, the store
    API's ``fs_options={"name": value}``. Secrets never appear in ``repr`` (so in no log or error either)."""

    endpoint: Optional[str] = None  # host:port or URL of another server (MinIO, SeaweedFS, a GCS/Azure emulator)
    region: Optional[str] = None
    anonymous: bool = False  # unsigned requests (public buckets, test servers); S3 and GCS
    scheme: Optional[str] = None  # http or https for the endpoint (default: the endpoint URL's, else https)
    access_key: Optional[str] = field(default=None, repr=False)  # S3; prefer the environment / instance profile
    secret_key: Optional[str] = field(default=None, repr=False)
    session_token: Optional[str] = field(default=None, repr=False)
    account_name: Optional[str] = None  # Azure storage account, when the abfs:// URI does not name it
    account_key: Optional[str] = field(default=None, repr=False)  # Azure shared key; else the default chain
    user: Optional[str] = None  # HDFS user (WebHDFS's user.name); else HADOOP_USER_NAME, else the OS user
    retries: int = DEFAULT_RETRIES
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S  # seconds
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S  # seconds

    NAMES = {"endpoint": "endpoint", "region": "region", "anonymous": "anonymous", "scheme": "scheme",
             "accesskey": "access_key", "access_key": "access_key", "secretkey": "secret_key",
             "secret_key": "secret_key", "sessiontoken": "session_token", "session_token": "session_token",
             "retries": "retries", "connecttimeout": "connect_timeout", "connect_timeout": "connect_timeout",
             "requesttimeout": "request_timeout", "request_timeout": "request_timeout",
             "accountname": "account_name", "account_name": "account_name", "accountkey": "account_key",
             "account_key": "account_key", "user": "user"}

    @classmethod
    def parse(cls, given) -> FsOptions:
        """From a mapping of names (``endpoint`` or ``fs.endpoint``, camelCase or snake_case) to values (text
        from Spark and the CLI, or Python values); an unknown name or a bad value is an error naming it."""
        if isinstance(given, FsOptions):
            return given
        values = {}
        for key, value in (given or {}).items():
            name = key[3:] if key.lower().startswith("fs.") else key
            target = cls.NAMES.get(name.lower())
            if target is None:
                raise InvalidArgumentError(
                    f"unknown filesystem option {key!r}; expected one of fs.endpoint, fs.region, fs.anonymous, "
                    "fs.scheme, fs.accessKey, fs.secretKey, fs.sessionToken, fs.accountName, fs.accountKey, "
                    "fs.user, fs.retries, fs.connectTimeout, fs.requestTimeout")
            values[target] = _convert(key, target, value)
        options = cls(**values)
        if options.scheme not in (None, "http", "https"):
            raise InvalidArgumentError(f"fs.scheme must be http or https, found {options.scheme!r}")
        if (options.access_key is None) != (options.secret_key is None):
            raise InvalidArgumentError("pass fs.accessKey and fs.secretKey together (or neither, to use the "
                                       "standard credential chain)")
        return options

    def as_dict(self) -> dict:
        """The options as ``parse`` takes them (for partitions sent to executors)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if getattr(self, k) != getattr(FsOptions, k)}


def _convert(key: str, target: str, value):
    try:
        if target == "anonymous":
            if isinstance(value, str):
                if value.lower() not in ("true", "false"):
                    raise ValueError(value)
                return value.lower() == "true"
            return bool(value)
        if target == "retries":
            number = int(value)
            if number < 0:
                raise ValueError(value)
            return number
        if target in ("connect_timeout", "request_timeout"):
            number = float(value)
            if number <= 0:
                raise ValueError(value)
            return number
        return str(value)
    except (TypeError, ValueError) as e:
        shown = "***" if target in SECRET_FIELDS else repr(value)
        raise InvalidArgumentError(f"filesystem option {key} has a bad value {shown}") from e


class AzureLocation(NamedTuple):
    account: str
    container: str  # "" when the URI names the account's host: the path's first part is the container
    suffix: Optional[str]  # the account host's domain after the service label (core.windows.net), if named


def azure_location(authority: str, options: FsOptions) -> AzureLocation:
    """The account and container an ``abfs://`` authority names (see the module docstring)."""
    container, at, host = authority.rpartition("@")
    host = host.split(":", 1)[0]
    expected = ("expected abfs://<container>@<account>.dfs.core.windows.net/<path>, "
                "abfs://<account>.dfs.core.windows.net/<container>/<path> or abfs://<container>/<path> with "
                "fs.accountName")
    if "." in host:
        account, _, rest = host.partition(".")
        service, _, suffix = rest.partition(".")
        if service not in AZURE_SERVICES or not suffix or not account or (at and not container):
            raise InvalidArgumentError(f"abfs://{authority}: found host {host!r}; {expected}")
        if options.account_name and options.account_name != account:
            raise InvalidArgumentError(f"abfs://{authority} names account {account!r} but fs.accountName is "
                                       f"{options.account_name!r}; give one of them")
        return AzureLocation(account, container, suffix)
    if at:
        raise InvalidArgumentError(f"abfs://{authority}: found no account host after '@'; {expected}")
    if not options.account_name:
        raise InvalidArgumentError(f"abfs://{authority}: the URI names no storage account and fs.accountName is "
                                   f"not set; {expected}")
    return AzureLocation(options.account_name, host, None)


def bucket_root(scheme: str, authority: str, options: FsOptions) -> str:
    """What precedes a key in pyarrow's name of an object: the bucket, the Azure container ("" for an account
    URI, whose path starts with the container), or "" for HDFS (whose names are ``/key``)."""
    if scheme in HDFS_SCHEMES:
        return ""
    if scheme in AZURE_SCHEMES:
        return azure_location(authority, options).container
    return authority


def redacted(error: Exception, options: Optional[FsOptions] = None) -> str:
    """``error``'s text on one line with every secret of the options and of the credential environment masked."""
    text = " ".join(str(error).split())
    secrets = [os.environ.get(name) for name in SECRET_ENVIRONMENT]
    secrets += [getattr(options, name, None) for name in SECRET_FIELDS]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _endpoint(options: FsOptions) -> tuple[Optional[str], Optional[str]]:
    """(host:port, http/https) of ``fs.endpoint``, a URL's scheme standing in for a missing ``fs.scheme``."""
    endpoint, scheme = options.endpoint, options.scheme
    if endpoint and "://" in endpoint:
        given, endpoint = endpoint.split("://", 1)
        scheme = scheme or given
    return (endpoint.rstrip("/") if endpoint else None), scheme


def _check(scheme: str, authority: str, options: FsOptions) -> None:
    """Options that mean nothing to ``scheme``'s client are errors, not silently dropped credentials."""
    if scheme not in AZURE_SCHEMES and (options.account_name or options.account_key):
        raise InvalidArgumentError(f"fs.accountName and fs.accountKey are for abfs:// stores, not {scheme}://")
    if scheme not in NAMENODE_SCHEMES and options.user:
        raise InvalidArgumentError(f"fs.user is for hdfs:// and webhdfs:// stores, not {scheme}://")
    if scheme in NAMENODE_SCHEMES:
        given = [name for name, value in (("fs.endpoint", options.endpoint), ("fs.accessKey", options.access_key),
                                          ("fs.anonymous", options.anonymous), ("fs.region", options.region),
                                          ("fs.scheme", options.scheme)) if value]
        if given:
            raise InvalidArgumentError(
                f"{', '.join(given)} mean nothing to {scheme}:// (the URI names the NameNode; "
                f"{'swebhdfs:// is WebHDFS over TLS' if scheme in WEBHDFS_SCHEMES else 'the user is fs.user'})")
    if scheme in GCS_SCHEMES and options.access_key:
        raise InvalidArgumentError("gs:// takes no fs.accessKey/fs.secretKey: credentials come from Google's "
                                   "standard chain (GOOGLE_APPLICATION_CREDENTIALS, the metadata server), or pass "
                                   "fs.anonymous=true for public buckets and emulators")
    if scheme in AZURE_SCHEMES:
        if options.access_key:
            raise InvalidArgumentError("abfs:// takes the account key as fs.accountKey (and the account as "
                                       "fs.accountName or in the URI), not fs.accessKey/fs.secretKey")
        if options.anonymous:
            raise InvalidArgumentError("fs.anonymous is not supported for abfs://: pass fs.accountKey, or leave "
                                       "it out for Azure's default credential chain (environment, managed "
                                       "identity, Azure CLI)")
        if options.account_key:
            try:
                base64.b64decode(options.account_key, validate=True)
            except (binascii.Error, ValueError) as e:
                raise InvalidArgumentError("fs.accountKey is not base64 (an Azure storage account key is the "
                                           "base64 text the portal shows); found *** of "
                                           f"{len(options.account_key)} characters") from e


def connect(scheme: str, authority: str, options: FsOptions):
    """The pyarrow filesystem of ``scheme://authority`` (an error naming the location when it cannot be built)."""
    from pyarrow import fs as pafs

    _check(scheme, authority, options)
    location = azure_location(authority, options) if scheme in AZURE_SCHEMES else None
    endpoint, endpoint_scheme = _endpoint(options)
    try:
        if scheme in S3_SCHEMES:
            # unsigned test servers store aws-chunked upload bodies verbatim; reads are unaffected either way
            os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
            kwargs = dict(endpoint_override=endpoint, scheme=endpoint_scheme or "https", region=options.region,
                          anonymous=options.anonymous, connect_timeout=options.connect_timeout,
                          request_timeout=options.request_timeout,
                          retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=2))
            if options.access_key:
                kwargs.update(access_key=options.access_key, secret_key=options.secret_key,
                              session_token=options.session_token)
            if not options.region and not endpoint:
                kwargs["region"] = pafs.resolve_s3_region(authority)
            return pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None})
        if scheme in GCS_SCHEMES:
            kwargs = dict(anonymous=options.anonymous, endpoint_override=endpoint, scheme=endpoint_scheme,
                          retry_time_limit=timedelta(seconds=options.request_timeout))
            return pafs.GcsFileSystem(**{k: v for k, v in kwargs.items() if v is not None})
        if scheme in HDFS_SCHEMES:
            host, port = namenode_address(scheme, authority)
            return pafs.HadoopFileSystem(host, port, user=options.user)
        if scheme in WEBHDFS_SCHEMES:
            from .webhdfs import webhdfs_filesystem

            host, port = namenode_address(scheme, authority)
            return webhdfs_filesystem(host, port, tls=scheme == "swebhdfs", user=options.user,
                                      connect_timeout=options.connect_timeout,
                                      request_timeout=options.request_timeout)
        kwargs = dict(account_name=location.account, account_key=options.account_key)
        web = endpoint_scheme or "https"
        if endpoint:  # an emulator or a private endpoint: path-style URLs (http://host:port/<account>/<container>)
            kwargs.update(blob_storage_authority=endpoint, dfs_storage_authority=endpoint)
        elif location.suffix:
            kwargs.update(blob_storage_authority=f".blob.{location.suffix}",
                          dfs_storage_authority=f".dfs.{location.suffix}")
        kwargs.update(blob_storage_scheme=web, dfs_storage_scheme=web)
        return pafs.AzureFileSystem(**{k: v for k, v in kwargs.items() if v is not None})
    except (OSError, ValueError, ImportError, AttributeError) as e:
        if scheme in HDFS_SCHEMES:
            raise UnsupportedLocationError(hdfs_client_missing(scheme, authority, e)) from e
        raise UnsupportedLocationError(f"cannot reach {scheme}://{authority}: {redacted(e, options)}") from e


def namenode_address(scheme: str, authority: str) -> tuple[str, int]:
    """(host, port) of an ``hdfs://`` or ``webhdfs://`` authority; a missing port is the scheme's default (0 for
    ``hdfs://``: libhdfs takes the cluster's own configuration, fs.defaultFS)."""
    host, _, port = authority.rpartition("@")[2].partition(":")
    if port and not port.isdigit():
        raise InvalidArgumentError(f"{scheme}://{authority}: the port {port!r} is not a number")
    if scheme in WEBHDFS_SCHEMES:
        from .webhdfs import DEFAULT_HTTP_PORT, DEFAULT_HTTPS_PORT

        if not host:
            raise InvalidArgumentError(f"{scheme}://{authority}: expected {scheme}://<namenode>:<http port>/<path>")
        return host, int(port or (DEFAULT_HTTPS_PORT if scheme == "swebhdfs" else DEFAULT_HTTP_PORT))
    return host or "default", int(port or 0)


def hdfs_client_missing(scheme: str, authority: str, error: Exception) -> str:
    """Why pyarrow's ``HadoopFileSystem`` could not be built (its first line: the JVM or libhdfs.so it did not
    find), and what to do: install Hadoop's native client, or read the store through WebHDFS."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else type(error).__name__
    host = namenode_address(scheme, authority)[0]
    return (f"cannot reach {scheme}://{authority}: {first}. pyarrow's HDFS client needs a JVM (JAVA_HOME), "
            "Hadoop's native client libhdfs.so (ARROW_LIBHDFS_DIR or HADOOP_HOME/lib/native, from Hadoop's binary "
            "distribution) and Hadoop's jars (CLASSPATH, e.g. `hadoop classpath --glob`). Without them, read the "
            f"store through WebHDFS, which needs none: webhdfs://{host}:9870/<path> (the NameNode's HTTP port)")


__all__ = ["FsOptions", "REMOTE_SCHEMES", "S3_SCHEMES", "GCS_SCHEMES", "HDFS_SCHEMES", "WEBHDFS_SCHEMES",
           "NAMENODE_SCHEMES", "AZURE_SCHEMES", "azure_location", "bucket_root", "connect", "namenode_address",
           "redacted"]
