"""Samples: the first rows of each code, in input order, whichever path settled them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from audit_rows import ROWS, TYPED, write_jsonl

from transcript_clean.audit import audit
from transcript_clean.audit.samples import merge_samples
from transcript_clean.run import clean


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "train.jsonl", ROWS)


def test_samples_are_the_first_rows_of_each_code(data: Path) -> None:
    result = audit(str(data), samples=1)
    where = {code: [(s.source, s.row) for s in samples] for code, samples in result.samples.items()}
    assert where == {
        "empty_assistant_turn": [(str(data), 4)],
        "orphan_tool_result": [(str(data), 3)],
        "consecutive_assistant": [(str(data), 1)],
        "no_assistant_turn": [(str(data), 6)],
    }
    assert [s.row for s in audit(str(data), samples=5).samples["consecutive_assistant"]] == [1, 7]
    assert audit(str(data), samples=0).samples == {}
    typed = write_jsonl(data.with_name("typed.jsonl"), TYPED)
    assert [s.row for s in audit(str(typed)).samples["consecutive_assistant"]] == [1, 7]


def test_samples_carry_the_repair_before_and_after(data: Path) -> None:
    result = audit(str(data))
    [first, _] = result.samples["consecutive_assistant"]
    assert first.action == "repaired" and first.outcome == "repaired"
    assert first.violations and "assistant" in first.violations[0]
    [step] = first.steps
    assert len(step.before) == 3 and len(step.after) == 2

    [rejected] = result.samples["no_assistant_turn"]
    assert rejected.outcome == "rejected" and rejected.steps == ()
    assert rejected.reject_message == "the transcript has no assistant turn"

    strict = audit(str(data), config="strict").samples["consecutive_assistant"][0]
    assert strict.action == "rejected" and strict.steps == ()


def _per_row_samples(folder: Path, fmt: str, config: str, n: int, batch_size: int) -> Any:
    """The first `n` rows of each code, with the fast path off: every row's codes come from the
    per-row path, in input order."""
    from transcript_clean.pipeline import clean_batch
    from transcript_clean.policy import load_config
    from transcript_clean.sources import open_source

    picked: dict[str, list[tuple[str, int]]] = {}
    src = open_source(str(folder))
    for part in src.parts():

        def on_row(number: int, row: Any, result: Any, name: str = part.name) -> None:
            for code in result.actions:
                if len(picked.setdefault(code, [])) < n:
                    picked[code].append((name, number))

        first = 0
        for batch in src.read(part, batch_size=batch_size):
            clean_batch(
                batch,
                load_config(config),
                format=fmt,
                source=part.name,
                first_row=first,
                on_row=on_row,
                fast=False,
            )
            first += batch.num_rows
    return picked


@pytest.mark.parametrize(
    ("fmt", "config", "n"),
    [
        ("openai", "default", 3),
        ("openai", "strict", 1),
        ("sharegpt", "default", 2),
        ("anthropic", "default", 3),
    ],
)
def test_samples_with_the_fast_path_are_those_of_the_per_row_path(
    tmp_path: Path, fmt: str, config: str, n: int
) -> None:
    """The fast path settles most defective rows without the per-row path's `on_row`; the audit
    still picks each code's first rows in input order, across batches, files and both paths."""
    import pyarrow as pa
    from synthetic import arrow_schema, generate_rows

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        rows = [row for row, _ in generate_rows(700, format=fmt, seed=20 + i)]
        table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
        pq.write_table(table, folder / f"part-{i}.parquet")
    result = audit(folder, config=config, format=fmt, samples=n, batch_size=128)

    expected = _per_row_samples(folder, fmt, config, n, 128)
    got = {code: [(s.source, s.row) for s in chosen] for code, chosen in result.samples.items()}
    assert got == expected
    assert sum(map(len, got.values())) > 4 * n
    reference = clean(folder, tmp_path / "out", config=config, format=fmt)
    assert result.stats.records() == reference.stats.records()


def test_merged_samples_are_the_first_of_each_code_in_block_order(data: Path) -> None:
    [*rows] = audit(str(data), samples=5).samples["consecutive_assistant"]
    first, second = rows  # rows 1 and 7
    blocks = [{"consecutive_assistant": [first]}, {}, {"consecutive_assistant": [second, first]}]
    assert merge_samples(blocks, 2) == {"consecutive_assistant": [first, second]}
    assert merge_samples(blocks, 1) == {"consecutive_assistant": [first]}
    assert merge_samples(blocks, 0) == {}


@pytest.mark.parametrize("rows_per_block", [1, 3, 100])
def test_samples_do_not_depend_on_the_blocks(data: Path, rows_per_block: int) -> None:
    assert audit(str(data), rows_per_block=rows_per_block).samples == audit(str(data)).samples
