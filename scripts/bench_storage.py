#!/usr/bin/env python3
"""Time `clean` with SOURCE and OUTPUT on a local S3 server against the same run on local paths,
in one script, and report the ratio.

The S3 server is moto's (`ThreadedMotoServer`, from the dev extra), started here on localhost:
a Python server, far slower per request than S3 or MinIO, so the ratio is an upper bound of what
the protocol costs. Each run is its own `transcript-clean clean` process; rounds alternate the
two, and the best wall time of each is reported.

    .venv/bin/python scripts/bench_storage.py --rows 200000

`--readers` times instead reading the Parquet file whole (`iter_batches`), from the local disk,
through pyarrow's S3 filesystem and through s3fs (as pyarrow's `PyFileSystem`): what chose
pyarrow's for reading Parquet from S3 (`storage.arrow_filesystem`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import s3fs  # type: ignore[import-untyped]
from bench import ensure_dataset
from moto.server import ThreadedMotoServer

PYTHON = sys.executable
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def compare_readers(source: Path, endpoint: str, repeat: int) -> None:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    def read(handle: object) -> None:
        with pq.ParquetFile(handle) as parquet:
            for _ in parquet.iter_batches(batch_size=4096):
                pass

    def arrow() -> pafs.FileSystem:
        host = endpoint.removeprefix("http://")
        return pafs.S3FileSystem(endpoint_override=host, scheme="http", region="us-east-1")

    def fsspec() -> pafs.FileSystem:
        fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs))

    times: dict[str, list[float]] = {"local disk": [], "pyarrow S3": [], "s3fs": []}
    for _ in range(repeat):
        started = time.perf_counter()
        read(str(source))
        times["local disk"].append(time.perf_counter() - started)
        for name, make in (("pyarrow S3", arrow), ("s3fs", fsspec)):
            started = time.perf_counter()
            with make().open_input_file("bench/in/part.parquet") as handle:
                read(handle)
            times[name].append(time.perf_counter() - started)
    click.echo(", ".join(f"{name} {min(values):.2f} s" for name, values in times.items()))


@click.command()
@click.option("--rows", type=click.IntRange(min=1), default=200_000, show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--workdir", default="/tmp/transcript-clean-bench", show_default=True)
@click.option("--readers", is_flag=True, help="Time the Parquet readers instead of clean.")
def main(rows: int, repeat: int, workers: int, workdir: str, readers: bool) -> None:
    """Clean ROWS rows local path -> local path, and s3:// -> s3:// on a local S3 server."""

    folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"openai-{rows}.parquet"
    ensure_dataset(source, rows, "openai", 0)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {**os.environ, **CREDENTIALS}
    os.environ.update(CREDENTIALS)
    fs = s3fs.S3FileSystem(endpoint_url=endpoint)
    fs.mkdir("bench")
    fs.put_file(str(source), "bench/in/part.parquet")

    if readers:
        try:
            compare_readers(source, endpoint, repeat)
        finally:
            server.stop()
        return
    base = [PYTHON, "-m", "transcript_clean", "clean", "--quiet", "--workers", str(workers)]
    local_out = Path(tempfile.mkdtemp(prefix="bench-local-", dir=folder))
    times: dict[str, list[float]] = {"local": [], "s3": []}
    try:
        for _ in range(repeat):
            shutil.rmtree(local_out, ignore_errors=True)
            times["local"].append(timed([*base, str(source), str(local_out)], env))
            s3_run = [
                *base, "s3://bench/in/", "s3://bench/out/", "--overwrite",
                "--storage-option", f"endpoint_url={endpoint}",
            ]  # fmt: skip
            times["s3"].append(timed(s3_run, env))
    finally:
        server.stop()
        shutil.rmtree(local_out, ignore_errors=True)
    best = {name: min(values) for name, values in times.items()}
    result = {
        "rows": rows,
        "workers": workers,
        "local_s": round(best["local"], 2),
        "s3_s": round(best["s3"], 2),
        "ratio": round(best["s3"] / best["local"], 2),
        "all": times,
    }
    click.echo(
        f"{rows:,} rows, --workers {workers}: local paths {best['local']:.2f} s, "
        f"local S3 server {best['s3']:.2f} s: {result['ratio']:.2f}x (best of {repeat})"
    )
    click.echo(json.dumps(result))


if __name__ == "__main__":
    main()
