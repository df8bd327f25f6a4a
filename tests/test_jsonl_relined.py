"""JSON Lines rows the Arrow side repairs while their lines are written (`batch_verdicts`'s
`reencode`): the Arrow side settles them, the per-row path re-encodes their lines, and the
batch comes out exactly as the per-row path alone cleans it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from jsonl_bench import without_nulls
from synthetic import default_rates, generate_rows

from transcript_clean import pipeline
from transcript_clean.audit import audit
from transcript_clean.jsonl_sink import data_lines, reject_lines
from transcript_clean.pipeline import (
    CleanedBatch,
    batch_verdicts,
    clean_batch,
    clean_batch_parts,
    settled_profile,
)
from transcript_clean.policy import DEFAULT, Config
from transcript_clean.run import clean
from transcript_clean.sources import RAW_LINE, open_source


def _table(tmp_path: Path, n: int = 600) -> pa.Table:
    rates = {code: 3 * rate for code, rate in default_rates("openai").items()}
    rows = generate_rows(n, "openai", seed=11, rates=rates)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(without_nulls(row)) + "\n" for row, _ in rows))
    source = open_source(str(path))
    return pa.Table.from_batches(list(source.read(source.parts()[0])))


def _same(cleaned: CleanedBatch, slow: CleanedBatch) -> None:
    kept, slow_kept = cleaned.kept_rows(), slow.kept_rows()
    assert kept.to_pylist() == slow_kept.to_pylist()  # the lines too
    assert bytes(data_lines(kept)) == bytes(data_lines(slow_kept))
    assert reject_lines(cleaned.rejects) == reject_lines(slow.rejects)
    assert cleaned.stats == slow.stats


def test_the_arrow_side_repairs_jsonl_rows_whose_lines_are_written(tmp_path: Path) -> None:
    table = _table(tmp_path)
    verdicts = batch_verdicts(table, format="openai", reencode=True)
    assert verdicts is not None and verdicts.stale_lines and verdicts.repaired.sum() > 10
    repaired = np.flatnonzero(verdicts.repaired)
    cleaned = clean_batch_parts(table, format="openai", source="s", verdicts=verdicts)
    slow = clean_batch_parts(table, format="openai", source="s", fast=False)
    _same(cleaned, slow)
    # the repaired rows' lines are re-encoded, not the lines they came in
    before = table.column(RAW_LINE).take(pa.array(repaired)).to_pylist()
    index = np.cumsum(cleaned.kept) - 1
    after = cleaned.kept_rows().column(RAW_LINE).take(pa.array(index[repaired])).to_pylist()
    assert all(a != b for a, b in zip(after, before, strict=True))


def test_without_reencode_or_lines_the_verdicts_say_nothing_is_stale(tmp_path: Path) -> None:
    table = _table(tmp_path)
    exact = batch_verdicts(table, format="openai")
    loose = batch_verdicts(table, format="openai", exact_lines=False, reencode=True)
    assert exact is not None and not exact.stale_lines and not exact.repaired.any()
    assert loose is not None and not loose.stale_lines and loose.repaired.any()


@pytest.mark.parametrize("measured", [False, True])
def test_rows_the_per_row_path_does_not_repair_so_go_back_to_it(
    tmp_path: Path, measured: bool
) -> None:
    # Verdicts worked out for a config that repairs consecutive assistant messages, used with
    # one that rejects them: the two disagree on those rows, which the per-row path then takes.
    # `measured`: the settled rows' profile came with the verdicts (as the engine has it), so
    # the rows handed back, measured there, are not measured again.
    table = _table(tmp_path)
    verdicts = batch_verdicts(table, format="openai", reencode=True)
    assert verdicts is not None
    if measured:
        verdicts.profile = settled_profile(verdicts)
        assert verdicts.profile is not None and verdicts.profile.per_row["messages"].count > 0
    merged = [f.rows for f in verdicts.repairs if f.code == "consecutive_assistant"]
    assert merged and merged[0].any() and (verdicts.repaired & ~merged[0]).any()
    strict = Config(actions={**DEFAULT.actions, "consecutive_assistant": "reject"})
    cleaned = clean_batch_parts(table, strict, format="openai", source="s", verdicts=verdicts)
    slow = clean_batch_parts(table, strict, format="openai", source="s", fast=False)
    _same(cleaned, slow)
    assert set(np.flatnonzero(merged[0])) <= {r["_source_row"] for r in slow.rejects.to_pylist()}


def test_clean_batch_with_reencoded_verdicts_matches_the_per_row_path(tmp_path: Path) -> None:
    table = _table(tmp_path, 300)
    verdicts = batch_verdicts(table, format="openai", reencode=True)
    fast = clean_batch(table, format="openai", source="s", verdicts=verdicts)
    slow = clean_batch(table, format="openai", source="s", fast=False)
    assert fast.kept.equals(slow.kept) and fast.rejects.equals(slow.rejects)
    assert fast.stats == slow.stats


def test_clean_relines_with_jsonl_out_and_audit_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An audit's samples of repaired rows come from the per-row path reading the line; a clean
    # with JSON Lines output has the Arrow side settle them and the per-row path write lines.
    rates = {code: 3 * rate for code, rate in default_rates("openai").items()}
    path = tmp_path / "rows.jsonl"
    rows = generate_rows(400, "openai", seed=5, rates=rates)
    path.write_text("".join(json.dumps(without_nulls(row)) + "\n" for row, _ in rows))
    relined: list[int] = []
    real = pipeline._relined

    def counting(*args: Any) -> Any:
        out = real(*args)
        relined.append(len(out[1]))
        return out

    monkeypatch.setattr(pipeline, "_relined", counting)
    audit(str(path), samples=5)
    assert relined == []
    clean(path, tmp_path / "parquet")
    assert relined == []  # Parquet output: the lines are not written
    result = clean(path, tmp_path / "jsonl", output_format="jsonl")
    assert sum(relined) > 10 and result.stats.rows_repaired >= sum(relined)
