"""The storage layer: which specs are URIs, storage options, a store's operations (on this
machine's file system through `file://`), missing extras, the Hub up to the network, and what
the Ray engine says of a local OUTPUT on a cluster."""

from __future__ import annotations

import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace

import pytest
from sources_helpers import go_offline
from test_run import make_dataset

from transcript_clean.engine.ray import _warn_if_cluster
from transcript_clean.errors import OutputError, SourceError
from transcript_clean.run import clean
from transcript_clean.sources import open_source
from transcript_clean.storage import (
    StorageError,
    is_remote,
    is_uri,
    local_path,
    open_store,
    parse_storage_options,
)


@pytest.mark.parametrize(
    ("spec", "uri", "remote"),
    [
        ("s3://bucket/out/", True, True),
        ("gs://bucket/out", True, True),
        ("hf://datasets/owner/name/data/*.parquet", True, True),
        ("file:///tmp/out", True, False),
        ("/tmp/out", False, False),
        ("out", False, False),
        ("owner/name", False, False),
    ],
)
def test_which_specs_are_uris_and_which_are_remote(spec: str, uri: bool, remote: bool) -> None:
    assert (is_uri(spec), is_remote(spec)) == (uri, remote)


def test_a_file_uri_is_a_local_path() -> None:
    assert local_path("file:///tmp/out") == Path("/tmp/out")
    assert local_path("out") == Path("out")


def test_storage_options_take_json_values_and_strings() -> None:
    given = ["endpoint_url=http://127.0.0.1:9000", "anon=true", 'client_kwargs={"a": 1}']
    assert parse_storage_options(given) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "anon": True,
        "client_kwargs": {"a": 1},
    }
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_storage_options(["endpoint_url"])


def test_a_store_writes_lists_copies_and_creates_only_once(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/out/")
    store.write_text("a/one.txt", "1")
    store.copy("a/one.txt", "b/two.txt")
    assert store.files() == ["a/one.txt", "b/two.txt"]
    assert store.read_text("b/two.txt") == "1"
    assert store.create("lock", b"me") and not store.create("lock", b"other")
    assert store.read_bytes("lock") == b"me"
    store.delete(["a/one.txt", "lock"])
    assert store.files() == ["b/two.txt"] and not store.exists("lock")
    again = pickle.loads(pickle.dumps(store))  # as a worker gets it: the filesystem made anew
    assert again.uri == store.uri and again.read_text("b/two.txt") == "1"


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gcsfs", None)
    with pytest.raises(StorageError, match=r"pip install 'transcript-clean\[gcs\]'"):
        open_store("gs://bucket/out")
    source = tmp_path / "in.parquet"
    make_dataset(source, 5, "openai")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=r"transcript-clean\[gcs\]"):
        clean(source, "gs://bucket/out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]  # no local gs: folder


def test_a_hub_uri_goes_as_far_as_the_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`hf://` is read through huggingface_hub's HfFileSystem: offline, it stops where it would
    have asked the Hub for the dataset, with a SourceError naming the URI."""
    go_offline(monkeypatch, tmp_path)
    for spec in ("hf://datasets/owner/name/data/*.parquet", "hf://datasets/owner/name/data/"):
        with pytest.raises(SourceError, match=r"cannot list hf://datasets/owner/name/.*offline"):
            open_source(spec)


def test_ray_says_before_it_starts_that_a_cluster_needs_a_shared_output(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = SimpleNamespace(is_initialized=lambda: False)
    with caplog.at_level(logging.WARNING, logger="transcript_clean"):
        _warn_if_cluster(ray, tmp_path, None)
        _warn_if_cluster(ray, tmp_path, "local")
        assert caplog.records == []  # a Ray of this machine sees its disk
        _warn_if_cluster(ray, tmp_path, "10.0.0.5:6379")
    assert "shared filesystem" in caplog.text and str(tmp_path) in caplog.text
    assert "s3://" in caplog.text
    caplog.clear()
    nodes = [{"Alive": True}, {"Alive": True}]
    joined = SimpleNamespace(is_initialized=lambda: True, nodes=lambda: nodes)
    with caplog.at_level(logging.WARNING, logger="transcript_clean"):
        _warn_if_cluster(joined, tmp_path, None)
    assert "with 2 nodes" in caplog.text


def test_a_file_uri_output_is_a_local_folder(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")
    result = clean(source, f"file://{tmp_path}/out")
    assert result.output == tmp_path / "out"
    assert (tmp_path / "out" / "summary.json").is_file()
    assert not (tmp_path / "out" / "_SUCCESS").exists()  # a local OUTPUT commits by a rename


@contextmanager
def endpoint(kind: str) -> Iterator[str]:
    """An S3 endpoint on 127.0.0.1 that refuses connections, answers 503 to every request, or
    accepts and never answers; it stops with the block."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    if kind == "refuses":
        server.close()
        yield f"http://127.0.0.1:{port}"
        return
    server.listen(64)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:  # the accept's timeout: look at `stop` again
                continue
            if kind == "503":
                conn.settimeout(5)
                with suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )
                conn.close()
            else:
                held.append(conn)  # never answered

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("kind", ["refuses", "503", "never-answers"])
def test_a_bucket_that_cannot_be_reached_is_one_line_and_soon(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 5, "openai")
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
    }  # fmt: skip
    with endpoint(kind) as url:
        given = ["--storage-option", f"endpoint_url={url}", "--storage-option", "timeout=1"]
        for args, named in (
            (["clean", str(source), "s3://bucket/out"], "s3://bucket/out"),
            (["audit", "s3://bucket/in.parquet"], "s3://bucket/in.parquet"),
        ):
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "transcript_clean", *args, *given, "--quiet"],
                capture_output=True, text=True, timeout=90, env=env, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 2, done.stderr[-500:]
            assert "Traceback" not in done.stderr
            assert named in done.stderr and len(done.stderr.strip().splitlines()) == 1
            assert time.monotonic() - started < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_gs_without_gcsfs_fails_at_once_naming_the_extra(tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['gcsfs'] = None\nfrom transcript_clean.cli import entry\n"
    code = blocked + "sys.argv = ['transcript-clean', 'audit', 'gs://bucket/x.parquet']\nentry()\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env
    )
    assert done.returncode == 2, done.stderr[-500:]
    assert "pip install 'transcript-clean[gcs]'" in done.stderr
    assert time.monotonic() - started < 20


def test_an_output_on_the_hub_offline_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from transcript_clean.cli import main

    go_offline(monkeypatch, tmp_path)
    source = tmp_path / "in.parquet"
    make_dataset(source, 5, "openai")
    result = CliRunner().invoke(main, ["clean", str(source), "hf://datasets/owner/name/out"])
    assert result.exit_code == 2, result.output
    assert "hf://datasets/owner/name/out" in result.output and "offline" in result.output
