"""Declared tools: reading them in every provider's shape, and checking arguments against them."""

from __future__ import annotations

import json

import pytest

from transcript_clean.tools import (
    Declared,
    arguments_error,
    canonical,
    read_declarations,
    read_row_declarations,
    schema_problem,
)

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["order_id"],
}


def declared(value: object) -> Declared:
    found = read_declarations(value)
    assert found is not None
    return found


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "function", "function": {"name": "get_order", "parameters": ORDER}},  # OpenAI
        {"type": "function", "name": "get_order", "parameters": ORDER},  # Responses API, flat
        {"name": "get_order", "parameters": ORDER},  # legacy functions, LLaMA-Factory, rig
        {"name": "get_order", "input_schema": ORDER},  # Anthropic
    ],
)
def test_every_shape_declares_a_tool_with_its_schema(entry: dict[str, object]) -> None:
    found = declared([entry])
    assert found.problems == ()
    assert found.names() == ["get_order"]
    assert found.tools["get_order"].schema_key == canonical(ORDER)
    assert not found.tools["get_order"].raw


def test_json_text_is_read_as_the_list_it_holds() -> None:
    text = json.dumps([{"name": "get_order", "parameters": ORDER}])
    assert declared(text).names() == ["get_order"]


@pytest.mark.parametrize("value", [None, "", "  ", "[]", [], "null"])
def test_nothing_declared_is_no_declarations(value: object) -> None:
    assert read_declarations(value) is None


def test_raw_input_tools_have_no_schema() -> None:
    found = declared(
        [
            {"type": "code_interpreter"},
            {"type": "custom", "custom": {"name": "sql", "format": {"type": "grammar"}}},
            {"type": "web_search"},
        ]
    )
    # functionary calls code_interpreter `python`
    assert found.names() == ["code_interpreter", "python", "sql", "web_search"]
    assert all(tool.raw and tool.schema_key is None for tool in found.tools.values())


def test_a_server_tool_without_a_schema_is_declared_unchecked() -> None:
    found = declared([{"type": "bash_20250124", "name": "bash"}])
    assert found.tools["bash"].schema_key is None and found.problems == ()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([{"name": "f", "parameters": {"type": "strin"}}], "tools[0] 'f': its parameters are not"),
        ([{"name": "f", "parameters": {"required": "x"}}], "tools[0] 'f': its parameters are not"),
        ([{"description": "no name"}], "tools[0]: the tool has no name"),
        ([{"type": "function", "function": {"parameters": ORDER}}], "tools[0]: the tool has no"),
        (["get_order"], "tools[0]: expected an object"),
        ("[{not json", "tools: not JSON text"),
        (42, "tools: expected a list of tools"),
    ],
)
def test_invalid_declarations_are_named(value: object, problem: str) -> None:
    found = declared(value)
    assert len(found.problems) == 1
    assert found.problems[0].startswith(problem)


def test_a_tool_with_a_broken_schema_is_still_declared_but_unchecked() -> None:
    found = declared([{"name": "f", "parameters": {"type": "strin"}}])
    assert found.tools["f"].schema_key is None


def test_struct_nulls_are_no_schema_keywords() -> None:
    # What an Arrow struct column gives back: every key of the column, null where absent.
    schema = {**ORDER, "properties": {**ORDER["properties"], "note": None}, "enum": None}
    found = declared([{"name": "get_order", "parameters": schema, "description": None}])
    assert found.problems == ()
    assert found.tools["get_order"].schema_key == canonical(ORDER)


def test_rows_declare_in_the_first_column_that_holds_something() -> None:
    legacy = [{"name": "old", "parameters": ORDER}]
    row = {"tools": None, "functions": legacy}
    assert read_row_declarations(row, ("tools", "functions")) == declared(legacy)
    row = {"tools": "[]", "functions": legacy}  # `[]` holds something: it declares nothing
    assert read_row_declarations(row, ("tools", "functions")) is None
    assert read_row_declarations({}, ("tools",)) is None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"order_id": "A1"}, None),
        ({"order_id": "A1", "qty": 2}, None),
        ({}, "'order_id' is a required property"),
        ({"order_id": 7}, "7 is not of type 'string'"),
        ({"order_id": "A1", "qty": 0}, "0 is less than the minimum of 1"),
    ],
)
def test_arguments_are_checked_with_the_first_error_in_words(
    arguments: dict[str, object], error: str | None
) -> None:
    assert arguments_error(canonical(ORDER), arguments) == error


def test_the_schema_check_says_why() -> None:
    assert schema_problem(canonical(ORDER)) is None
    problem = schema_problem(canonical({"type": "strin"}))
    assert problem is not None and "'strin'" in problem
    assert schema_problem(canonical([1])) == "expected an object, got list"
