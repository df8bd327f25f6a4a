"""orphan_tool_result (R3) and what a later turn reads (issue 27, item 4): an orphan result is
dropped only when dropping it cannot change what a later assistant turn means (it is empty, or
repeats a result already given); otherwise the row is rejected, unless the config's
`[repair] orphan_result = "drop"` asks to drop it anyway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from transcript_clean.cli import main
from transcript_clean.errors import ConfigError
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT, config_from_dict, load_config
from transcript_clean.rows import clean_row

ROWS = Path(__file__).resolve().parent / "data" / "glaive_toolcall_zh_rows.json"
"""glaive zh rows 3, 197 and 293 (tests/data/README.md)."""
OPENAI = get_format("openai")
SHAREGPT = get_format("sharegpt")


def _glaive() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(ROWS.read_text(encoding="utf-8"))
    return rows


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str | None, **more: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **more}


def calling(id: str) -> dict[str, Any]:
    call = {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return a(None, tool_calls=[call])


def tool(id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": id, "content": text}


@pytest.mark.parametrize("fast", [True, False])
def test_glaive_zh_a_result_the_next_turn_quotes_rejects_the_row(fast: bool) -> None:
    # Rows 197 and 293: the call is written in the assistant's text, the observation answers no
    # call, and the next turn quotes it (160). Dropping it would teach the model to invent it.
    table = pa.Table.from_pylist(_glaive())
    result = clean_batch(table, DEFAULT, format=SHAREGPT, fast=fast)
    assert result.kept.num_rows == 1
    assert result.kept.to_pylist() == _glaive()[:1]
    assert result.rejects.column("_reject_codes").to_pylist() == [["orphan_tool_result"]] * 2
    assert result.rejects.column("_reject_message").to_pylist()[0] == (
        "message 2: tool result for 'result_2' answers no pending call, and an assistant turn "
        "after it may use what it says: dropping it would leave that turn stating a result it "
        "never saw"
    )
    records = [(r["code"], r["action"], r["rows"]) for r in result.stats.records()]
    assert records == [("orphan_tool_result", "rejected", 2)]


@pytest.mark.parametrize("fast", [True, False])
def test_the_config_may_drop_such_a_result_anyway(fast: bool) -> None:
    drop = config_from_dict({"repair": {"orphan_result": "drop"}})
    table = pa.Table.from_pylist(_glaive())
    result = clean_batch(table, drop, format=SHAREGPT, fast=fast)
    assert result.rejects.num_rows == 0
    merged = result.kept.column("conversations").to_pylist()[1]
    assert [t["from"] for t in merged] == ["human", "gpt", "human", "gpt"]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    "messages",
    [
        # the same result given twice: the second says nothing the turn after had not read
        [u("q"), calling("c1"), tool("c1", "42"), tool("c1", "42"), a("It is 42.")],
        # an empty result
        [u("q"), a("Hi."), tool("c9", " "), u("more"), a("Bye.")],
        # no assistant turn after it reads anything
        [u("q"), a("Hi."), u("more"), a("Bye."), tool("c9", "late")],
    ],
    ids=["repeat", "empty", "last"],
)
def test_an_orphan_that_cannot_change_a_later_turn_is_dropped(
    messages: list[dict[str, Any]], fast: bool
) -> None:
    table = pa.Table.from_pylist([{"messages": messages}])
    result = clean_batch(table, DEFAULT, format=OPENAI, fast=fast)
    assert result.rejects.num_rows == 0
    kept = result.kept.column("messages").to_pylist()[0]
    assert len(kept) == len(messages) - 1
    assert [r["action"] for r in result.stats.records() if r["code"] == "orphan_tool_result"] == [
        "repaired"
    ]


@pytest.mark.parametrize("fast", [True, False])
def test_a_different_second_result_for_one_call_rejects_the_row(fast: bool) -> None:
    messages = [u("q"), calling("c1"), tool("c1", "42"), tool("c1", "43"), a("It is 43.")]
    table = pa.Table.from_pylist([{"messages": messages}])
    result = clean_batch(table, DEFAULT, format=OPENAI, fast=fast)
    assert result.kept.num_rows == 0
    assert result.rejects.column("_reject_codes").to_pylist() == [["orphan_tool_result"]]


def test_strict_still_rejects_every_orphan() -> None:
    messages = [u("q"), a("Hi."), tool("c9", ""), u("more"), a("Bye.")]
    result = clean_row({"messages": messages}, OPENAI, load_config("strict"))
    assert result.status == "rejected" and result.codes == ["orphan_tool_result"]


def test_orphan_result_takes_reject_or_drop_only() -> None:
    assert load_config("default").orphan_result == "reject"
    with pytest.raises(ConfigError, match=r"repair\.orphan_result = 'keep' is not allowed"):
        config_from_dict({"repair": {"orphan_result": "keep"}})


def test_explain_shows_why_glaive_zh_row_197_is_rejected() -> None:
    result = CliRunner().invoke(main, ["explain", str(ROWS), "--row", "1"])
    assert result.exit_code == 0, result.output
    assert "orphan_tool_result       rejected  message 2:" in result.output
    assert "Outcome: rejected: message 2: tool result for 'result_2' answers no pending" in (
        result.output
    )
