"""The worker processes of `--workers N`: started from a plain script, they run the cleaner
alone, never the script again; they end with the process that started them, however it ends
(SIGKILL included), and take the resource tracker with them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from synthetic import generate_rows

ROOT = Path(__file__).resolve().parent.parent

README_SCRIPT = """\
from transcript_clean import clean

result = clean("raw/*.parquet", "clean/", config="strict", workers=2)
print(result)
"""


def test_the_readme_example_runs_as_written_in_a_script(tmp_path: Path) -> None:
    # The README's example, in a file with no `if __name__ == "__main__":` guard: a spawned
    # worker that re-ran the script would call `clean` again and meet the run's own lock.
    (tmp_path / "raw").mkdir()
    table = pa.Table.from_pylist([row for row, _ in generate_rows(120, seed=7)])
    for k in range(3):  # three files, three blocks: the worker gets one
        pq.write_table(table.slice(40 * k, 40), tmp_path / f"raw/{k}.parquet")
    (tmp_path / "script.py").write_text(README_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.count("RunResult(") == 1  # printed once: the workers did not run it
    assert len(done.stdout.splitlines()) == 1
    assert "rows_in=120" in done.stdout
    assert not (tmp_path / "clean.partial").exists()
    assert len(list((tmp_path / "clean" / "data").glob("*.parquet"))) == 3


# A process that starts two workers, says their pids and the resource tracker's, and waits.
STARTS_WORKERS = """
import os, sys, time
from multiprocessing import resource_tracker
from transcript_clean.engine.workers import start_workers
pool = start_workers(2)
pool.submit(os.getpid).result()
pool.submit(os.getpid).result()
pids = [*pool._processes, resource_tracker._resource_tracker._pid]
print(" ".join(map(str, pids)), flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (gone, not yet reaped by whoever adopted it) does not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_workers_and_the_resource_tracker_end_when_their_parent_is_killed() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, "-c", STARTS_WORKERS], stdout=subprocess.PIPE, text=True, env=env
    )
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        pids += [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(alive(pid) for pid in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in pids):
            time.sleep(0.05)
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        parent.kill()
        for pid in pids:  # what the test found alive: not left behind by it either
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_workers_import_what_their_caller_names_as_soon_as_they_are_up() -> None:
    from transcript_clean.engine.workers import start_workers

    loaded = "'transcript_clean.engine.local' in __import__('sys').modules"
    with start_workers(1, preload="transcript_clean.engine.local") as pool:
        # One process: the preload was its first task, so it ran before this one.
        assert pool.submit(eval, loaded).result(timeout=120) is True
    with start_workers(1) as pool:  # nothing named, nothing imported ahead
        assert pool.submit(eval, loaded).result(timeout=120) is False
