"""`--to FORMAT` (convert.py): kept rows written in another format, tools in `tools`, a part the
target cannot hold a `lossy_conversion` reject, and the files `datasets` loads as TRL wants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from synthetic import generate_rows
from test_run import make_dataset

from transcript_clean.cli import main
from transcript_clean.convert import _first_loss, converting, tools_for
from transcript_clean.errors import FormatError
from transcript_clean.formats import get_format
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row
from transcript_clean.run import clean

WEATHER = {
    "id": 1,
    "system": "You are a weather bot.",
    "tools": [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}],
        },
        {"role": "assistant", "content": "It is 18 C in Paris."},
    ],
}
IMAGE = {
    "id": 2,
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "text", "text": "What is this?"},
            ],
        },
        {"role": "assistant", "content": "A cat."},
    ],
}


def trl_messages(messages: list[dict[str, Any]]) -> None:
    """The shape TRL's conversational format with tools documents, asserted message by message."""
    for message in messages:
        assert message["role"] in ("system", "user", "assistant", "tool")
        assert "content" in message
        for call in message.get("tool_calls") or []:
            assert call["type"] == "function"
            assert isinstance(call["function"]["name"], str)
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
        if message["role"] == "tool":
            assert isinstance(message["tool_call_id"], str)


def trl_dataset(out: Path, cache: Path) -> Any:
    """The JSON Lines rows of `out/data` as `datasets` loads them, each checked as TRL's
    conversational format with tools wants it (`messages` + `tools`)."""
    datasets = pytest.importorskip("datasets")
    files = sorted(str(p) for p in (out / "data").glob("*.jsonl"))
    loaded = datasets.load_dataset("json", data_files=files, split="train", cache_dir=str(cache))
    assert {"messages", "tools"} <= set(loaded.column_names)
    for row in loaded:
        trl_messages(row["messages"])
    return loaded


def test_anthropic_to_openai_row() -> None:
    result = clean_row(WEATHER, converting(get_format("anthropic"), "openai"))
    assert result.status == "unchanged"
    row = result.row
    assert row is not None
    assert "system" not in row and row["id"] == 1
    messages = row["messages"]
    trl_messages(messages)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["reasoning_content"] == "Look it up."
    assert messages[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"}
    assert row["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert result.messages_out == 5


def test_openai_to_anthropic_and_back() -> None:
    first = clean_row(WEATHER, converting(get_format("anthropic"), "openai")).row
    assert first is not None
    back = clean_row(first, converting(get_format("openai"), "anthropic")).row
    assert back is not None
    assert back["system"] == WEATHER["system"]
    assert back["tools"][0]["input_schema"] == WEATHER["tools"][0]["input_schema"]
    # the thinking text comes back; its signature is what --to openai leaves out
    assert back["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Look it up."}
    assert back["messages"][1:][1:] == WEATHER["messages"][2:]


@pytest.mark.parametrize(
    ("row", "to", "words"),
    [
        (WEATHER, "sharegpt", "reasoning in an assistant turn has no place in sharegpt"),
        (IMAGE, "sharegpt", "an image part in a user turn has no place in sharegpt"),
    ],
)
def test_a_lost_part_is_a_lossy_conversion(row: dict[str, Any], to: str, words: str) -> None:
    result = clean_row(row, converting(get_format("anthropic"), to))
    assert result.status == "rejected"
    assert result.codes == ["lossy_conversion"]
    assert result.reject_message == words
    assert result.row is None


def test_a_repaired_row_is_written_in_the_target() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "assistant", "content": "there."},
        ]
    }
    result = clean_row(row, converting(get_format("openai"), "sharegpt"))
    assert result.status == "repaired"
    assert result.row == {
        "system": None,
        "conversations": [
            {"from": "human", "value": "Hi"},
            {"from": "gpt", "value": "Hello\n\nthere."},
        ],
        "tools": None,
    }


def test_tools_in_each_shape() -> None:
    entry = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    assert tools_for("anthropic", [entry])[0] == [{"name": "f", "input_schema": {"type": "object"}}]
    text, problem = tools_for("sharegpt", [entry])
    assert problem is None and json.loads(text) == [{"name": "f", "parameters": {"type": "object"}}]
    assert tools_for("openai", [])[0] is None
    assert tools_for("openai", [{"type": "function"}])[1] == (
        "tools[0]: a declaration with no name has no place in openai"
    )


PREFERENCE = {
    "id": 7,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    "prompt": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
    ],
    # Each candidate starts with the result of the prompt's pending call.
    "chosen": [
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "assistant", "content": "It is 18 C in Paris."},
    ],
    "rejected": [
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "assistant", "content": "It is freezing."},
    ],
}


def _preference(to: str) -> Any:
    from transcript_clean.shapes import ShapedFormat, make_shape

    shape = make_shape("preference", ["id", "tools", "prompt", "chosen", "rejected"])
    return converting(ShapedFormat(get_format("openai"), shape), to)


@pytest.mark.parametrize("to", ["openai", "sharegpt", "anthropic", "rig"])
def test_a_preference_row_in_trls_layout(to: str) -> None:
    """Each candidate is written after the prompt and cut where the prompt ends: prompt +
    candidate reads back, in the target, as the source's prompt + candidate."""
    from transcript_clean.formats.base import without_origins

    fmt = _preference(to)
    result = fmt.clean(PREFERENCE, DEFAULT)
    assert result is not None and result.status == "unchanged", result
    row = result.row
    assert row is not None
    target, source = get_format(to), get_format("openai")
    assert set(row) == {"id", *target.side_columns, "prompt", "chosen", "rejected", "tools"}
    assert row["id"] == 7
    side = {name: row[name] for name in target.side_columns}
    for name in ("chosen", "rejected"):
        assert row[name] and row["prompt"]
        written = target.decode({**side, target.column: row["prompt"] + row[name]}).messages
        given = source.decode({"messages": PREFERENCE["prompt"] + PREFERENCE[name]}).messages
        assert len(without_origins(written)) == len(without_origins(given)) == 5
        assert _first_loss(given, written) is None
        # the candidate's column holds the candidate alone, from the prompt's pending result on
        back = target.decode({**side, target.column: row[name]}).messages
        assert [type(m).__name__ for m in back][-1] == "AssistantMessage"
    if to == "openai":  # an unchanged prompt is written as it came
        assert row["prompt"] == PREFERENCE["prompt"]
        assert row["chosen"][0] == {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}
        trl_messages(row["prompt"] + row["chosen"])
    if to == "anthropic":  # the system prompt goes where Anthropic keeps it
        assert row["system"] == "You are a weather bot."


def test_to_names_a_format_it_writes() -> None:
    with pytest.raises(FormatError, match="--to is one of openai, sharegpt, anthropic, rig"):
        converting(get_format("openai"), "gemini")


def test_a_candidate_the_target_cannot_hold_rejects_the_row() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    row = {
        **PREFERENCE,
        "rejected": [
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
            {"role": "assistant", "content": [{"type": "text", "text": "Look:"}, image]},
        ],
    }
    result = _preference("sharegpt").clean(row, DEFAULT)
    assert result is not None and result.status == "rejected"
    assert result.reject_message is not None
    assert result.reject_message.startswith("rejected: an image part in an assistant turn")
    assert "lossy_conversion" in result.actions


def test_a_rejected_preference_row_stays_rejected() -> None:
    row = {**PREFERENCE, "chosen": [{"role": "wizard", "content": "?"}]}
    result = _preference("openai").clean(row, DEFAULT)
    assert result is not None and result.status == "rejected"
    assert "lossy_conversion" not in result.actions


def test_trl_standard_rows_become_conversational(tmp_path: Path) -> None:
    """Prompt-completion rows of plain strings (`--type prompt-completion`; `auto` reads them
    as one conversation) come out as TRL's conversational rows."""
    source = tmp_path / "in.jsonl"
    rows = [
        {"prompt": "The sky is", "completion": " blue."},
        {"prompt": "2 + 2 =", "completion": " 4"},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    result = clean(
        source, out, to="openai", output_format="jsonl", dataset_type="prompt-completion"
    )
    assert result.stats.rows_kept == 2
    written = [json.loads(line) for line in (out / "data" / "part-00000.jsonl").open()]
    assert written[0]["prompt"] == [{"role": "user", "content": "The sky is"}]
    assert written[0]["completion"] == [{"role": "assistant", "content": " blue."}]
    assert written[1]["completion"] == [{"role": "assistant", "content": " 4"}]


def test_llamafactory_ranking_rows_to_openai(tmp_path: Path, shared_data: Path) -> None:
    """The real DPO demo (ShareGPT ranking rows: `conversations`, one `chosen` and `rejected`
    message each) as TRL's conversational preference rows, loaded by `datasets`."""
    datasets = pytest.importorskip("datasets")
    source = shared_data / "preference" / "llamafactory_dpo_en_demo.json"
    plain = clean(source, tmp_path / "plain")
    result = clean(source, tmp_path / "out", to="openai")
    assert result.stats.rows_kept == plain.stats.rows_kept == 300
    files = sorted(str(p) for p in (tmp_path / "out" / "data").glob("*.parquet"))
    loaded = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert set(loaded.column_names) == {"prompt", "chosen", "rejected", "tools"}
    given = json.loads(source.read_text())
    for row, was in zip(loaded, given, strict=True):
        trl_messages(row["prompt"] + row["chosen"] + row["rejected"])
        assert [m["content"] for m in row["prompt"]] == [t["value"] for t in was["conversations"]]
        assert row["chosen"] == [{"role": "assistant", "content": was["chosen"]["value"]}]
        assert row["rejected"] == [{"role": "assistant", "content": was["rejected"]["value"]}]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "each ranking row in TRL's layout of it" in card


def test_a_converted_dataset_type_is_profiled_as_it_came_in(tmp_path: Path) -> None:
    """The profile of rows written in another format is the one a run without --to measures,
    also where a prompt's repair changes the transcript the per-row path holds."""
    source = tmp_path / "in.jsonl"
    rows = [
        {
            "prompt": [
                {"role": "user", "content": f"Question {i}?"},
                {"role": "assistant", "content": ""},  # R1 drops it: the prompt is repaired
                {"role": "user", "content": "Again?"},
            ],
            "chosen": [{"role": "assistant", "content": "Yes. " * (i + 1)}],
            "rejected": [{"role": "assistant", "content": "No."}],
        }
        for i in range(20)
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    plain = clean(source, tmp_path / "plain")
    converted = clean(source, tmp_path / "out", to="openai")
    assert plain.stats.rows_repaired == converted.stats.rows_repaired == 20

    def profile(run: str) -> Any:
        return json.loads((tmp_path / run / "profile.json").read_text())

    assert profile("out") == profile("plain")


def test_every_kept_row_is_converted(tmp_path: Path) -> None:
    """Rows the fast path would settle as Arrow data are converted too: every kept row of a
    generated OpenAI set comes out as ShareGPT, and the counts are a plain run's."""
    source = tmp_path / "in.parquet"
    make_dataset(source, 400, "openai", seed=3)
    plain = clean(source, tmp_path / "plain")
    converted = clean(source, tmp_path / "out", to="sharegpt", rows_per_shard=150)
    lossy = converted.stats.records()
    assert converted.stats.rows_in == plain.stats.rows_in == 400
    rejected = {r["code"]: r for r in lossy if r["code"] == "lossy_conversion"}
    extra = rejected["lossy_conversion"]["rows"] if rejected else 0
    assert converted.stats.rows_kept + extra == plain.stats.rows_kept
    table = pq.read_table(tmp_path / "out" / "data")
    assert table.num_rows == converted.stats.rows_kept
    assert "messages" not in table.column_names
    for conversation in table.column("conversations").to_pylist():
        # ShareGPT's turns, and the reasoning a gpt turn holds (LLaMA-Factory reads it there)
        assert all(
            set(turn) <= {"from", "value", "reasoning_content"} for turn in json.loads(conversation)
        )
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["to"] == "sharegpt"
    assert "`lossy_conversion`" in (tmp_path / "out" / "README.md").read_text()


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_to_openai_loads_with_datasets(tmp_path: Path, output_format: str) -> None:
    datasets = pytest.importorskip("datasets")
    source = tmp_path / "in.jsonl"
    rows = [WEATHER, IMAGE] + [row for row, _ in generate_rows(30, format="anthropic", seed=4)]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = clean(source, tmp_path / "out", to="openai", output_format=output_format)
    assert result.stats.rows_kept >= 2
    suffix = ".jsonl" if output_format == "jsonl" else ".parquet"
    files = sorted(str(p) for p in (tmp_path / "out" / "data").glob(f"*{suffix}"))
    loaded = datasets.load_dataset(
        "json" if output_format == "jsonl" else "parquet",
        data_files=files,
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert loaded.num_rows == result.stats.rows_kept
    assert {"messages", "tools"} <= set(loaded.column_names)
    first = loaded[0]
    trl_messages(first["messages"])
    assert first["tools"][0]["type"] == "function"
    assert first["tools"][0]["function"]["name"] == "get_weather"
    for row in loaded:
        trl_messages(row["messages"])


def test_cli_says_what_it_writes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(WEATHER) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["clean", str(source), str(out), "--to", "openai", "--output-format", "jsonl"]
    )
    assert result.exit_code == 0, result.output
    assert "writing the kept rows as openai" in result.output
    written = json.loads((out / "data" / "part-00000.jsonl").read_text())
    assert written["messages"][0] == {"role": "system", "content": "You are a weather bot."}
