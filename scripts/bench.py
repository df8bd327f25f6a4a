#!/usr/bin/env python3
"""Benchmark a cleaning run against the Parquet read+write floor, in one run.

Times, each in its own process (peak RSS is the whole process tree's, sampled every 20 ms):
  floor         pyarrow iter_batches read + ParquetWriter write of the same file, same compression
  datasets      datasets.load_dataset(...).filter(validator).to_parquet(), a plain Python validator
  clean -w N    transcript-clean clean with --workers N, for each N asked
  profile       the profile's own time inside a clean run (timed alone, in-process): its cost

Every step runs --repeat times, in rounds; the best wall time of each is reported, with its ratio
to the floor and the largest peak RSS, and written to a JSON file.

    .venv/bin/python scripts/bench.py --rows 200000
    .venv/bin/python scripts/bench.py --rows 2000000 --skip datasets
    .venv/bin/python scripts/bench.py --rows 200000 --tools --skip datasets   # declared tools
    .venv/bin/python scripts/bench.py --rows 200000 --type preference   # prompt + 2 candidates
    .venv/bin/python scripts/bench.py --rows 200000 --type preference --rate candidate_empty=0

`--long-rows` measures instead `clean` with default options over agent traces of about 200 KB
a row (`long_rows.py`), for each row count of `--long-rows-counts`, says whether peak RSS meets
issue 27's target (under 1.5 GB, and flat), and checks that the largest output loads whole with
`pq.read_table` and `datasets.load_dataset`:

    .venv/bin/python scripts/bench.py --long-rows

`--source jsonl` measures issue 15's JSON Lines targets instead (`jsonl_bench.py`): the floor
(`pyarrow.json.read_json` + zstd Parquet), `load_dataset("json")` + filter + `to_parquet`,
`clean --workers 1` and `clean --output-format jsonl`, at each row count of `--jsonl-counts`,
printed as a Markdown table:

    .venv/bin/python scripts/bench.py --source jsonl --repeat 1

`--chat-template T.jinja` measures issue 30's target instead (`template_bench.py`): `audit
--chat-template` over the zava rows against `apply_chat_template(tokenize=True)` alone on the
same rows, with the workers of `--workers`:

    .venv/bin/python scripts/bench.py --rows 2200 --workers 1,2 \
        --chat-template ../shared/data/chat_templates/qwen3_training.jinja
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


# ---------------------------------------------------------------------------------------------
# measuring a process tree


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(_children(p))
    return out


def _cpu_ticks(pid: int) -> int:
    """The user and system time `pid` has used, in clock ticks (`/proc/PID/stat`)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(fields[11]) + int(fields[12])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(command: list[str]) -> dict[str, float]:
    """Run `command`; its wall time, the peak RSS of its process tree and the CPU time the tree
    used: what the kernel counts for the processes waited for, or where more, the sum of each
    process's last time sampled (a process its parent does not wait for, as a Ray worker, is
    counted to its last sample)."""
    peak = 0
    ticks: dict[int, int] = {}
    cpu_before = _children_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            tree = _tree(process.pid)
            peak = max(peak, sum(_rss_kb(p) for p in tree))
            for p in tree:
                ticks[p] = max(ticks.get(p, 0), _cpu_ticks(p))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise click.ClickException(f"{' '.join(command)} failed:\n{stderr.decode()[-2000:]}")
    sampled = sum(ticks.values()) / os.sysconf("SC_CLK_TCK")
    cpu = max(_children_cpu() - cpu_before, sampled)
    return {"seconds": seconds, "peak_rss_mb": peak / 1024, "cpu_seconds": cpu}


# ---------------------------------------------------------------------------------------------
# the steps, run in child processes: `bench.py step NAME SOURCE OUTPUT`


def step_floor(source: str, output: str) -> None:
    import pyarrow.parquet as pq

    if source.endswith(".jsonl"):  # JSON Lines: Arrow's own reader, then one zstd write
        import pyarrow.json as pj

        pq.write_table(pj.read_json(source), output, compression="zstd")
        return

    parquet = pq.ParquetFile(source)
    with pq.ParquetWriter(output, parquet.schema_arrow, compression="zstd") as writer:
        for batch in parquet.iter_batches(batch_size=4096):  # the cleaner's default
            writer.write_batch(batch)


def plain_validator(row: dict[str, Any]) -> bool:
    """What a user writes first: every assistant turn says something, every call's arguments are
    a JSON object and every call is answered by the tool messages right after it."""
    pending: list[str] = []
    previous = None
    for message in row["messages"]:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return False
            pending.remove(message.get("tool_call_id"))
            previous = role
            continue
        if pending:
            return False
        if role == "assistant":
            if previous == "assistant":
                return False
            calls = message.get("tool_calls") or []
            if not (message.get("content") or "").strip() and not calls:
                return False
            for call in calls:
                try:
                    if not isinstance(json.loads(call["function"]["arguments"]), dict):
                        return False
                except (TypeError, ValueError, KeyError):
                    return False
                pending.append(call.get("id"))
        elif role not in ("system", "user"):
            return False
        previous = role
    return not pending and previous is not None


def plain_sharegpt_validator(row: dict[str, Any]) -> bool:
    """The same for ShareGPT turns: every gpt turn says something, every function_call value is
    a {name, arguments} object (or a list of them) with object arguments, and observations answer
    the calls right before them, one each or all in one JSON list."""
    pending = 0
    previous = None
    for turn in row["conversations"]:
        tag, value = turn.get("from"), turn.get("value") or ""
        if tag == "observation":
            if not pending:
                return False
            answered = 1
            if pending > 1 and previous == "function_call" and value.lstrip().startswith("["):
                with contextlib.suppress(ValueError):
                    items = json.loads(value)
                    answered = len(items) if len(items) == pending else 1
            pending -= answered
        elif tag == "function_call":
            if pending and previous != "function_call":
                return False
            try:
                calls = json.loads(value)
            except ValueError:
                return False
            calls = calls if isinstance(calls, list) else [calls]
            for call in calls:
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    return False
                arguments = call.get("arguments")
                if isinstance(arguments, str):
                    with contextlib.suppress(ValueError):
                        arguments = json.loads(arguments)
                if not isinstance(arguments, dict):
                    return False
            pending += len(calls)
            if not calls:
                return False
        elif tag in ("gpt", "human", "system"):
            if pending or (tag == "gpt" and (previous == "gpt" or not value.strip())):
                return False
        else:
            return False
        previous = tag
    return not pending and previous is not None


VALIDATORS = {"openai": plain_validator, "sharegpt": plain_sharegpt_validator}


def step_datasets(source: str, output: str, fmt: str) -> None:
    import datasets

    datasets.disable_progress_bars()
    cache = tempfile.mkdtemp(prefix="bench-hf-")
    try:
        builder = "json" if source.endswith(".jsonl") else "parquet"
        ds = datasets.load_dataset(builder, data_files=source, split="train", cache_dir=cache)
        ds.filter(VALIDATORS[fmt]).to_parquet(output)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def step_profile(source: str, output: str, fmt: str) -> None:
    """The profile's own cost inside `clean`, timed alone: as a cleaning run computes it, the
    rows the fast path settles measured from its view with each group's verdicts
    (`settled_profile`, or in Arrow from the batch where the view cannot), the others from
    their decoded transcripts; its seconds go to `output` as JSON."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from transcript_clean.batch_profile import profile_batch
    from transcript_clean.engine.local import VERDICT_ROWS
    from transcript_clean.formats import get_format
    from transcript_clean.pipeline import batch_verdicts, settled_profile
    from transcript_clean.profile import Profile
    from transcript_clean.rows import clean_row

    form = get_format(fmt)
    total, seconds = Profile(), 0.0
    for group in pq.ParquetFile(source).iter_batches(batch_size=VERDICT_ROWS):
        table = pa.Table.from_batches([group])
        verdicts = batch_verdicts(table, format=form)  # the run's verdicts: not timed
        started = time.perf_counter()
        ahead = None if verdicts is None else settled_profile(verdicts)
        seconds += time.perf_counter() - started
        if ahead is not None:
            total.merge(ahead)
        for start in range(0, table.num_rows, 4096):  # the run's batches
            batch = table.slice(start, 4096)
            part = None if verdicts is None else verdicts.slice(start, start + batch.num_rows)
            settled = None if part is None else part.handled
            slow = range(batch.num_rows) if settled is None else np.flatnonzero(~settled).tolist()
            rows = batch.take(pa.array(list(slow), pa.int64())).to_pylist()
            results = [clean_row(row, form) for row in rows]
            decoded = {
                int(i): None if r.decoded is None else r.decoded.messages
                for i, r in zip(slow, results, strict=True)
            }
            read = None if part is None else part.read
            if ahead is not None:
                read = np.zeros(batch.num_rows, dtype=bool)
            started = time.perf_counter()  # the per-row path decodes its rows anyway: not timed
            total.merge(profile_batch(batch, form, read, decoded))
            seconds += time.perf_counter() - started
    Path(output).write_text(json.dumps({"seconds": seconds, "rows": total.rows}))


STEPS = {
    "floor": lambda source, output, fmt: step_floor(source, output),
    "datasets": step_datasets,
    "profile": step_profile,
}


# ---------------------------------------------------------------------------------------------


def byte_compile_cleaner() -> None:
    """Byte-compile the cleaner, as pip does when it installs a package. An editable install
    is compiled on first import instead, unless PYTHONDONTWRITEBYTECODE is set (as on the
    project's machines), in which case every run would compile it again (0.06 s, against
    none for the floor's pyarrow and click): not what an installed copy costs."""
    import compileall

    compileall.compile_dir(ROOT / "transcript_clean", quiet=1)


def ensure_dataset(
    path: Path,
    rows: int,
    fmt: str,
    seed: int,
    type_: str = "conversation",
    rates: tuple[str, ...] = (),
    tools: bool = False,
) -> None:
    marker = path.with_suffix(".json")
    wanted: dict[str, Any] = {"rows": rows, "format": fmt, "seed": seed}
    if type_ != "conversation":
        wanted["type"] = type_
    if tools:  # the tools mode: declared tools, 5% undeclared calls, 5% schema breaks
        from synthetic import TOOLS_RATES

        wanted["tools"] = True
        rates = (*rates, *(f"{code}={r}" for code, r in TOOLS_RATES.items()))
    if rates:
        wanted["rates"] = list(rates)
    if path.exists() and marker.exists() and json.loads(marker.read_text()) == wanted:
        return
    click.echo(f"generating {rows:,} {fmt} {type_} rows into {path} ...", err=True)
    subprocess.run(
        [
            PYTHON,
            str(ROOT / "scripts" / "make_synthetic.py"),
            str(path),
            "--rows",
            str(rows),
            "--format",
            fmt,
            "--seed",
            str(seed),
            "--type",
            type_,
            *(f"--rate={rate}" for rate in rates),
        ],
        check=True,
    )
    marker.write_text(json.dumps(wanted))


@click.group(invoke_without_command=True)
@click.option("--rows", type=int, default=200_000, show_default=True)
@click.option("--format", "fmt", default="openai", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--type",
    "type_",
    type=click.Choice(["conversation", "preference"]),  # make_synthetic.py's (not imported:
    # the floor's process must not pay for importing the cleaner)
    default="conversation",
    show_default=True,
    help="preference: rows of a prompt and two candidates (make_synthetic.py --type "
    "preference); the datasets step is skipped (it has no validator for them).",
)
@click.option(
    "--rate",
    "rates",
    multiple=True,
    metavar="CODE=R",
    help="Passed to make_synthetic.py: plant only these defects (CODE=0 for clean rows).",
)
@click.option(
    "--workers", default="1,2", show_default=True, help="Worker counts to run clean with."
)
@click.option("--skip", multiple=True, type=click.Choice(["floor", "datasets", "clean", "profile"]))
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Rounds; each step's best time is reported.",
)
@click.option(
    "--dir",
    "workdir",
    type=click.Path(),
    default="bench",
    show_default=True,
    help="Where the dataset and outputs go (the dataset is reused).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(),
    default=None,
    help="Results file (default: DIR/results-FORMAT-ROWS.json).",
)
@click.option(
    "--tools",
    is_flag=True,
    help="The tools mode: rows that declare their tools, 5% calling an undeclared tool and 5% "
    "breaking its schema (any format with calls: openai, sharegpt, anthropic, rig, ...).",
)
@click.option(
    "--long-rows",
    is_flag=True,
    help="Measure clean over long rows (agent traces of about 200 KB) instead.",
)
@click.option(
    "--source",
    "source_kind",
    type=click.Choice(["parquet", "jsonl"]),
    default="parquet",
    show_default=True,
    help="jsonl: measure JSON Lines input (issue 15's targets) at --jsonl-counts rows.",
)
@click.option(
    "--jsonl-counts",
    default="100000,400000",
    show_default=True,
    help="With --source jsonl: the row counts to measure.",
)
@click.option(
    "--long-rows-counts",
    default="2000,6000,12000,20000",
    show_default=True,
    help="With --long-rows: the row counts to measure.",
)
@click.option(
    "--chat-template",
    "chat_template",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Measure audit --chat-template against apply_chat_template alone (template_bench.py).",
)
@click.pass_context
def main(
    ctx: click.Context,
    rows: int,
    fmt: str,
    seed: int,
    type_: str,
    rates: tuple[str, ...],
    workers: str,
    skip: tuple[str, ...],
    repeat: int,
    workdir: str,
    json_out: str | None,
    tools: bool,
    long_rows: bool,
    source_kind: str,
    jsonl_counts: str,
    long_rows_counts: str,
    chat_template: str | None,
) -> None:
    """Time the floor, the datasets pipeline and transcript-clean in one run."""
    if ctx.invoked_subcommand is not None:
        return
    if chat_template is not None:
        from template_bench import bench_templates

        byte_compile_cleaner()
        rendered = bench_templates(
            __file__,
            Path(workdir),
            Path(chat_template),
            rows,
            [int(n) for n in workers.split(",")],
            repeat,
            measure,
        )
        target = Path(json_out) if json_out else Path(workdir) / "results-templates.json"
        target.write_text(json.dumps({"cpus": os.cpu_count(), "results": rendered}, indent=2))
        click.echo(f"\nwrote {target}")
        return
    if long_rows:
        from long_rows import bench_long_rows

        bench_long_rows(
            Path(workdir), [int(n) for n in long_rows_counts.split(",")], seed, repeat, measure
        )
        return
    if source_kind == "jsonl":
        from jsonl_bench import bench_jsonl

        byte_compile_cleaner()
        counts = [int(n) for n in jsonl_counts.split(",")]
        found = bench_jsonl(__file__, Path(workdir), counts, seed, repeat, skip, measure)
        target = Path(json_out) if json_out else Path(workdir) / "results-jsonl.json"
        target.write_text(json.dumps({"cpus": os.cpu_count(), "results": found}, indent=2))
        click.echo(f"\nwrote {target}")
        return
    if type_ == "preference":  # neither has a preference reading: the plain validator and
        skip = (*skip, "datasets", "profile")  # the profile step read one conversation column
    if "datasets" not in skip and fmt not in VALIDATORS:
        raise click.UsageError(
            f"the datasets step has a plain validator for {' and '.join(VALIDATORS)} rows only: "
            f"pass --skip datasets for {fmt}"
        )
    folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    kind = ("" if type_ == "conversation" else f"{type_}-") + ("rates-" if rates else "")
    kind += "tools-" if tools else ""
    source = folder / f"{kind}{fmt}-{rows}.parquet"
    ensure_dataset(source, rows, fmt, seed, type_, rates, tools)
    byte_compile_cleaner()
    size_mb = source.stat().st_size / 2**20

    runs: list[tuple[str, list[str]]] = []
    if "floor" not in skip:
        runs.append(
            (
                "floor",
                [PYTHON, __file__, "step", "floor", str(source), str(folder / "floor.parquet")],
            )
        )
    if "datasets" not in skip:
        runs.append(
            (
                "datasets filter",
                [
                    PYTHON,
                    __file__,
                    "step",
                    "datasets",
                    str(source),
                    str(folder / "datasets.parquet"),
                    "--format",
                    fmt,
                ],
            )
        )
    if "clean" not in skip:
        for n in (int(w) for w in workers.split(",")):
            out = folder / f"clean-w{n}"
            runs.append(
                (
                    f"clean --workers {n}",
                    [
                        str(Path(PYTHON).parent / "transcript-clean"),
                        "clean",
                        str(source),
                        str(out),
                        "--overwrite",
                        "--quiet",
                        "--workers",
                        str(n),
                        "--format",
                        fmt,
                    ],
                )
            )

    if "profile" not in skip:
        command = [PYTHON, __file__, "step", "profile", str(source), str(folder / "profile.json")]
        runs.append(("profile (in clean)", [*command, "--format", fmt]))

    # Rounds, each running every step once, so that a noisy minute hits all steps alike; each
    # step's best time is reported (and its largest peak RSS).
    results: dict[str, dict[str, float]] = {}
    for round_ in range(1, repeat + 1):
        for name, command in runs:
            click.echo(f"round {round_}/{repeat}: {name} ...", err=True)
            measured = measure(command)
            if name.startswith("profile"):  # its own time inside the step, not the step's
                measured["seconds"] = json.loads((folder / "profile.json").read_text())["seconds"]
            best = results.setdefault(name, dict(measured, runs=0))
            best["seconds"] = min(best["seconds"], measured["seconds"])
            best["peak_rss_mb"] = max(best["peak_rss_mb"], measured["peak_rss_mb"])
            best["runs"] += 1

    share = per_row_share(source, fmt if type_ == "conversation" else "auto")
    floor = results.get("floor", {}).get("seconds")
    click.echo(f"\n{rows:,} {fmt} rows, {size_mb:.1f} MiB zstd Parquet ({source})")
    click.echo(
        f"per-row path: {share['per_row']:.2%} of rows ({share['per_row_with_code']:.2%} with a "
        f"code, {share['per_row_clean']:.2%} clean)"
    )
    said = ", ".join(f"{code} {r:.2%}" for code, r in share.codes.items())
    click.echo(f"  their codes (rows with each): {said or '-'}\n")
    click.echo(f"{'step':<20} {'seconds':>9} {'x floor':>8} {'peak RSS':>10}")
    for name, r in results.items():
        ratio = f"{r['seconds'] / floor:.2f}" if floor else "-"
        r["x_floor"] = r["seconds"] / floor if floor else float("nan")
        click.echo(f"{name:<20} {r['seconds']:>9.2f} {ratio:>8} {r['peak_rss_mb']:>7.0f} MB")
    target = Path(json_out) if json_out else folder / f"results-{kind}{fmt}-{rows}.json"
    target.write_text(
        json.dumps(
            {
                "rows": rows,
                "format": fmt,
                "type": type_,
                "seed": seed,
                "input_mb": size_mb,
                "cpus": os.cpu_count(),
                "results": results,
                "share": {**share, "codes": share.codes},
            },
            indent=2,
        )
    )
    click.echo(f"\nwrote {target}")


class Share(dict[str, float]):
    """`per_row_share`'s shares, and per code the share of rows left per row with it."""

    codes: dict[str, float]


def per_row_share(source: Path, fmt: str) -> Share:
    """Which share of the rows the fast path leaves to the per-row path, with the default
    config, read in the engine's verdict groups (16,384 rows); and of those, the share that
    comes out with a code (a defect no Arrow repair settles) and the share that comes out clean
    (rows the fast path could not prove: each one a miss); per code, the share of rows left to
    the per-row path that have it (what no Arrow repair settles yet)."""
    from collections import Counter

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from transcript_clean.formats import get_format
    from transcript_clean.pipeline import batch_verdicts
    from transcript_clean.rows import clean_row
    from transcript_clean.shapes.detect import detect_format

    rows = per_row = with_code = 0
    codes: Counter[str] = Counter()
    file = pq.ParquetFile(source)
    form = None
    for batch in file.iter_batches(batch_size=16384):
        table = pa.Table.from_batches([batch])
        if form is None:
            sample = table.slice(0, 50).to_pylist()
            form = get_format(fmt) if fmt != "auto" else detect_format(table.column_names, sample)
        verdicts = batch_verdicts(table, format=form)
        left = np.ones(len(table), dtype=bool) if verdicts is None else ~verdicts.handled
        rows += len(table)
        per_row += int(left.sum())
        for row in table.filter(pa.array(left)).to_pylist():
            found = clean_row(row, form).codes
            with_code += bool(found)
            codes.update(found)
    total = max(rows, 1)
    share = Share(
        per_row=per_row / total,
        per_row_with_code=with_code / total,
        per_row_clean=(per_row - with_code) / total,
    )
    share.codes = {code: n / total for code, n in codes.most_common()}
    return share


@main.command("template-step")
@click.argument("source")
@click.argument("folder")
def template_step(source: str, folder: str) -> None:
    """The chat-template baseline: apply_chat_template(tokenize=True) on every row."""
    from template_bench import step_apply

    step_apply(source, folder)


@main.command()
@click.argument("name", type=click.Choice(sorted(STEPS)))
@click.argument("source")
@click.argument("output")
@click.option("--format", "fmt", default="openai", show_default=True)
def step(name: str, source: str, output: str, fmt: str) -> None:
    """Run one baseline step (used by the benchmark itself)."""
    STEPS[name](source, output, fmt)


if __name__ == "__main__":
    main()
