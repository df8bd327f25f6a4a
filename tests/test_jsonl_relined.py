"""JSON Lines rows the Arrow side repairs while their lines are written (`batch_verdicts`'s
`reencode`): the Arrow side settles them, the per-row path re-encodes their lines, and the
batch comes out exactly as the per-row path alone cleans it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from jsonl_bench import without_nulls
from synthetic import default_rates, generate_rows

import transcript_clean.pipeline.batch as pipeline_batch
import transcript_clean.pipeline.lines as pipeline_lines
from transcript_clean.audit import audit
from transcript_clean.formats import get_format
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
    real = pipeline_lines.relined

    def counting(*args: Any) -> Any:
        out = real(*args)
        relined.append(len(out[1]))
        return out

    monkeypatch.setattr(pipeline_batch, "relined", counting)
    audit(str(path), samples=5)
    assert relined == []
    clean(path, tmp_path / "parquet")
    assert relined == []  # Parquet output: the lines are not written
    result = clean(path, tmp_path / "jsonl", output_format="jsonl")
    assert sum(relined) > 10 and result.stats.rows_repaired >= sum(relined)


def _varied(row: dict[str, Any], k: int, parts: bool) -> dict[str, Any]:
    """A generated row written the ways real files write theirs: keys in another order,
    fields the rules do not read (`weight`, a name), reasoning, calls and results paired by
    position (no ids), `content: null` kept; with `parts`, every text a list of parts."""
    messages = []
    for m in row["messages"]:
        if not isinstance(m, dict):  # a malformed row's
            messages.append(m)
            continue
        m = dict(m)
        role = m.get("role")
        if k % 2 and role == "assistant":
            m["weight"] = 1
        if k % 6 == 1 and role == "assistant" and m.get("tool_calls"):
            m.setdefault("content", None)
        if k % 3 == 0:
            m = dict(reversed(list(m.items())))
        if parts and isinstance(m.get("content"), str):
            m["content"] = [{"text": m["content"], "type": "text"}]
        if k % 7 == 0 and role == "assistant" and m.get("tool_calls"):
            m["reasoning_content"] = "Which tool, then?"
        messages.append(m)
    if k % 4 == 0:  # TRL's shape: no ids on either side
        for m in messages:
            if isinstance(m, dict):
                m.pop("tool_call_id", None)
                for call in m.get("tool_calls") or []:
                    if isinstance(call, dict):
                        call.pop("id", None)
    return {"name": f"row {k}", **row, "messages": messages}


def _varied_table(tmp_path: Path, parts: bool) -> pa.Table:
    rates = {code: 3 * rate for code, rate in default_rates("openai").items()}
    rows = generate_rows(1500, "openai", seed=3, rates=rates)
    path = tmp_path / "rows.jsonl"
    lines = (json.dumps(_varied(without_nulls(r), k, parts)) for k, (r, _) in enumerate(rows))
    path.write_text("".join(line + "\n" for line in lines))
    source = open_source(str(path))
    return pa.Table.from_batches(list(source.read(source.parts()[0])))


def _counted_reencodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for each row the per-row path re-encodes from now on."""
    reencoded: list[int] = []
    real = pipeline_lines.clean_stored_row

    def counting(row: Any, *args: Any, **kwargs: Any) -> Any:
        reencoded.append(1)
        return real(row, *args, **kwargs)

    monkeypatch.setattr(pipeline_lines, "clean_stored_row", counting)
    return reencoded


def test_edited_lines_are_the_lines_the_per_row_path_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A repaired line is its line edited where the view says where each message came from
    # (`repaired_origins`), with no row made Python; the per-row path would re-encode it
    # (without them). Both give the same bytes.
    table = _varied_table(tmp_path, parts=False)
    verdicts = batch_verdicts(table, format="openai", reencode=True)
    assert verdicts is not None and verdicts.repaired_origins is not None
    fmt = get_format("openai")
    reencoded = _counted_reencodes(monkeypatch)
    edited = pipeline_lines.relined(table, fmt, DEFAULT, False, verdicts)
    assert reencoded == []
    per_row = dataclasses.replace(verdicts, repaired_origins=None)
    slow = pipeline_lines.relined(table, fmt, DEFAULT, False, per_row)
    assert len(reencoded) == len(slow[1]) > 100
    assert edited[1] == slow[1] and edited[2] == slow[2] == []
    cleaned = clean_batch_parts(table, format="openai", source="s", verdicts=verdicts)
    _same(cleaned, clean_batch_parts(table, format="openai", source="s", fast=False))


def test_text_as_lists_of_parts_is_never_edited(tmp_path: Path) -> None:
    # The encoder writes a media part's keys in its own order, so a line with lists of parts
    # is not sure to be written as it came: the view does not read such a column (were it
    # to, `_edited` leaves those rows to the per-row path).
    table = _varied_table(tmp_path, parts=True)
    assert batch_verdicts(table, format="openai", reencode=True) is None


def test_a_line_that_does_not_read_as_the_arrow_side_read_it_is_left_to_the_per_row_path() -> None:
    # (a JSON key given twice, say, which two readers may take differently): never an error
    line = '{"id": 1, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}'
    edited = pipeline_lines._edited_line
    assert edited(line, "messages", [0], 0, {}, "content") == (
        '{"id":1,"messages":[{"role":"user","content":"hi"}]}'
    )
    assert edited(line, "messages", [0, 1], 0, {1: "hello"}, "content") == (
        '{"id":1,"messages":[{"role":"user","content":"hi"},'
        '{"role":"assistant","content":"hello"}]}'
    )
    assert edited(line, "messages", [0, 2], 0, {}, "content") is None  # past its end
    assert edited(line, "conversation", [0], 0, {}, "content") is None  # not there
    assert edited('{"messages": ["hi"]}', "messages", [0], 0, {}, "content") is None
    parts = '{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}'
    assert edited(parts, "messages", [0], 0, {}, "content") is None


def test_hh_lines_are_set_to_the_repaired_text_as_the_per_row_path_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hh's encoder sets the transcript's text alone (`Format.edits_line_value`): a repaired
    # line is its line with that value set, keys in their order, extra keys and values as they
    # came; the per-row path re-encoding the same rows writes the same bytes.
    rates = {"empty_assistant_turn": 0.15, "consecutive_assistant": 0.15}
    rows = [row for row, _ in generate_rows(600, "hh", seed=12, rates=rates)]
    extra = [{"id": k, "note": "é\u2028", "score": 1.5, **row} for k, row in enumerate(rows)]
    path = tmp_path / "hh.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in extra))
    source = open_source(str(path))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    verdicts = batch_verdicts(table, format="hh", reencode=True)
    assert verdicts is not None and verdicts.stale_lines and verdicts.repaired.sum() > 100
    fmt = get_format("hh")
    reencoded = _counted_reencodes(monkeypatch)
    edited = pipeline_lines.relined(table, fmt, DEFAULT, False, verdicts)
    assert reencoded == []
    monkeypatch.setattr(type(fmt), "edits_line_value", False)
    slow = pipeline_lines.relined(table, fmt, DEFAULT, False, verdicts)
    assert len(reencoded) == len(slow[1]) > 100
    assert edited[1] == slow[1] and edited[2] == slow[2] == []
    monkeypatch.setattr(type(fmt), "edits_line_value", True)
    cleaned = clean_batch_parts(table, format="hh", source="s", verdicts=verdicts)
    _same(cleaned, clean_batch_parts(table, format="hh", source="s", fast=False))
