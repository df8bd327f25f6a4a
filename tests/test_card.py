"""The dataset card written as OUTPUT/README.md."""

from __future__ import annotations

from typing import Any

from transcript_clean.card import dataset_card
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
    assert card.startswith("---\nconfigs:\n- config_name: default\n")
    assert "    path: data/*.parquet\n---\n" in card
    assert "from `raw/*.parquet` (format\n`sharegpt`, config `strict`)" in card
    assert "| in | 10 |" in card
    assert "| of which repaired | 2 |" in card
    assert "| rejected | 3 |" in card
    assert "| orphan_tool_result | rejected | 3 | 4 | 30.00% | raw/a.parquet#5 |" in card
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
