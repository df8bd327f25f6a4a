"""The dataset card written as OUTPUT/README.md."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transcript_clean.card import (
    SIZE_CATEGORIES,
    block_yaml,
    card_header,
    dataset_card,
    header_yaml,
)
from transcript_clean.run import clean
from transcript_clean.stats import Stats, run_summary


def summary_of(stats: Stats) -> dict[str, Any]:
    return run_summary(
        stats,
        source="raw/*.parquet",
        format="sharegpt",
        column="conversations",
        config={"name": "strict"},
        fingerprint="abc123",
        seconds=1.0,
    )


def test_the_card_says_what_was_cleaned_how_and_gives_the_stats_table() -> None:
    stats = Stats(rows_in=10, rows_kept=7, rows_repaired=2, rows_rejected=3, messages_in=40)
    stats.add_code("orphan_tool_result", "rejected", 3, 4, "raw/a.parquet", 5)
    card = dataset_card(summary_of(stats), stats.records())
    # The YAML header is what the Hub and `datasets` read to find the shards.
    assert card.startswith("---\nlicense: unknown\n")
    header = "- config_name: default\n  data_files:\n  - split: train\n    path: data/*.parquet\n"
    assert header in card
    assert "from `raw/*.parquet` (format\n`sharegpt`, config `strict`)" in card
    assert "| in | 10 |" in card
    assert "| of which repaired | 2 |" in card
    assert "| rejected | 3 |" in card
    assert "| orphan_tool_result | rejected | 3 | 4 | 30.00% | `raw/a.parquet#5` |" in card
    assert card.endswith("Input fingerprint: `abc123`.\n")


def test_a_card_with_no_violations_says_so() -> None:
    card = dataset_card(summary_of(Stats(rows_in=1, rows_kept=1)), [])
    assert "No violations were found." in card
    assert "| code |" not in card


def test_the_card_gives_the_profile() -> None:
    import pyarrow as pa
    from synthetic import arrow_schema, generate_rows

    from transcript_clean.pipeline import clean_batch

    rows = [row for row, _ in generate_rows(200, format="openai", seed=3)]
    stats = clean_batch(pa.Table.from_pylist(rows, schema=arrow_schema("openai"))).stats
    card = dataset_card(summary_of(stats), stats.records())
    assert "## Profile" in card
    profile = stats.profile.report()
    chars = profile["per_row"]["chars"]
    assert f"| chars per row | {chars['count']} | {chars['mean']:,.1f} | {chars['p5']:,} |" in card
    assert f"| text | {profile['turns']['text']:,} |" in card
    assert "Calls per tool: `" in card
    assert card.endswith("Input fingerprint: `abc123`.\n")


GLAIVE = (
    Path(__file__).resolve().parent.parent.parent
    / "shared/data/sharegpt/glaive_toolcall_en_demo.json"
)


def glaive_counts() -> tuple[Counter[str], Counter[str]]:
    """Per tool, read from the file itself: the rows declaring it and the calls to it."""
    declared: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for row in json.loads(GLAIVE.read_text(encoding="utf-8")):
        declared.update({tool["name"] for tool in json.loads(row["tools"] or "[]")})
        for message in row["conversations"]:
            if message["from"] == "function_call":
                value = json.loads(message["value"])
                calls.update(c["name"] for c in (value if isinstance(value, list) else [value]))
    return declared, calls


def table_rows(card: str, header: str) -> list[list[str]]:
    """The cells of the Markdown table under `header`, its header and rule left out."""
    lines = card[card.index(header) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_declared_tools_table_is_one_list_of_tools_cut_once(tmp_path: Path) -> None:
    if not GLAIVE.exists():
        pytest.skip("the shared data folder is absent")
    clean(GLAIVE, tmp_path / "out")
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    rows = table_rows(card, "## Declared tools")
    declared, calls = glaive_counts()
    named = [row for row in rows if not row[0].startswith("other")]
    assert len(named) == 20 and len(rows) == 21  # the top 20, then the rest in one line
    for name, called, declaring in named:
        tool = name.strip("`")
        assert (int(called), int(declaring)) == (calls[tool], declared[tool]), name
    # The most called first; each of the rest called no more than the last one named.
    assert [int(r[1]) for r in named] == sorted((int(r[1]) for r in named), reverse=True)
    rest = set(declared) | set(calls)
    rest -= {r[0].strip("`") for r in named}
    assert max(calls[t] for t in rest) <= int(named[-1][1])
    other = rows[-1]
    assert int(other[1]) == sum(calls[t] for t in rest)
    assert int(other[2]) == sum(declared[t] for t in rest)


def test_data_in_the_card_cannot_become_markup() -> None:
    stats = Stats(rows_in=2, rows_kept=1, rows_rejected=1, rows_declaring_tools=2)
    evil = ["<script>alert(1)</script>", "a`b|c", "x\n| forged | row |"]
    stats.tools_declared = {name: 1 for name in evil}
    stats.tool_calls = {name: 1 for name in evil}
    stats.add_code("unknown_tool", "rejected", 1, 1, "raw/<img src=x onerror=alert(1)>|.json", 0)
    summary = summary_of(stats)
    summary["source"] = "raw/`<b>x</b>`.json"
    card = dataset_card(summary, stats.records())
    for bad in ("<script>", "<img", "<b>", "| forged | row |"):
        assert bad not in card
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in card
    rows = table_rows(card, "## Declared tools")
    assert all(len(row) == 3 for row in rows)  # no `|` of a name splits a cell
    assert "a\\`b\\|c" in card
    stats_rows = table_rows(card, "## Error stats")
    assert all(len(row) == 6 for row in stats_rows)


def test_the_card_header_is_the_hubs_card_data(tmp_path: Path) -> None:
    from huggingface_hub import DatasetCard

    stats = Stats(rows_in=1500, rows_kept=1400, rows_rejected=100)
    schema = pa.schema(
        [
            pa.field(
                "messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
            ),
            pa.field("tools", pa.json_()),
            pa.field("weight", pa.float64()),
        ]
    )
    card = dataset_card(summary_of(stats), stats.records(), schema=schema)
    data = DatasetCard(card).data.to_dict()
    assert data["license"] == "unknown"
    assert data["size_categories"] == ["1K<n<10K"]
    assert data["configs"] == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]},
        {"config_name": "rejects", "data_files": [{"split": "train", "path": "rejects/*.parquet"}]},
    ]
    assert data["dataset_info"]["features"] == [
        {
            "name": "messages",
            "list": [{"name": "role", "dtype": "string"}, {"name": "content", "dtype": "string"}],
        },
        {"name": "tools", "dtype": "json"},
        {"name": "weight", "dtype": "float64"},
    ]
    clean_only = Stats(rows_in=5, rows_kept=5)
    data = DatasetCard(dataset_card(summary_of(clean_only), [])).data.to_dict()
    assert [c["config_name"] for c in data["configs"]] == ["default"]  # no config of no rows
    assert data["size_categories"] == ["n<1K"] and "dataset_info" not in data


def test_a_lone_surrogate_in_a_tool_name_is_written_escaped(tmp_path: Path) -> None:
    """A tool named with JSON's `"\\ud800"` (a lone surrogate, no UTF-8 form), read from the
    `_raw_line` of the tool's own rejects: the card was never written (`UnicodeEncodeError`,
    the run left unfinished). It is, with the surrogate as its escape."""
    name = "t\ud800"  # json.dumps writes it as JSON's escape
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a"},  # a repair: the row is read from its line
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    row = json.dumps({"messages": messages}) + "\n"
    (tmp_path / "in.jsonl").write_text(row)
    clean(str(tmp_path / "in.jsonl"), str(tmp_path / "first"))
    clean(str(tmp_path / "first" / "rejects" / "part-00000.parquet"), str(tmp_path / "out"))
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "t\\ud800" in card


# Texts of headers: mostly plain for PyYAML, and the ones it quotes or reads as another type.
_TEXTS = st.one_of(
    st.from_regex(r"[ab_][ab0-3_./*<>\[\]-]{0,12}", fullmatch=True),
    st.text(alphabet="ab_./*<>[]-03 :#,'\"&!|?%@`~\u00e9\n", max_size=8),
    st.sampled_from(["yes", "No", "NULL", "nO", "on", "Off", "y", "n", "true", "1", "0x1", ".inf"]),
    st.sampled_from(["n<1K", "1K<n<10K", "n>1B", "x" * 100, "a b " * 30]),
)
_VALUES = st.recursive(
    _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=16,
)


@given(
    size=st.sampled_from([name for _, name in SIZE_CATEGORIES] + ["n>1B"]),
    configs=_VALUES,
    features=st.none() | _VALUES,
)
def test_the_header_is_written_as_the_hubs_card_data_writes_it(
    size: str, configs: Any, features: Any
) -> None:
    from huggingface_hub import DatasetCardData

    header = {"license": "unknown", "size_categories": [size], "configs": configs}
    if features is not None:
        header["dataset_info"] = {"features": features}
    assert header_yaml(header) == DatasetCardData(**header).to_yaml()


def test_a_usual_header_is_written_without_the_hubs_code() -> None:
    schema = pa.schema(
        [
            pa.field("messages", pa.list_(pa.struct([("role", pa.string()), ("n", pa.int64())]))),
            pa.field("tools", pa.json_()),
            pa.field("when", pa.timestamp("us")),
        ]
    )
    summary = summary_of(Stats(rows_in=20_000, rows_kept=15_000, rows_rejected=5_000))
    for data_files in ("data/*.parquet", "data/*.jsonl.zst"):
        assert block_yaml(card_header(summary, data_files, schema)) is not None
    # A text PyYAML quotes is left to it.
    assert (
        block_yaml(card_header(summary, "data/*.parquet", pa.schema([("yes", pa.int8())]))) is None
    )


@pytest.mark.parametrize(
    "name", ["yes", "No", "NULL", "on", "Off", "TRUE", "false", "n", "y", "nO", "1K", "a:b", "#a"]
)
def test_a_column_name_yaml_reads_as_another_type_is_written_as_the_hub_writes_it(
    name: str,
) -> None:
    from huggingface_hub import DatasetCardData

    summary = summary_of(Stats(rows_in=1, rows_kept=1))
    header = card_header(summary, "data/*.parquet", pa.schema([(name, pa.string())]))
    assert header_yaml(header) == DatasetCardData(**header).to_yaml()
