"""The end of a run, for any storage: the accounting from the written shards, the layout of
OUTPUT's shards, the files a finished run writes beside them, and the time its attempts took.

`output.finalize` (a local OUTPUT) and `remote_output.publish` (one on an object store) both
run these; they differ only in how the files land: a local run lays OUTPUT out in its partial
folder and renames it into place, a run on a store copies objects and writes `_SUCCESS` last.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa

from transcript_clean.card import dataset_card
from transcript_clean.errors import AccountingError, option
from transcript_clean.sinks import OutputFormat, write_table_atomic, write_text_atomic
from transcript_clean.sources.base import output_schema
from transcript_clean.stats import Stats
from transcript_clean.storage import Unreachable

__all__ = [
    "RUN_FILES",
    "SHARD_FOLDERS",
    "attempts_seconds",
    "check_accounting",
    "count_shards",
    "empty_folders",
    "shard_layout",
    "write_empty_shard",
    "write_run_files",
]

SHARD_FOLDERS = ("data", "rejects")

RUN_FILES = ("stats.parquet", "stats.csv", "profile.json", "README.md", "summary.json")
"""The files a finished run writes beside its shards, in the order they are written:
summary.json, the one a baseline reads first, last."""


def count_shards(
    shards: list[str],
    record: Callable[[str], Stats],
    rows: Callable[[str, str], int],
    forget: Callable[[str], None],
    stats: Stats,
    where: str,
) -> dict[tuple[str, str], int]:
    """Count the rows in the shards written, read back as a reader reads them, against each
    block's record and against the rows counted; raise `AccountingError` when they disagree.

    `record(name)`: the stats of shard `name`'s block; `rows(folder, name)`: the rows of that
    shard in `data` or `rejects`; either raises `OSError` or `ValueError` for what cannot be
    read. `forget(name)` removes the block's record, for `--resume` to clean it again. A store
    that cannot be reached (`storage.Unreachable`) is not a wrong count: it goes up as it is,
    and what was written stays for `--resume`. Returns the rows of each (folder, shard)."""
    found: dict[tuple[str, str], int] = {}
    wrong: list[str] = []
    for name in shards:
        try:
            counted = record(name)
        except Unreachable:
            raise
        except (OSError, ValueError) as err:
            wrong.append(f"block of {name} has no readable record ({err})")
            continue
        bad = False
        expected_rows = {"data": counted.rows_kept, "rejects": counted.rows_rejected}
        for folder, expected in expected_rows.items():
            try:
                found[folder, name] = rows(folder, name)
            except Unreachable:
                raise
            except (OSError, ValueError) as err:  # pyarrow's errors for a bad file are these
                wrong.append(f"{folder}/{name} cannot be read ({err})")
                bad = True
                continue
            if found[folder, name] != expected:
                wrong.append(
                    f"{folder}/{name} holds {found[folder, name]} rows, its block counted "
                    f"{expected}"
                )
                bad = True
        if bad:
            forget(name)
    totals = {
        folder: sum(n for (kind, _), n in found.items() if kind == folder)
        for folder in SHARD_FOLDERS
    }
    check_accounting(wrong, totals, stats, where)
    return found


def check_accounting(wrong: list[str], found: dict[str, int], stats: Stats, where: str) -> None:
    """Raise `AccountingError` for the shards found `wrong`, or when the rows `found` in them
    (`data`, `rejects`) are not the rows counted."""
    if not wrong and (found["data"], found["rejects"]) != (stats.rows_kept, stats.rows_rejected):
        wrong.append(
            f"the shards hold {found['data']} kept and {found['rejects']} rejected rows, the run "
            f"counted {stats.rows_kept} and {stats.rows_rejected}"
        )
    if wrong:
        raise AccountingError(
            f"row accounting from the files failed in {where}: {'; '.join(wrong)}. "
            f"Nothing was moved into OUTPUT; run it again with {option('resume')} to clean "
            "those blocks again"
        )


def shard_layout(
    shards: list[str], rows: dict[tuple[str, str], int], output: OutputFormat
) -> list[tuple[str, str, str]]:
    """OUTPUT's shards as (folder, block shard, final name): the shards that hold rows, in
    block order, numbered from 0 in each folder. A folder left with none gets one empty shard
    (`write_empty_shard`), which keeps the schema findable."""
    layout: list[tuple[str, str, str]] = []
    for folder in SHARD_FOLDERS:
        kept = [name for name in shards if rows[folder, name] > 0]
        layout += [(folder, name, output.shard_name(i)) for i, name in enumerate(kept)]
    return layout


def empty_folders(layout: Iterable[tuple[str, str, str]]) -> list[str]:
    """The shard folders `layout` puts no shard in."""
    filled = {folder for folder, _, _ in layout}
    return [folder for folder in SHARD_FOLDERS if folder not in filled]


def write_empty_shard(folder: Path, kind: str, schema: pa.Schema, output: OutputFormat) -> Path:
    """The one empty shard of `kind` (`data`, `rejects`) in `folder`, with the input's schema
    (plus the reject columns)."""
    from transcript_clean.pipeline import reject_schema

    path = folder / kind / output.shard_name(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    rejects = kind == "rejects"
    output.open(path, reject_schema(schema) if rejects else schema, rejects=rejects).close()
    return path


def write_run_files(
    folder: Path, schema: pa.Schema, stats: Stats, summary: dict[str, Any], output: OutputFormat
) -> list[Path]:
    """Write `RUN_FILES` into `folder`, in that order: the stats table (Parquet and CSV), the
    profile, the dataset card and summary.json. Returns their paths, in that order."""
    write_table_atomic(folder / "stats.parquet", stats.table())
    write_text_atomic(folder / "stats.csv", stats.csv())
    profile = json.dumps(summary.get("profile", stats.profile.report()), indent=2)
    write_text_atomic(folder / "profile.json", profile + "\n")
    card = dataset_card(
        summary,
        stats.records(),
        f"data/*{output.suffix}",
        output_schema(output.written or schema, rejects=False)
        if output.name == "parquet"
        else None,
    )
    write_text_atomic(folder / "README.md", card)
    write_text_atomic(folder / "summary.json", json.dumps(summary, indent=2) + "\n")
    return [folder / name for name in RUN_FILES]


def attempts_seconds(starts: list[float], finished: Iterable[float]) -> float:
    """The seconds the attempts that started at `starts` (wall clock, in order; the last one is
    this attempt's) worked before this one: each from its start to the last block it finished
    (`finished`: when each block's record was written), so the time between a kill and
    `--resume` is not counted, nor what a killed attempt did after its last block."""
    ends = sorted(finished)
    total = 0.0
    for start, stop in pairwise(starts):
        mine = [end for end in ends if start <= end < stop]
        total += max(mine) - start if mine else 0.0
    return total
