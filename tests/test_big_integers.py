"""Integers outside 64 bits read exactly everywhere: orjson reads one outside [-2**63, 2**64) as
a float and Arrow's JSON reader one outside int64 as a double, where `json.loads` keeps the
integer. Generated rows of every format that reads JSON text get such integers in their calls'
arguments and results (and 20-digit ids inside strings, which must change nothing); both paths
must judge them as they judge small integers, and the output must keep their digits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from differential import assert_fast_and_slow_agree
from hypothesis import given
from hypothesis import strategies as st
from synthetic import every_rates, generate_rows

from transcript_clean.columnar.arrays import digit_run, long_digits
from transcript_clean.formats import get_format
from transcript_clean.jsontext import has_long_digits, loads, strict_loads
from transcript_clean.pipeline import CleanedBatch, clean_batch
from transcript_clean.policy import DEFAULT, STRICT
from transcript_clean.run import clean
from transcript_clean.sources import jsontypes, open_source
from transcript_clean.tools import json_loads

DRAFT4 = '"$schema": "http://json-schema.org/draft-04/schema#", '
"""Draft 4's `integer` takes no float: a huge integer read as one breaks the schema."""
ID = "12345678901234567890"
_NUMBER = re.compile(r'(\\?")(max_results|amount|temperature)\1: (-?[0-9]+)')
_CITY = re.compile(r'(\\?")(Paris|Tokyo|Lima)\1')
_SCHEMA = re.compile(r'(\\?")(parameters|input_schema)\1: \{')
_FLOAT = re.compile(r"[0-9]\.[0-9]+e\+?[0-9]+")


def huge(n: int) -> int:
    """A huge integer for `n`, one to one: past 64 bits either way, or in [2**63, 2**64), which
    orjson reads exactly but Arrow's JSON reader as a double."""
    return (2**64 + n, -(2**63) - 1 - n, 10**30 + n, 2**63 + n, 2**64 - 1 - n)[abs(n) % 5]


def with_huge(row: dict[str, Any], *, draft4: bool, small: bool = False) -> dict[str, Any]:
    """`row` with the integers its calls take and its results give (in JSON text or in objects)
    made huge (unless `small`), some cities named with a 20-digit id, and with `draft4` its
    declared schemas Draft 4's."""
    text = json.dumps(row)
    if not small:
        text = _NUMBER.sub(lambda m: f"{m[1]}{m[2]}{m[1]}: {huge(int(m[3]))}", text)
        text = _CITY.sub(lambda m: f"{m[1]}{m[2]} {ID}{m[1]}", text)
    if draft4:
        text = _SCHEMA.sub(lambda m: m[0] + DRAFT4.replace('"', m[1]), text)
    return json.loads(text)


def generated(fmt: str, *, tools: bool, n: int = 300) -> list[dict[str, Any]]:
    rates = every_rates(fmt, tools=tools)
    rows = [row for row, _ in generate_rows(n, fmt, seed=3, rates=rates)]
    if not tools:
        rows = [{k: v for k, v in row.items() if k != "tools"} for row in rows]
    return rows


def verdicts(cleaned: CleanedBatch) -> tuple[list[tuple[int, list[str]]], int, int]:
    """Each rejected row with its codes, the rows kept and the rows repaired."""
    rejects = cleaned.rejects.select(["_source_row", "_reject_codes"]).to_pylist()
    return (
        [(r["_source_row"], r["_reject_codes"]) for r in rejects],
        cleaned.kept.num_rows,
        cleaned.stats.rows_repaired,
    )


def huge_numbers(rows: list[dict[str, Any]]) -> set[str]:
    return set(re.findall(r"-?[0-9]{19,}", json.dumps(rows)))


# Formats whose calls' arguments are JSON text in a string: huge integers fit a Parquet file.
IN_TEXT = ["sharegpt", "hermes", "llamafactory", "openai", "responses"]
# Every format whose rows hold calls, read from JSON Lines (objects' integers too).
IN_LINES = [*IN_TEXT, "anthropic", "rig", "gemini", "bedrock", "openhands", "claude-code"]


@pytest.mark.parametrize("declared", [True, False], ids=["draft4-tools", "no-tools"])
@pytest.mark.parametrize("fmt", IN_TEXT)
def test_huge_integers_in_json_text_are_judged_as_small_ones(fmt: str, declared: bool) -> None:
    small = generated(fmt, tools=declared)
    big = [with_huge(row, draft4=declared) for row in small]
    draft4 = [with_huge(row, draft4=declared, small=True) for row in small]
    assert huge_numbers(big)  # the rows hold some
    fmt_ = get_format(fmt)
    table = pa.Table.from_pylist(big)
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt_)
    expected = clean_batch(pa.Table.from_pylist(draft4), DEFAULT, format=fmt_, source="s")
    assert verdicts(clean_batch(table, DEFAULT, format=fmt_, source="s")) == verdicts(expected)


@pytest.mark.parametrize("fmt", IN_LINES)
def test_huge_integers_in_json_lines_are_judged_as_small_ones_and_kept(
    fmt: str, tmp_path: Path
) -> None:
    small = generated(fmt, tools=True, n=200)
    big = [with_huge(row, draft4=True) for row in small]
    draft4 = [with_huge(row, draft4=True, small=True) for row in small]
    numbers = huge_numbers(big)
    assert numbers
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in big))
    reference = tmp_path / "small.jsonl"
    reference.write_text("".join(json.dumps(row) + "\n" for row in draft4))
    fmt_ = get_format(fmt)

    def table_of(path: Path) -> pa.Table:
        read = open_source(str(path))
        return pa.Table.from_batches(list(read.read(read.parts()[0])))

    table = table_of(source)
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt_)
    expected = clean_batch(table_of(reference), DEFAULT, format=fmt_, source="s")
    assert verdicts(clean_batch(table, DEFAULT, format=fmt_, source="s")) == verdicts(expected)

    for output_format in ("jsonl", "parquet"):
        out = tmp_path / output_format
        clean(source, out, format=fmt, output_format=output_format)
        written = _written(out / "data", output_format) + _written(out / "rejects", output_format)
        assert_kept(numbers, written)


def assert_kept(numbers: set[str], written: str) -> None:
    """The output `written` holds huge integers of the input (`numbers`) and no other, nor
    any float: repairs drop a few (R5's cut), none is changed."""
    assert not _FLOAT.search(written)
    found = set(re.findall(r"-?[0-9]{19,}", written)) - {ID}
    assert found <= numbers
    assert len(found) > 0.9 * len(numbers)


def _written(folder: Path, output_format: str) -> str:
    """The rows in `folder`'s shards, as JSON text (a Parquet shard's `json_` values as text)."""
    if output_format == "jsonl":
        return "".join(p.read_text() for p in sorted(folder.glob("*.jsonl")))
    texts = []
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path)
        texts.append(json.dumps(jsontypes.python_rows(table), default=str))
    return "".join(texts)


@pytest.mark.parametrize("fmt", ["sharegpt", "hermes", "llamafactory"])
def test_huge_integers_keep_their_digits_written_in_another_format(
    fmt: str, tmp_path: Path
) -> None:
    big = [with_huge(row, draft4=False) for row in generated(fmt, tools=False, n=100)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(big), source)
    clean(source, tmp_path / "out", format=fmt, to="openai", output_format="jsonl")
    written = _written(tmp_path / "out" / "data", "jsonl")
    assert not _FLOAT.search(written)
    assert huge_numbers(big) & set(re.findall(r"-?[0-9]{19,}", written))


def test_huge_integers_in_a_claude_code_session_keep_their_digits(tmp_path: Path) -> None:
    rows = [with_huge(row, draft4=False) for row in generated("claude-code", tools=False, n=40)]
    source = tmp_path / "session.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for row in rows for e in row["events"]))
    numbers = huge_numbers(rows)
    assert numbers
    for output_format in ("jsonl", "parquet"):
        out = tmp_path / output_format
        clean(source, out, output_format=output_format)
        written = _written(out / "data", output_format) + _written(out / "rejects", output_format)
        assert_kept(numbers, written)


# ---------------------------------------------------------------------------------------------
# the readers


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.from_regex(r"[a-z ]*[0-9]{19,22}[a-z ]*", fullmatch=True)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type at every depth (1 == 1.0, but not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@given(_VALUES, st.sampled_from([None, 0, 2]))
def test_every_reader_reads_what_json_loads_reads(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    expected = json.loads(text)
    for read in (loads, strict_loads, json_loads, jsontypes.loads):
        assert same(read(text), expected), read
    assert same(jsontypes.loads(text.encode()), expected)
    assert same(jsontypes.loads(memoryview(text.encode())), expected)


_DIGITS_AND_MORE = st.text(alphabet="0123456789 a\u00e9\u0663", max_size=90)


@given(st.lists(_DIGITS_AND_MORE | st.none(), max_size=6))
def test_long_runs_of_digits_are_found_as_a_regular_expression_finds_them(
    texts: list[str | None],
) -> None:
    """Over a column (sliced: its bytes start past its buffer's), per text and in bytes."""
    expected = [t is not None and re.search("[0-9]{19}", t) is not None for t in texts]
    column = pa.array(["1" * 40, *texts], pa.large_string()).slice(1)
    assert long_digits(column).tolist() == expected
    assert long_digits(pa.array(texts, pa.string())).tolist() == expected
    for text, long in zip(texts, expected, strict=True):
        if text is not None:
            assert has_long_digits(text) is long
            assert has_long_digits(memoryview(text.encode())) is long
            assert digit_run(np.frombuffer(text.encode(), dtype=np.uint8)) is long
