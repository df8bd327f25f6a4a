"""--tokenizer and --max-tokens: token lengths in the profile, and the too_long rule, with a
tiny tokenizer trained here (no model is ever downloaded)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from synthetic import arrow_schema, generate_rows

from transcript_clean.cli import main
from transcript_clean.errors import ConfigError
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT, config_from_dict
from transcript_clean.rules import TOO_LONG
from transcript_clean.tokens import load_tokenizer


def _row(*texts: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": "Be brief."}]
    for i, text in enumerate(texts):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"messages": messages}


ROWS = [
    _row("Hello there", "one two three four five six"),  # 3 + 2 + 6 = 11 tokens
    _row("Weather in Paris?", "Hello"),  # 3 + 4 + 1 = 8
]


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema("openai"))


@pytest.mark.parametrize("fast", [True, False], ids=["arrow", "per-row"])
def test_the_profile_counts_tokens_per_row_and_per_assistant_turn(
    tokenizer: str, fast: bool
) -> None:
    config = replace(DEFAULT, tokenizer=tokenizer)
    report = clean_batch(_table(ROWS), config, format="openai", fast=fast).stats.profile.report()
    assert report["per_row"]["tokens"] == {
        "count": 2, "mean": 9.5, "p5": 8, "p50": 8, "p95": 11, "max": 11
    }  # fmt: skip
    assert report["per_assistant_turn"]["tokens"]["max"] == 6
    assert report["per_assistant_turn"]["tokens"]["p5"] == 1


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_arrow_and_per_row_tokens_agree_on_generated_rows(tokenizer: str, fmt: str) -> None:
    rows = [row for row, _ in generate_rows(800, format=fmt, seed=2)]
    table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
    config = replace(DEFAULT, tokenizer=tokenizer)
    fast = clean_batch(table, config, format=fmt).stats.profile.report()
    slow = clean_batch(table, config, format=fmt, fast=False).stats.profile.report()
    assert fast == slow
    assert fast["per_row"]["tokens"]["max"] > 0


def test_too_long_is_kept_and_counted_by_default(tokenizer: str) -> None:
    config = replace(DEFAULT, tokenizer=tokenizer, max_tokens=10)
    result = clean_batch(_table(ROWS), config, format="openai")
    assert result.kept.num_rows == 2
    entry = result.stats.codes[(TOO_LONG, "kept")]
    assert (entry.rows, entry.example_row) == (1, 0)


def test_too_long_rows_can_be_rejected(tokenizer: str) -> None:
    config = replace(
        config_from_dict({"actions": {TOO_LONG: "reject"}}), tokenizer=tokenizer, max_tokens=8
    )
    result = clean_batch(_table(ROWS), config, format="openai")
    assert result.kept.num_rows == 1
    assert result.rejects.column("_reject_codes").to_pylist() == [[TOO_LONG]]
    assert "11 tokens, over the limit of 8" in result.rejects.column("_reject_message")[0].as_py()


def test_too_long_is_not_looked_for_without_max_tokens(tokenizer: str) -> None:
    result = clean_batch(_table(ROWS), replace(DEFAULT, tokenizer=tokenizer), format="openai")
    assert not any(code == TOO_LONG for code, _ in result.stats.codes)


def test_the_cli_takes_a_tokenizer(tokenizer: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(_table(ROWS), tmp_path / "in.parquet")
    args = ["clean", str(tmp_path / "in.parquet"), str(tmp_path / "out"), "--quiet"]
    result = CliRunner().invoke(main, [*args, "--tokenizer", tokenizer, "--max-tokens", "10"])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "out" / "summary.json").read_text()
    assert '"too_long"' in summary and '"tokens"' in summary


def test_max_tokens_needs_a_tokenizer(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["audit", str(tmp_path), "--max-tokens", "5"])
    assert result.exit_code == 2
    assert "--max-tokens needs --tokenizer" in result.output


def test_a_missing_tokenizer_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_tokenizer(str(tmp_path / "nope.json"))


def test_without_the_package_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tokenizer: str
) -> None:
    load_tokenizer.cache_clear()
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    try:
        with pytest.raises(ConfigError, match=r"transcript-clean\[tokens\]"):
            load_tokenizer(tokenizer + ".other")
    finally:
        load_tokenizer.cache_clear()


def test_a_tokenizer_whose_vocabulary_lacks_its_unknown_token_is_refused_first(
    tmp_path: Path,
) -> None:
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))  # [UNK] is never trained into it
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["Hello there"], trainers.WordLevelTrainer(special_tokens=[]))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    pq.write_table(_table(ROWS), tmp_path / "in.parquet")
    args = ["clean", str(tmp_path / "in.parquet"), str(tmp_path / "out"), "--quiet"]
    result = CliRunner().invoke(main, [*args, "--tokenizer", str(path)])
    assert result.exit_code == 2, result.output
    assert f"--tokenizer {path}: it cannot encode text it does not know" in result.output
    assert "[UNK]" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()
