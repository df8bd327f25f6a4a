"""Drift: each code's share now against a previous run's (its summary.json or stats.parquet)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from transcript_clean.audit.measure import Gate, by_code, code_rank
from transcript_clean.errors import TranscriptCleanError, option
from transcript_clean.storage import StorageError, Store, is_remote, open_store

__all__ = [
    "DAMAGED",
    "Baseline",
    "BaselineError",
    "Drift",
    "compute_drift",
    "drift_gate",
    "load_baseline",
]


class BaselineError(TranscriptCleanError):
    """A baseline that cannot be read: missing, not JSON or Parquet, or without stats."""


@dataclass(slots=True, frozen=True)
class Baseline:
    """A previous run's per-code shares, from its summary.json or stats.parquet."""

    path: str
    shares: dict[str, float]
    rows_in: int | None = None
    config: str | None = None
    format: str | None = None
    profile: Mapping[str, Any] | None = None
    """Its profile (`Profile.report`), when its summary.json has one."""


@dataclass(slots=True, frozen=True)
class Drift:
    """One code's share before and now; `change` = current - previous."""

    code: str
    previous: float
    current: float

    @property
    def change(self) -> float:
        return self.current - self.previous

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "previous": self.previous,
            "current": self.current,
            "change": self.change,
        }


def load_baseline(
    path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> Baseline:
    """A baseline from a clean or audit run: its summary.json, its stats.parquet, or a folder
    holding either (summary.json preferred), local or at a URI (`s3://...`, read with
    `storage_options`). Raises `BaselineError` naming the file."""
    if is_remote(os.fspath(path)):
        return _baseline_from_store(os.fspath(path), storage_options or {})
    target = Path(path)
    if target.is_dir():
        for name in ("summary.json", "stats.parquet"):
            if (target / name).is_file():
                target = target / name
                break
        else:
            raise BaselineError(f"baseline {path}: the folder has no summary.json or stats.parquet")
    elif not target.exists():
        raise BaselineError(f"baseline {path}: no such file or folder")
    if target.suffix == ".parquet":
        return _baseline_from_parquet(target)
    return _baseline_from_summary(target)


def _baseline_from_store(uri: str, options: Mapping[str, Any]) -> Baseline:
    """A baseline on an object store: fetched, then read as a local one. A clean run's OUTPUT
    there counts only once complete, with its `_SUCCESS`."""
    from transcript_clean.remote_output import SUCCESS, TEMPORARY

    try:
        store = open_store(uri, options)
        if store.fs.isdir(store.path):
            names = store.files()
            if (
                any(n.startswith(("data/", f"{TEMPORARY}/")) for n in names)
                and SUCCESS not in names
            ):
                raise BaselineError(
                    f"baseline {uri}: a run's OUTPUT without {SUCCESS}, so not complete (a run "
                    f"killed, or still writing): finish it with {option('resume')}"
                )
            name = next((n for n in ("summary.json", "stats.parquet") if n in names), None)
            if name is None:
                raise BaselineError(
                    f"baseline {uri}: the folder has no summary.json or stats.parquet"
                )
            store = Store(f"{store.uri}/{name}", options)
        with tempfile.TemporaryDirectory(prefix="transcript-clean-baseline-") as folder:
            local = Path(folder) / store.uri.rsplit("/", 1)[-1]
            store.fs.get_file(store.path, str(local))
            try:
                found = load_baseline(local)
            except BaselineError as err:
                raise BaselineError(str(err).replace(str(local), store.uri)) from None
    except FileNotFoundError:
        raise BaselineError(f"baseline {uri}: no such file or folder") from None
    except (OSError, StorageError) as err:
        raise BaselineError(f"baseline {uri}: cannot read it ({err})") from None
    return replace(found, path=store.uri)


def _baseline_from_summary(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BaselineError(f"baseline {path}: cannot read it as JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("stats"), list):
        raise BaselineError(f"baseline {path}: not a summary.json (it has no 'stats' list)")
    rows_in = data.get("rows_in")
    rows_in = rows_in if isinstance(rows_in, int) and not isinstance(rows_in, bool) else None
    config = data.get("config")
    profile = data.get("profile") if isinstance(data.get("profile"), dict) else None
    if profile is not None:
        _check_profile(path, profile)
    return Baseline(
        str(path),
        _shares_of(path, data["stats"], rows_in),
        rows_in,
        config.get("name") if isinstance(config, dict) else None,
        data.get("format") if isinstance(data.get("format"), str) else None,
        profile,
    )


DAMAGED = (AttributeError, KeyError, IndexError, TypeError, ValueError)
"""What reading a summary.json whose parts are not of their kinds raises (a string where a
mapping belongs, a figure missing): a damaged file, the input's fault, not a gate's."""


def _check_profile(path: Path, profile: Mapping[str, Any]) -> None:
    """Read `profile` as the drift and the report will, now, before the audit runs: a damaged
    one is a `BaselineError` naming the file (exit 2), never a traceback after the run."""
    from transcript_clean.audit.profile_drift import compute_profile_drift, headline_figures

    try:
        compute_profile_drift(profile, profile)
        headline_figures(profile)
    except DAMAGED as err:
        raise BaselineError(
            f"baseline {path}: its profile is damaged, not as a run writes it ({err!r})"
        ) from None


def _baseline_from_parquet(path: Path) -> Baseline:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as err:
        raise BaselineError(f"baseline {path}: cannot read it as Parquet ({err})") from None
    return Baseline(str(path), _shares_of(path, records, None))


def _shares_of(path: Path, records: list[Any], rows_in: int | None) -> dict[str, float]:
    """Per-code shares of a stats table: rows / rows in (share when rows in is unknown), summed
    over the code's actions."""
    shares: dict[str, float] = {}
    for i, record in enumerate(records):
        try:
            code = str(record["code"])
            share = record["rows"] / rows_in if rows_in else float(record["share"])
        except (KeyError, TypeError, ValueError) as err:
            raise BaselineError(
                f"baseline {path}: stats row {i} has no usable code, rows and share ({err!r})"
            ) from None
        shares[code] = shares.get(code, 0.0) + share
    return dict(by_code(shares))


def compute_drift(previous: Mapping[str, float], current: Mapping[str, float]) -> list[Drift]:
    """Every code in either run, in the codes' order; a code absent from one run has share 0."""
    codes = sorted(set(previous) | set(current), key=code_rank)
    return [Drift(c, previous.get(c, 0.0), current.get(c, 0.0)) for c in codes]


def drift_gate(drift: list[Drift], max_drift: float) -> Gate:
    """The `max-drift` gate: the largest change of any code's share, in percentage points."""
    largest = max(drift, key=lambda d: abs(d.change), default=None)
    if largest is None:
        return Gate("max-drift", 0.0, max_drift, "no codes in either run", unit="pp")
    detail = f"{largest.code}: {100 * largest.previous:.2f}% -> {100 * largest.current:.2f}%"
    return Gate("max-drift", abs(largest.change), max_drift, detail, unit="pp")
