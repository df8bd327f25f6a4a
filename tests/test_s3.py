"""SOURCE and OUTPUT in a bucket on a real S3 server on localhost (moto's, started here): the
same bytes as a local run, resume after a kill, overwrite, the lock, and audit baselines."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from s3_helpers import CREDENTIALS, bucket_digests, comparable, folder_digests, s3
from test_run import make_dataset

from transcript_clean.audit import audit
from transcript_clean.audit.baseline import BaselineError, load_baseline
from transcript_clean.cli import main
from transcript_clean.errors import OutputError
from transcript_clean.remote_output import LOCK, SUCCESS, TEMPORARY, store_lock
from transcript_clean.run import clean
from transcript_clean.storage import open_store


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3 server on localhost: moto's `ThreadedMotoServer`, the S3 protocol over HTTP in a
    thread of the test process (no network)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the local server, as `s3://name`; the credentials and endpoint
    are in the environment, where subprocesses and Ray workers find them too."""
    import s3fs  # type: ignore[import-untyped]

    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True).mkdir(name)
    return f"s3://{name}"


def upload_dataset(endpoint: str, tmp_path: Path, uri: str, rows: int, seed: int = 0) -> Path:
    """A generated dataset written locally and uploaded to `uri/in/part.parquet`."""
    local = tmp_path / "in" / "part.parquet"
    local.parent.mkdir()
    make_dataset(local, rows, "openai", seed=seed)
    s3(endpoint).put_file(str(local), f"{uri.removeprefix('s3://')}/in/part.parquet")  # type: ignore[attr-defined]
    return local


def options(endpoint: str) -> dict[str, object]:
    return {"storage_options": {"endpoint_url": endpoint}}


def test_a_clean_run_into_a_bucket_writes_what_a_local_run_does(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    local = upload_dataset(s3_endpoint, tmp_path, bucket, 300)
    result = clean(f"{bucket}/in/", f"{bucket}/out", rows_per_shard=120, **options(s3_endpoint))
    assert result.output == f"{bucket}/out" and result.stats.rows_in == 300
    # The same SOURCE into a local folder: every file the same, byte for byte.
    clean(f"{bucket}/in/", tmp_path / "same-source", rows_per_shard=120, **options(s3_endpoint))
    written = bucket_digests(s3_endpoint, f"{bucket}/out")
    assert comparable(written) == comparable(folder_digests(tmp_path / "same-source"))
    assert SUCCESS in written and "summary.json" in written
    assert not any(name.startswith(TEMPORARY) for name in written)
    # The local-path run: the same kept shards; rejects name their source as given.
    clean(local, tmp_path / "local", rows_per_shard=120)
    local_data = {k: v for k, v in folder_digests(tmp_path / "local").items() if "data/" in k}
    assert {k: v for k, v in written.items() if k.startswith("data/")} == local_data
    bucket_rejects = pq.read_table(
        f"{bucket.removeprefix('s3://')}/out/rejects", filesystem=s3(s3_endpoint)
    ).drop_columns(["_source"])
    local_rejects = pq.read_table(tmp_path / "local" / "rejects").drop_columns(["_source"])
    assert bucket_rejects.equals(local_rejects)


def test_an_s3_output_never_becomes_a_local_folder(
    s3_endpoint: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["clean", str(source), f"{bucket}/out/", "--quiet"]
    given = ["--storage-option", f"endpoint_url={s3_endpoint}"]
    result = runner.invoke(main, [*args, *given])
    assert result.exit_code == 0, result.output
    assert SUCCESS in bucket_digests(s3_endpoint, f"{bucket}/out")
    # Without s3fs, a clear error naming the extra, and still nothing local.
    monkeypatch.setitem(sys.modules, "s3fs", None)
    result = runner.invoke(main, [*args, "--overwrite", *given])
    assert result.exit_code == 2
    assert "pip install 'transcript-clean[s3]'" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_a_full_output_is_refused_and_overwrite_replaces_it_whole(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 300)
    clean(f"{bucket}/in/", f"{bucket}/out", rows_per_shard=50, **options(s3_endpoint))
    assert len([n for n in bucket_digests(s3_endpoint, f"{bucket}/out") if "data/" in n]) == 6
    with pytest.raises(OutputError, match="exists and is not empty: pass overwrite=True"):
        clean(f"{bucket}/in/", f"{bucket}/out", **options(s3_endpoint))
    clean(f"{bucket}/in/", f"{bucket}/out", overwrite=True, **options(s3_endpoint))
    clean(f"{bucket}/in/", tmp_path / "local", **options(s3_endpoint))
    written = bucket_digests(s3_endpoint, f"{bucket}/out")
    # nothing of the first run's six shards is left
    assert comparable(written) == comparable(folder_digests(tmp_path / "local"))
    assert sorted(n for n in written if "data/" in n) == ["data/part-00000.parquet"]


def test_a_killed_run_is_not_complete_and_resume_finishes_it_identically(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 2_000, seed=3)
    command = [
        sys.executable, "-m", "transcript_clean", "clean", f"{bucket}/in/", f"{bucket}/out",
        "--rows-per-shard", "50", "--quiet", "--storage-option", f"endpoint_url={s3_endpoint}",
    ]  # fmt: skip
    run = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    store = open_store(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if len(store.files(f"{TEMPORARY}/blocks")) >= 3:
            break
        time.sleep(0.05)
    assert run.poll() is None, "the run finished before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()

    names = store.files()
    assert LOCK in names and SUCCESS not in names
    with pytest.raises(BaselineError, match="not complete"):
        load_baseline(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    with pytest.raises(OutputError, match="did not finish: pass resume=True"):
        clean(f"{bucket}/in/", f"{bucket}/out", rows_per_shard=50, **options(s3_endpoint))

    result = clean(
        f"{bucket}/in/", f"{bucket}/out", rows_per_shard=50, resume=True, **options(s3_endpoint)
    )  # the lock of the killed run, a process of this machine that is gone, is taken over
    assert result.stats.rows_in == 2_000
    clean(f"{bucket}/in/", tmp_path / "whole", rows_per_shard=50, **options(s3_endpoint))
    written = bucket_digests(s3_endpoint, f"{bucket}/out")
    assert comparable(written) == comparable(folder_digests(tmp_path / "whole"))
    assert not any(name.startswith(TEMPORARY) for name in written)


def test_a_second_run_is_told_who_holds_the_lock(s3_endpoint: str, bucket: str) -> None:
    store = open_store(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    refused = rf"another run .* \(pid {os.getpid()} on .*started"
    with store_lock(store), pytest.raises(OutputError, match=refused), store_lock(store):
        pass
    assert not store.exists(LOCK) or store.files() == [LOCK]  # left only by a run's end


def test_audit_against_a_baseline_in_the_bucket(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 300)
    clean(f"{bucket}/in/", f"{bucket}/out", config="strict", **options(s3_endpoint))
    found = load_baseline(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    assert found.path == f"{bucket}/out/summary.json" and found.rows_in == 300
    result = audit(
        f"{bucket}/in/",
        config="strict",
        baseline=f"{bucket}/out",
        max_drift=0.0,
        **options(s3_endpoint),
    )
    assert result.drift is not None and all(d.change == 0 for d in result.drift)
    assert not result.failed
    # The audit's own stats into the bucket, and read back as a baseline.
    audit(f"{bucket}/in/", config="strict", stats_out=f"{bucket}/stats", **options(s3_endpoint))
    again = load_baseline(f"{bucket}/stats", {"endpoint_url": s3_endpoint})
    assert again.shares == found.shares
    with pytest.raises(OutputError, match=r"already holds stats\.parquet"):
        audit(f"{bucket}/in/", stats_out=f"{bucket}/stats", **options(s3_endpoint))
    with pytest.raises(BaselineError, match="no such file or folder"):
        load_baseline(f"{bucket}/nothing/summary.json", {"endpoint_url": s3_endpoint})


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
def test_the_ray_engine_with_source_and_output_in_the_bucket(
    s3_endpoint: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "ray" in os.environ.get("TEST_EXTRAS", "").split(","):
        import ray  # noqa: F401  # CI installed the extra: a missing Ray is a failure here
    else:
        pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra")
    upload_dataset(s3_endpoint, tmp_path, bucket, 300)
    clean(f"{bucket}/in/", f"{bucket}/local", rows_per_shard=100, **options(s3_endpoint))
    # The driver works in a folder of its own, which no worker is given: every shard reaches
    # OUTPUT through the bucket.
    driver = tmp_path / "driver"
    driver.mkdir()
    monkeypatch.chdir(driver)
    result = clean(
        f"{bucket}/in/",
        f"{bucket}/ray",
        rows_per_shard=100,
        engine="ray",
        **options(s3_endpoint),
    )
    assert result.stats.rows_in == 300
    assert list(driver.iterdir()) == []
    ray_run = bucket_digests(s3_endpoint, f"{bucket}/ray")
    assert comparable(ray_run) == comparable(bucket_digests(s3_endpoint, f"{bucket}/local"))
    assert SUCCESS in ray_run
    summary = json.loads(s3(s3_endpoint).cat_file(f"{bucket[5:]}/ray/summary.json"))  # type: ignore[attr-defined]
    assert summary["engine"] == "ray"


def test_explain_reads_a_row_of_a_bucket(s3_endpoint: str, bucket: str, tmp_path: Path) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 30)
    result = CliRunner().invoke(
        main,
        [
            "explain",
            f"{bucket}/in/",
            "--row",
            "3",
            "--storage-option",
            f"endpoint_url={s3_endpoint}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "row 3" in result.output


def test_worker_processes_upload_their_own_blocks(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 400)
    clean(f"{bucket}/in/", f"{bucket}/two", rows_per_shard=50, workers=2, **options(s3_endpoint))
    clean(f"{bucket}/in/", tmp_path / "one", rows_per_shard=50, **options(s3_endpoint))
    written = bucket_digests(s3_endpoint, f"{bucket}/two")
    assert comparable(written) == comparable(folder_digests(tmp_path / "one"))
    assert len([name for name in written if name.startswith("data/")]) == 8


def test_overwrite_replaces_only_an_earlier_runs_output_in_a_bucket(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 30)
    fs = s3(s3_endpoint)
    theirs = f"{bucket.removeprefix('s3://')}/mine/thesis.tex"
    fs.pipe_file(theirs, b"years of work")  # type: ignore[attr-defined]
    with pytest.raises(OutputError, match="does not look like the OUTPUT of an earlier run"):
        clean(f"{bucket}/in/", f"{bucket}/mine", overwrite=True, **options(s3_endpoint))
    assert fs.cat_file(theirs) == b"years of work"  # type: ignore[attr-defined]
    assert bucket_digests(s3_endpoint, f"{bucket}/mine") == {
        "thesis.tex": bucket_digests(s3_endpoint, f"{bucket}/mine")["thesis.tex"]
    }


def test_resume_on_a_complete_output_leaves_nothing_behind(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 30)
    clean(f"{bucket}/in/", f"{bucket}/out", **options(s3_endpoint))
    before = bucket_digests(s3_endpoint, f"{bucket}/out")
    with pytest.raises(OutputError, match="exists and is not empty"):
        clean(f"{bucket}/in/", f"{bucket}/out", resume=True, **options(s3_endpoint))
    assert bucket_digests(s3_endpoint, f"{bucket}/out") == before  # no _temporary/run.json


@pytest.mark.parametrize("pid", [10**30, -1, 0, True])
def test_a_lock_with_a_pid_no_process_has_is_held_not_a_traceback(
    s3_endpoint: str, bucket: str, tmp_path: Path, pid: object
) -> None:
    import socket

    upload_dataset(s3_endpoint, tmp_path, bucket, 10)
    lock = {"pid": pid, "host": socket.gethostname(), "started": "2026-12-01T03:00:00Z"}
    fs = s3(s3_endpoint)
    fs.pipe_file(f"{bucket.removeprefix('s3://')}/out/{LOCK}", json.dumps(lock).encode())  # type: ignore[attr-defined]
    # Fresh, and not a process's of this machine: held (until it is 5 minutes old), not
    # OverflowError, nor taken for this process group's (0, -1) or for pid 1 (True).
    with pytest.raises(OutputError, match="another run is writing OUTPUT"):
        clean(f"{bucket}/in/", f"{bucket}/out", **options(s3_endpoint))


def _without_timings(name: str, data: bytes) -> bytes:
    """A finished run's file with its timings taken out: summary.json's seconds and rows per
    second (the card quotes neither)."""
    if name != "summary.json":
        return data
    summary = json.loads(data)
    for key in ("seconds", "rows_per_second"):
        summary.pop(key)
    return json.dumps(summary, sort_keys=True).encode()


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_a_bucket_output_holds_the_files_and_bytes_of_a_local_one(
    s3_endpoint: str, bucket: str, tmp_path: Path, output_format: str
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 200)
    given = {"rows_per_shard": 80, "output_format": output_format, **options(s3_endpoint)}
    clean(f"{bucket}/in/", f"{bucket}/out", **given)  # type: ignore[arg-type]
    clean(f"{bucket}/in/", tmp_path / "local", **given)  # type: ignore[arg-type]
    fs = s3(s3_endpoint)
    root = f"{bucket.removeprefix('s3://')}/out"
    stored = {
        name: _without_timings(name, fs.cat_file(f"{root}/{name}"))  # type: ignore[attr-defined]
        for name in bucket_digests(s3_endpoint, f"{bucket}/out")
        if name != SUCCESS
    }
    local = {
        str(path.relative_to(tmp_path / "local")): _without_timings(
            str(path.relative_to(tmp_path / "local")), path.read_bytes()
        )
        for path in sorted((tmp_path / "local").rglob("*"))
        if path.is_file()
    }
    assert sorted(stored) == sorted(local)
    assert "profile.json" in stored
    for name in local:
        assert stored[name] == local[name], name


def test_a_resumed_run_in_a_bucket_times_every_block_not_the_pause(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 400)
    given = {"rows_per_shard": 50, "batch_size": 10, **options(s3_endpoint)}
    seen = [0]

    def slow_then_killed(rows: int) -> None:
        if rows and not seen[0]:
            time.sleep(5.0)  # in the first block: time worked before the kill
        seen[0] += rows
        if seen[0] >= 150:
            raise KeyboardInterrupt  # after two blocks of 50 rows are done

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        clean(f"{bucket}/in/", f"{bucket}/out", progress=slow_then_killed, **given)  # type: ignore[arg-type]
    first = time.perf_counter() - started
    store = open_store(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    assert store.files(f"{TEMPORARY}/blocks") and not store.exists(SUCCESS)
    time.sleep(3.0)  # between the runs: no work, not timed
    started = time.perf_counter()
    result = clean(f"{bucket}/in/", f"{bucket}/out", resume=True, **given)  # type: ignore[arg-type]
    resumed = time.perf_counter() - started
    seconds = result.summary["seconds"]
    # the first part is counted (its 5 s, less the store's times being whole seconds and what
    # the resumed call spends after its summary, which on a loaded machine took 2.4 s), the
    # pause is not (else 3 s more)
    assert 2.0 <= seconds - resumed <= first + 1.0, (seconds, resumed, first)
    stored = json.loads(store.read_text("summary.json"))
    assert stored["seconds"] == seconds
    assert not any(name.startswith(TEMPORARY) for name in store.files())


def test_a_store_failing_as_the_shards_are_read_back_is_exit_2_and_resumable(
    s3_endpoint: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3fs

    upload_dataset(s3_endpoint, tmp_path, bucket, 120)
    real_read = s3fs.core.S3File.read

    def reset(self: s3fs.core.S3File, *args: object) -> bytes:
        if f"/{TEMPORARY}/" in self.path:  # the accounting reads the block shards back
            raise ConnectionResetError(104, "Connection reset by peer")
        return real_read(self, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(s3fs.core.S3File, "read", reset)
    args = ["clean", f"{bucket}/in/", f"{bucket}/out", "--rows-per-shard", "50", "--quiet"]
    args += ["--storage-option", f"endpoint_url={s3_endpoint}"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output  # the store's failure, not a wrong count (1)
    assert f"cannot reach {bucket}/out" in result.output
    assert "Connection reset by peer" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    store = open_store(f"{bucket}/out", {"endpoint_url": s3_endpoint})
    assert len(store.files(f"{TEMPORARY}/blocks")) == 3  # every block kept, for --resume
    assert not store.exists(SUCCESS)

    monkeypatch.setattr(s3fs.core.S3File, "read", real_read)
    resumed = CliRunner().invoke(main, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert store.exists(SUCCESS)


def test_audit_stats_out_in_a_bucket_takes_the_lock_a_clean_takes(
    s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    upload_dataset(s3_endpoint, tmp_path, bucket, 30)
    store = open_store(f"{bucket}/stats", {"endpoint_url": s3_endpoint})
    with store_lock(store), pytest.raises(OutputError, match="another run is writing OUTPUT"):
        audit(f"{bucket}/in/", stats_out=f"{bucket}/stats", **options(s3_endpoint))
    assert store.files() == []  # refused before it wrote anything; the holder let go after
    audit(f"{bucket}/in/", stats_out=f"{bucket}/stats", **options(s3_endpoint))
    assert sorted(store.files()) == ["stats.csv", "stats.parquet", "summary.json"]
