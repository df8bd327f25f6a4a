"""unknown_tool, tool_arguments_schema and invalid_tool_declaration, in every format that
declares tools; raw-input tools; R2 and real results; the fast path, the stats and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from differential import assert_fast_and_slow_agree
from synthetic import TOOLS_RATES, generate_rows

from transcript_clean.cli import main
from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.policy import DEFAULT, STRICT, config_from_dict
from transcript_clean.rows import clean_row
from transcript_clean.rules import rules
from transcript_clean.sources import open_source
from transcript_clean.sources.jsontypes import has_json

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


def openai_row(name: str, arguments: dict[str, Any], **declared: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": name}}
    call["function"]["arguments"] = json.dumps(arguments)
    return {
        "messages": [
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "assistant", "content": "It has shipped."},
        ],
        **declared,
    }


def anthropic_row(name: str, arguments: dict[str, Any], tools: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "Where is my order?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": name, "input": arguments}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
            {"role": "assistant", "content": "It has shipped."},
        ],
        "tools": tools,
    }


def sharegpt_row(name: str, arguments: dict[str, Any], tools: Any) -> dict[str, Any]:
    return {
        "conversations": [
            {"from": "human", "value": "Where is my order?"},
            {"from": "function_call", "value": json.dumps({"name": name, "arguments": arguments})},
            {"from": "observation", "value": "shipped"},
            {"from": "gpt", "value": "It has shipped."},
        ],
        "tools": tools,
    }


def rig_row(name: str, arguments: dict[str, Any], tools: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Where is my order?"}]},
            {
                "role": "assistant",
                "id": None,
                "content": [
                    {
                        "type": "toolcall",
                        "id": "c1",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "toolresult",
                        "call": "c1",
                        "name": name,
                        "content": [{"type": "text", "text": "shipped"}],
                    }
                ],
            },
            {"role": "assistant", "id": None, "content": [{"type": "text", "text": "Shipped."}]},
        ],
        "tools": tools,
    }


OPENAI_TOOLS = [{"type": "function", "function": {"name": "get_order", "parameters": ORDER}}]
FLAT_TOOLS = [{"name": "get_order", "parameters": ORDER}]

# format, a row maker: (tool called, arguments) -> row with declarations in the format's shape
ROWS = {
    "openai": lambda n, a: openai_row(n, a, tools=OPENAI_TOOLS),
    "openai-functions": lambda n, a: openai_row(n, a, functions=FLAT_TOOLS),
    "anthropic": lambda n, a: anthropic_row(n, a, [{"name": "get_order", "input_schema": ORDER}]),
    "sharegpt": lambda n, a: sharegpt_row(n, a, json.dumps(FLAT_TOOLS)),
    "rig": lambda n, a: rig_row(n, a, FLAT_TOOLS),
}


def check(kind: str, row: dict[str, Any], config: Any = DEFAULT) -> Any:
    return clean_row(row, get_format(kind.split("-")[0]), config)


@pytest.mark.parametrize("kind", ROWS)
def test_a_declared_call_with_valid_arguments_is_clean(kind: str) -> None:
    result = check(kind, ROWS[kind]("get_order", {"order_id": "A1"}))
    assert result.status == "unchanged" and result.actions == {}


@pytest.mark.parametrize("kind", ROWS)
def test_a_call_to_an_undeclared_tool_is_unknown_tool(kind: str) -> None:
    result = check(kind, ROWS[kind]("get_orders", {"order_id": "A1"}))
    assert result.actions == {"unknown_tool": "rejected"}
    assert "to 'get_orders': no tool of that name is declared (declared: get_order)" in (
        result.reject_message or ""
    )


@pytest.mark.parametrize("kind", ROWS)
def test_arguments_that_break_the_schema_are_tool_arguments_schema(kind: str) -> None:
    result = check(kind, ROWS[kind]("get_order", {"id": "A1"}))
    assert result.actions == {"tool_arguments_schema": "rejected"}
    assert result.reject_message == (
        "message 1: tool_calls[0] to 'get_order': 'order_id' is a required property"
    )


def test_tool_arguments_schema_may_be_kept() -> None:
    keep = config_from_dict({"actions": {"tool_arguments_schema": "keep"}}, name="keep")
    result = check("openai", ROWS["openai"]("get_order", {}), keep)
    assert result.status == "unchanged" and result.actions == {"tool_arguments_schema": "kept"}


def test_a_broken_declaration_is_invalid_tool_declaration() -> None:
    tools = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": 1}}}]
    result = check("openai", openai_row("get_order", {}, tools=tools))
    # its calls are not checked against the broken schema
    assert result.actions == {"invalid_tool_declaration": "rejected"}
    assert (result.reject_message or "").startswith(
        "tools[0] 'get_order': its parameters are not a JSON Schema:"
    )


def test_a_row_without_declarations_is_not_checked() -> None:
    result = check("openai", openai_row("anything", {"x": 1}))
    assert result.actions == {}


def test_strict_finds_exactly_the_codes() -> None:
    row = openai_row("nope", {}, tools=[*OPENAI_TOOLS, {"description": "nameless"}])
    assert check("openai", row, STRICT).codes == ["invalid_tool_declaration", "unknown_tool"]


# ---------------------------------------------------------------------------------------------
# raw-input tools, and R2 never writing over a real result


def python_row(result: str | None) -> dict[str, Any]:
    code = "l = [0, 1, 2]\nl.remove(3.6)"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Remove 3.6 from the list."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "p1", "function": {"name": "python", "arguments": code}}],
        },
    ]
    if result is not None:
        messages.append({"role": "tool", "tool_call_id": "p1", "content": result})
    messages.append({"role": "assistant", "content": "3.6 is not in the list."})
    return {"messages": messages}


def test_a_raw_input_tool_takes_code_as_its_arguments() -> None:
    row = {**python_row("ValueError: x not in list"), "tools": [{"type": "code_interpreter"}]}
    result = check("openai", row)
    assert result.status == "unchanged" and result.actions == {}


def test_an_invalid_call_with_a_real_result_is_rejected_not_rewritten() -> None:
    result = check("openai", python_row("ValueError: x not in list"))
    assert result.actions == {"invalid_tool_arguments": "rejected"}
    assert "but a real result in message 2: rewriting it would contradict" in (
        result.reject_message or ""
    )


def test_an_invalid_call_without_a_result_is_still_repaired() -> None:
    result = check("openai", python_row(None))
    assert result.actions["invalid_tool_arguments"] == "repaired"
    assert result.status == "repaired"


def test_functionary_keeps_its_real_python_output(shared_data: Path) -> None:
    data = json.loads((shared_data / "openai" / "functionary_test_case.json").read_text())
    result = check("openai", data)
    assert result.status == "unchanged" and result.actions == {}


# ---------------------------------------------------------------------------------------------
# real data: glaive's 300 rows and the Zava file


def test_glaive_has_one_schema_break_and_zava_none(shared_data: Path) -> None:
    glaive = json.loads((shared_data / "sharegpt" / "glaive_toolcall_en_demo.json").read_text())
    found = {
        i: check("sharegpt", row).actions
        for i, row in enumerate(glaive)
        if check("sharegpt", row).actions
    }
    # row 259 declares calories_per_item a number and sends a list
    assert found == {259: {"tool_arguments_schema": "rejected"}}
    lines = (shared_data / "openai" / "msfoundry_zava_toolsft_valid.jsonl").read_text()
    for line in lines.splitlines():
        actions = check("openai", json.loads(line)).actions
        assert not {"unknown_tool", "tool_arguments_schema", "invalid_tool_declaration"} & set(
            actions
        )


# ---------------------------------------------------------------------------------------------
# the fast path


def tools_table(fmt: str, n: int = 600, seed: int = 5) -> pa.Table:
    return pa.Table.from_pylist(
        [row for row, _ in generate_rows(n, format=fmt, seed=seed, rates=TOOLS_RATES)]
    )


DECLARED_CODES = ("unknown_tool", "tool_arguments_schema", "invalid_tool_declaration")


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
@pytest.mark.parametrize("code", DECLARED_CODES)
def test_fast_and_slow_agree_on_rows_with_declared_tools(fmt: str, code: str) -> None:
    for action in sorted(next(r for r in rules() if r.code == code).allowed):
        config = config_from_dict({"actions": {code: action}}, name=f"{code}={action}")
        assert_fast_and_slow_agree(tools_table(fmt), config, get_format(fmt))


def test_openai_rows_with_declared_tools_are_settled_without_the_per_row_path() -> None:
    table = tools_table("openai", 2000)
    verdicts = fast_verdicts(
        get_format("openai"), table.column("messages"), tools=[table.column("tools")]
    )
    assert verdicts is not None
    planted = [codes for _, codes in generate_rows(2000, "openai", seed=5, rates=TOOLS_RATES)]
    unknown = np.array(["unknown_tool" in c for c in planted])
    broken = np.array(["tool_arguments_schema" in c for c in planted])
    assert verdicts.clean.sum() > 1500  # every row declares tools
    assert not (verdicts.clean & (unknown | broken)).any()


def jsonl_tools_table(tmp_path: Path, n: int) -> pa.Table:
    """`tools_table`'s rows as a JSON Lines file declares them: a list of objects, whose tool
    schemas the reader types `json_` (JSON text in Arrow)."""
    path = tmp_path / "tools.jsonl"
    with path.open("w") as out:
        for row, _ in generate_rows(n, format="openai", seed=5, rates=TOOLS_RATES):
            tools = row["tools"]
            out.write(json.dumps({**row, "tools": json.loads(tools)}) + "\n")
    source = open_source(str(path))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    assert has_json(table.schema.field("tools").type)
    return table


def test_tool_schemas_held_as_json_text_are_read_on_the_fast_path(tmp_path: Path) -> None:
    table = jsonl_tools_table(tmp_path, 2000)
    verdicts = batch_verdicts(table, DEFAULT, format="openai")
    assert verdicts is not None
    planted = [codes for _, codes in generate_rows(2000, "openai", seed=5, rates=TOOLS_RATES)]
    unknown = np.array(["unknown_tool" in c for c in planted])
    broken = np.array(["tool_arguments_schema" in c for c in planted])
    assert verdicts.clean.sum() > 1500
    assert not (verdicts.clean & (unknown | broken)).any()
    for code in DECLARED_CODES:
        for action in sorted(next(r for r in rules() if r.code == code).allowed):
            config = config_from_dict({"actions": {code: action}}, name=f"{code}={action}")
            assert_fast_and_slow_agree(table.slice(0, 600), config, get_format("openai"))


def test_the_stats_count_calls_per_tool_the_same_on_both_paths() -> None:
    table = tools_table("openai", 800)
    fast = clean_batch(table, DEFAULT, format="openai", source="s")
    slow = clean_batch(table, DEFAULT, format="openai", source="s", fast=False)
    assert fast.stats.tool_calls == slow.stats.tool_calls
    assert fast.stats.tools_declared == slow.stats.tools_declared
    assert fast.stats.rows_declaring_tools == slow.stats.rows_declaring_tools == 800
    assert set(fast.stats.tool_calls) >= {"get_weather", "lookup_order"}


# ---------------------------------------------------------------------------------------------
# the command line: --tools-column, summary.json, audit gates


def test_tools_column_names_the_declarations(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    row = openai_row("get_orders", {"order_id": "A1"}, offered=OPENAI_TOOLS)
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    clean = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "a"), "-q"])
    assert clean.exit_code == 0, clean.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["rows_rejected"] == 0  # `offered` is no declarations column of its own
    out = tmp_path / "b"
    args = ["clean", str(source), str(out), "--tools-column", "offered", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_rejected"] == 1
    assert summary["tools"] == {
        "rows_declaring_tools": 1,
        "distinct_tools": 1,
        "tools_declared": {"get_order": 1},
        "calls_per_tool": {"get_orders": 1},
        "table": {
            "tools": [["get_orders", 1, 0], ["get_order", 0, 1]],
            "other": {"tools": 0, "calls": 0, "declarations": 0},
        },
        "codes": {"unknown_tool": 1, "tool_arguments_schema": 0, "invalid_tool_declaration": 0},
    }
    assert "## Declared tools" in (out / "README.md").read_text()
    missing = CliRunner().invoke(main, [*args[:3], "--tools-column", "nope", "--overwrite"])
    assert missing.exit_code == 2 and "no column 'nope' for --tools-column" in missing.output


def test_audit_gates_accept_the_new_codes(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    rows = [openai_row("get_order", {"order_id": "A1"}, tools=OPENAI_TOOLS)] * 3
    rows.append(openai_row("get_orders", {"order_id": "A1"}, tools=OPENAI_TOOLS))
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    passing = CliRunner().invoke(main, ["audit", str(source), "--max", "unknown_tool=30%"])
    assert passing.exit_code == 0, passing.output
    failing = CliRunner().invoke(main, ["audit", str(source), "--max", "unknown_tool=0"])
    assert failing.exit_code == 1, failing.output
    assert "gate max unknown_tool: 25.00% > 0.00%" in failing.stdout


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_arguments_that_are_no_json_are_settled_in_arrow_as_r2s_alone(config: Any) -> None:
    # Not JSON at all: `invalid_tool_arguments` alone, never the schema's question; a row of
    # that one code is settled in Arrow (the default's real-result reject, strict's plain
    # reject in the first invalid call's words), as the per-row path would.
    row = openai_row("get_order", {}, tools=OPENAI_TOOLS)
    row["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"order_id": "A1",'
    table = pa.Table.from_pylist(
        [row, openai_row("get_order", {"order_id": "A1"}, tools=OPENAI_TOOLS)]
    )
    verdicts = batch_verdicts(table, config, format="openai")
    assert verdicts is not None and verdicts.handled.all()
    assert clean_row(table.to_pylist()[0], get_format("openai"), config).codes == [
        "invalid_tool_arguments"
    ]
    assert_fast_and_slow_agree(table, config, get_format("openai"))
