"""Where SOURCE and OUTPUT live: a local path, or a URI on an object store or the Hub.

`s3://bucket/prefix/`, `gs://...`, `hf://datasets/owner/name/...`, `file://` and anything else
fsspec knows. A `Store` is such a location as an fsspec filesystem and a path on it, with the
operations a run needs (read, write, list, delete, copy, create-if-absent). It pickles as its
URI and options, so a worker process or a Ray task on another machine opens it again itself,
with that machine's credentials: credentials come from each system's usual environment and
config files, never from our own options; `storage_options` (`--storage-option KEY=VALUE`)
pass the rest through to the filesystem (an endpoint URL, a region, anonymous access).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

from transcript_clean.errors import TranscriptCleanError

__all__ = [
    "EXTRAS",
    "STORAGE_TIMEOUT",
    "StorageError",
    "Store",
    "Unreachable",
    "failure",
    "is_remote",
    "is_uri",
    "local_path",
    "open_store",
    "parse_storage_options",
]

log = logging.getLogger("transcript_clean")

_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")

EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
"""The package extra that brings each scheme's filesystem."""
_PACKAGES = {"s3": "s3fs", "gcs": "gcsfs"}


class StorageError(TranscriptCleanError):
    """A URI whose store cannot be reached: its filesystem is not installed, or it refused."""


class Unreachable(StorageError, OSError):
    """A store call that failed on the way: the endpoint down, answering errors, silent past
    the timeout, or offline. An `OSError` too, so that code tolerating a store's failures
    (`except OSError`) tolerates it; the CLI says it in one line, exit status 2."""


STORAGE_TIMEOUT = 10.0
"""Seconds a bucket call waits to connect, or for an answer, before it is tried again (three
tries in all): `--storage-option timeout=SECONDS`. Without one, botocore waits 60 s a try, and
s3fs tries five times, botocore's tries each: an endpoint that never answered held a run past
300 s (docs/ray.md)."""
ATTEMPTS = 3

# The packages whose exceptions are a store's or the network's failures, not this program's.
_NETWORK_PACKAGES = (
    "botocore", "aiobotocore", "aiohttp", "urllib3", "requests", "httpx", "s3fs", "gcsfs",
    "google", "huggingface_hub", "fsspec",
)  # fmt: skip


def failure(err: BaseException) -> str | None:
    """`err` in one line when it is a store's or the network's failure (its package one of
    theirs, or an `OSError` raised from one of them); None for anything else."""
    modules = [cls.__module__.split(".")[0] for cls in type(err).__mro__]
    if not any(module in _NETWORK_PACKAGES for module in modules):
        return None
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}"


def split_timeout(options: Mapping[str, Any]) -> tuple[float, dict[str, Any]]:
    """The `timeout` option (ours, in seconds; `STORAGE_TIMEOUT` when not given) and the
    options left for the filesystem."""
    rest = dict(options)
    given = rest.pop("timeout", STORAGE_TIMEOUT)
    try:
        timeout = float(given)
    except (TypeError, ValueError):
        timeout = -1.0
    if not timeout > 0:
        raise StorageError(f"--storage-option timeout={given}: give a number of seconds above 0")
    return timeout, rest


def is_uri(spec: str | Path) -> bool:
    return isinstance(spec, str) and _URI.match(spec) is not None


def scheme(spec: str) -> str:
    match = _URI.match(spec)
    return match[1].lower() if match else ""


def is_remote(spec: str | Path) -> bool:
    """A URI of anything but this machine's file system."""
    return is_uri(spec) and scheme(str(spec)) not in ("file", "local")


def local_path(spec: str | Path) -> Path:
    """`spec` as a local path: `file:///a/b` is `/a/b`."""
    if isinstance(spec, str) and scheme(spec) in ("file", "local"):
        return Path(spec[spec.index("://") + 3 :])
    return Path(spec)


def parse_storage_options(items: Iterable[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs as filesystem options: a VALUE that is JSON (`true`, `3`,
    `{"region_name": "eu-west-1"}`) is taken as such, anything else as a string."""
    options: dict[str, Any] = {}
    for item in items:
        key, equals, text = item.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"{item!r} is not KEY=VALUE")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        options[key.strip()] = value
    return options


def missing_extra(spec: str) -> str | None:
    """The install command for the extra `spec`'s scheme needs, when it is not installed."""
    extra = EXTRAS.get(scheme(spec))
    if extra is None:
        return None
    try:
        __import__(_PACKAGES[extra])
    except ImportError:
        return f"pip install 'transcript-clean[{extra}]'"
    return None


F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def _reaching(method: F) -> F:
    """A `Store` method whose failures on the way to the store (`failure`, or any `OSError`
    but a missing object's) are an `Unreachable` naming the store's URI, in one line."""

    @functools.wraps(method)
    def call(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (FileNotFoundError, FileExistsError, StorageError):
            raise
        except Exception as err:
            said = failure(err)
            if said is None and not isinstance(err, OSError):
                raise
            raise Unreachable(f"cannot reach {self.uri}: {said or err}") from None

    return cast(F, call)


class Store:
    """A folder on a filesystem: `uri` as given (no trailing `/`), `path` on the filesystem.
    Names passed to its methods are `/`-separated and relative to that folder."""

    def __init__(self, uri: str, options: Mapping[str, Any] | None = None) -> None:
        self.uri = uri
        self.options = dict(options or {})
        self._fs: Any = None
        self._path = ""

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "options": self.options}  # the filesystem is made again

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"], state["options"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Store({self.uri!r})"

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, made on first use in each process."""
        if self._fs is None:
            fs, path = _filesystem(self.uri, self.options)
            self._fs, self._path = fs, path.rstrip("/")
        return self._fs

    @property
    def path(self) -> str:
        self.fs  # noqa: B018  # made on first use, and the path with it
        return self._path

    def full(self, name: str = "") -> str:
        """The filesystem path of `name`."""
        return f"{self.path}/{name}" if name else self.path

    def url(self, name: str = "") -> str:
        """`name` as a URI, for messages."""
        return f"{self.uri}/{name}" if name else self.uri

    @_reaching
    def exists(self, name: str) -> bool:
        self.fs.invalidate_cache(self.full(name))  # another process may have written it
        return bool(self.fs.exists(self.full(name)))

    @_reaching
    def read_bytes(self, name: str) -> bytes:
        return bytes(self.fs.cat_file(self.full(name)))

    def read_with(self, name: str, read: Callable[[BinaryIO], T]) -> T:
        """`read` on the object `name`, opened for reading. A failure on the way to the store
        (opening it, or any read from it) is `Unreachable`; what `read` raises of its own (a
        `ValueError`, or an `OSError` such as a damaged gzip stream's, for a file it cannot
        parse) goes up as it is."""
        handle = _Reading(self._open(name), self.uri)
        try:
            return read(cast(BinaryIO, handle))
        except _ReadFailed as failed:
            raise Unreachable(f"cannot reach {self.uri}: {failed}") from None
        finally:
            with contextlib.suppress(Exception):  # a handle of a store that went away
                handle.close()

    @_reaching
    def _open(self, name: str) -> Any:
        return self.fs.open(self.full(name), "rb")

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode("utf-8")

    @_reaching
    def write_bytes(self, name: str, data: bytes) -> None:
        """Write an object whole: on an object store it appears complete, or not at all."""
        self.fs.pipe_file(self.full(name), data)

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    @_reaching
    def create(self, name: str, data: bytes) -> bool:
        """Write `name` only if it does not exist (`If-None-Match: *` on S3, a generation
        precondition on GCS, `O_EXCL` locally): False when it did."""
        try:
            with self.fs.open(self.full(name), "xb") as handle:
                handle.write(data)
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError):  # a filesystem without an exclusive create
            log.warning(
                "%s cannot create an object only if it is absent: its lock is not atomic, so "
                "do not start two runs on it at once",
                self.uri,
            )
            if self.exists(name):
                return False
            self.write_bytes(name, data)
        return True

    @_reaching
    def put(self, local: Path, name: str) -> None:
        """Upload the local file `local` as `name`."""
        self.fs.put_file(str(local), self.full(name))

    @_reaching
    def copy(self, name: str, to: str) -> None:
        """Copy `name` to `to`, on the server where it can."""
        self.fs.copy(self.full(name), self.full(to))

    @_reaching
    def files(self, prefix: str = "") -> list[str]:
        """The names of every object under `prefix`, sorted."""
        root = self.full(prefix)
        self.fs.invalidate_cache(root)
        try:
            found = self.fs.find(root)
        except FileNotFoundError:
            return []
        base = self.path + "/"
        return sorted(path[len(base) :] for path in found if path.startswith(base))

    @_reaching
    def delete(self, names: Iterable[str]) -> None:
        paths = [self.full(name) for name in names]
        if paths:
            self.fs.rm(paths)
            self.fs.invalidate_cache(self.path)

    @_reaching
    def modified(self, name: str) -> float | None:
        """When `name` was last written, as a POSIX time; None where the store does not say."""
        self.fs.invalidate_cache(self.full(name))  # a listing's, from before it was written
        try:
            return float(self.fs.modified(self.full(name)).timestamp())
        except (NotImplementedError, AttributeError, OSError, ValueError):
            return None


class _ReadFailed(Exception):
    """A read from a store's object that failed on the way (`Store.read_with`)."""


class _Reading:
    """An object opened for reading whose failures are told apart from its reader's: each read
    that fails is a `_ReadFailed`, which pyarrow, reading through it, gives back as it is."""

    def __init__(self, handle: Any, uri: str) -> None:
        self._handle = handle
        self._uri = uri

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._handle, method)(*args)
        except Exception as err:
            raise _ReadFailed(failure(err) or f"{type(err).__name__}: {err}") from err

    def read(self, *args: Any) -> Any:
        return self._call("read", *args)

    def readinto(self, *args: Any) -> Any:
        return self._call("readinto", *args)

    def readline(self, *args: Any) -> Any:
        return self._call("readline", *args)

    def seek(self, *args: Any) -> Any:
        return self._call("seek", *args)


def open_store(spec: str, options: Mapping[str, Any] | None = None) -> Store:
    """The store `spec` (a URI) names; its filesystem is made here, so that a missing extra or
    a bad option is said now. Raises `StorageError`."""
    store = Store(spec if spec.endswith("://") else spec.rstrip("/"), options)
    store.fs  # noqa: B018  # made now, to fail now
    return store


def _filesystem(uri: str, options: Mapping[str, Any]) -> tuple[Any, str]:
    hint = missing_extra(uri)
    if hint is not None:
        raise StorageError(f"{uri}: reading and writing {scheme(uri)}:// needs {hint}")
    import fsspec  # type: ignore[import-untyped]

    timeout, options = split_timeout(options)
    if scheme(uri) in ("file", "local"):  # folders are made as on an object store: implied
        options = {"auto_mkdir": True, **options}
    if scheme(uri) in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", timeout)
        config.setdefault("read_timeout", timeout)
        # s3fs tries a call again itself (five times by default, on top of botocore's own
        # tries): one botocore try each, and `ATTEMPTS` of s3fs's, bound the wait.
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        options = {**options, "config_kwargs": config}
    try:
        fs, path = fsspec.core.url_to_fs(uri, **options)
        if scheme(uri) in ("s3", "s3a"):
            fs.retries = ATTEMPTS
    except ImportError as exc:
        raise StorageError(f"{uri}: its filesystem is not installed ({exc})") from exc
    except (TypeError, ValueError, OSError) as exc:
        raise StorageError(f"cannot reach {uri}: {exc}") from exc
    return fs, str(path)


# Parquet is read through pyarrow's own S3 filesystem where it can: over the local S3 server,
# reading a 200,000-row file took 0.23-0.33 s through it, 0.53-0.54 s through s3fs (pyarrow's
# PyFileSystem over fsspec) and 0.20-0.26 s from a local disk (docs/ray.md). Writing, listing
# and the lock go through fsspec, which has the conditional create pyarrow lacks.
def arrow_filesystem(uri: str, options: Mapping[str, Any]) -> tuple[Any, str] | None:
    """pyarrow's filesystem for an `s3://` URI with these options and the path on it; None
    when pyarrow has no filesystem of its own for it or an option only fsspec knows."""
    import pyarrow.fs as pafs

    if scheme(uri) not in ("s3", "s3a"):
        return None
    timeout, options = split_timeout(options)
    settings: dict[str, Any] = {
        "connect_timeout": timeout,
        "request_timeout": timeout,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS),
    }
    for key, value in options.items():
        if key == "endpoint_url":
            endpoint = str(value)
            settings["scheme"] = "http" if endpoint.startswith("http://") else "https"
            settings["endpoint_override"] = endpoint.split("://", 1)[-1]
        elif key in ("region", "region_name"):
            settings["region"] = str(value)
        elif key == "anon":
            settings["anonymous"] = bool(value)
        else:
            return None
    path = uri[uri.index("://") + 3 :]
    if "region" not in settings and "endpoint_override" not in settings:
        settings["region"] = pafs.resolve_s3_region(path.split("/", 1)[0])
    return pafs.S3FileSystem(**settings), path
