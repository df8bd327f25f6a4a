"""The fast path's declared-tools checks (`fastpath/declared.py`) on rows it cannot read."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT, STRICT, Config

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def called(function: dict[str, Any]) -> dict[str, Any]:
    """A row declaring `f` whose one call is to `function`, answered."""
    call = {"id": "c1", "type": "function", "function": function}
    return {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": TOOLS,
    }


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_a_call_without_a_name_among_declared_tools_is_malformed_on_both_paths(
    config: Config,
) -> None:
    """A call with no function name, in a batch that declares tools, once raised IndexError in
    the fast path's name lookup (issue 27, finding 16): the decoder's verdict stands."""
    table = pa.Table.from_pylist(
        [called({"name": "f", "arguments": "{}"}), called({"arguments": "{}"})]
    )
    fmt = get_format("openai")
    verdicts = fast_verdicts(fmt, table.column("messages"), tools=[table.column("tools")])
    assert verdicts is not None and verdicts.clean.tolist() == [True, False]
    assert_fast_and_slow_agree(table, config, fmt)
    rejects = clean_batch(table, config, format=fmt, source="s").rejects.to_pylist()
    assert [(r["_source_row"], r["_reject_codes"]) for r in rejects] == [(1, ["malformed_row"])]
    assert rejects[0]["_reject_message"] == 'messages[1].tool_calls[0].function: missing "name"'


def _not_utf8(text: str) -> pa.Array:
    """A string array holding `text` with a lone surrogate's bytes (ED A0 80) at its end, as a
    JSON Lines `\\ud800` escape or an unchecked Parquet file gives it: Arrow does not check."""
    data = text.encode() + b"\xed\xa0\x80"
    offsets = pa.array([0, len(data)], pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("shape", ["list", "text"])
def test_declarations_that_are_not_utf8_are_the_per_row_paths_reject(
    config: Config, shape: str
) -> None:
    """A tool name holding a lone surrogate stopped the batch in the declared-tools checks
    (`UnicodeDecodeError` in `to_pylist`); its row is a `malformed_row` reject, and the other
    rows of the batch are read as ever."""
    good = called({"name": "f", "arguments": "{}"})
    if shape == "text":
        tools = pa.concat_arrays([pa.array([json.dumps(TOOLS)]), _not_utf8(json.dumps(TOOLS))])
        table = pa.table({"messages": pa.array([good["messages"]] * 2), "tools": tools})
    else:
        names = pa.concat_arrays([pa.array(["f"]), _not_utf8("f")])
        function = pa.StructArray.from_arrays(
            [names, pa.array([{"type": "object"}] * 2)], ["name", "parameters"]
        )
        tool = pa.StructArray.from_arrays(
            [pa.array(["function"] * 2), function], ["type", "function"]
        )
        tools = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), tool)
        table = pa.table({"messages": pa.array([good["messages"]] * 2), "tools": tools})
    assert_fast_and_slow_agree(table, config, get_format("openai"))
    result = clean_batch(table, config, format="openai")
    rejects = result.rejects.select(["_source_row", "_reject_codes"]).to_pylist()
    assert rejects == [{"_source_row": 1, "_reject_codes": ["malformed_row"]}]
    assert "not UTF-8" in result.rejects.column("_reject_message")[0].as_py()
    assert result.kept.num_rows == 1


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig"])
def test_rows_that_declare_tools_are_settled_in_arrow(fmt: str) -> None:
    """A ShareGPT view once handed no calls to the declared-tools checks, and Anthropic's and
    rig's arguments, held as structs, were never validated in Arrow: every row of a set with a
    `tools` column that made a call took the per-row path. Every clean row is settled clean; a row
    calling an undeclared tool or breaking a schema never is, and both paths agree."""
    from synthetic import TOOLS_RATES, generate_rows

    rows = list(generate_rows(400, fmt, seed=5, rates=TOOLS_RATES))
    table = pa.Table.from_pylist([row for row, _ in rows])
    assert all(row["tools"] for row, _ in rows)
    verdicts = fast_verdicts(
        get_format(fmt), table.column(get_format(fmt).column), tools=[table.column("tools")]
    )
    assert verdicts is not None
    planted = [bool(codes) for _, codes in rows]
    assert 0 < sum(planted) < len(rows)
    assert verdicts.clean.tolist() == [not p for p in planted]
    assert_fast_and_slow_agree(table, DEFAULT, get_format(fmt))


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig"])
def test_calls_to_undeclared_tools_or_breaking_a_schema_are_rejected_in_arrow(fmt: str) -> None:
    """Rows whose only code is a declared-tools one are rejected by the view in the per-row
    path's words, by the columnar view, for every format."""
    from synthetic import TOOLS_RATES, generate_rows

    from transcript_clean.pipeline import batch_verdicts

    rows = list(generate_rows(400, fmt, seed=5, rates=TOOLS_RATES))
    table = pa.Table.from_pylist([row for row, _ in rows])
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    rejected = {r.code: r.rows for r in verdicts.rejects}
    assert set(rejected) == {"unknown_tool", "tool_arguments_schema"}
    planted = np.array([bool(codes) for _, codes in rows])
    assert (
        rejected["unknown_tool"] | rejected["tool_arguments_schema"]
    ).tolist() == planted.tolist()
    assert verdicts.handled.all()
    assert_fast_and_slow_agree(table, DEFAULT, get_format(fmt))


def test_arguments_held_as_structs_are_validated_as_the_per_row_path_reads_them() -> None:
    """Anthropic's `input` objects become one struct type: a key one call lacks is null in its
    struct, and the per-row path reads it so; a NaN is the per-row path's to judge."""
    tools = [
        {
            "name": "get_weather",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            },
        },
        {
            "name": "scale",
            "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
    ]

    def row(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        use = {"type": "tool_use", "id": "t1", "name": name, "input": arguments}
        result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
        return {
            "tools": tools,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Go"}]},
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [result]},
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            ],
        }

    table = pa.Table.from_pylist(
        [
            row("get_weather", {"city": "Paris", "unit": "C", "x": None}),
            row("get_weather", {"city": "Rome", "unit": None, "x": None}),  # unit null
            row("get_weather", {"city": None, "unit": "C", "x": None}),  # city null
            row("scale", {"city": None, "unit": None, "x": float("nan")}),
            row("scale", {"city": None, "unit": None, "x": 2.5}),
        ]
    )
    fmt = get_format("anthropic")
    assert pa.types.is_struct(
        table.schema.field("messages")
        .type.value_type.field("content")
        .type.value_type.field("input")
        .type
    )
    from transcript_clean.pipeline import batch_verdicts

    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, False, True]
    numbers = table.take([0, 1, 2, 4])  # (a NaN is not equal to itself in a comparison)
    for config in (DEFAULT, STRICT):
        slow = assert_fast_and_slow_agree(numbers, config, fmt)
    assert [r["_source_row"] for r in slow.rejects.to_pylist()] == [1, 2]


_FLAT = pa.struct([("a", pa.string()), ("b", pa.int64()), ("c", pa.float64()), ("d", pa.bool_())])
_SCALARS = st.fixed_dictionaries(
    {
        "a": st.none() | st.text(alphabet="ab:-s1\u00e9", max_size=4),
        "b": st.none() | st.integers(-3, 3),
        "c": st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64),
        "d": st.none() | st.booleans(),
    }
)


@given(st.lists(_SCALARS, min_size=1, max_size=12))
def test_flat_struct_keys_are_equal_exactly_where_the_values_are(values: list[Any]) -> None:
    """The keys that tell distinct struct arguments apart (`declared._flat_keys`): two are equal
    exactly where the structs, made Python, are the same JSON (0.0 and -0.0 are equal in
    Python, not in JSON: two keys, each validated)."""
    from transcript_clean.fastpath.declared import _flat_keys

    structs = pa.array(values, _FLAT)
    keys = _flat_keys(structs)
    assert keys is not None
    made = structs.to_pylist()
    texts = keys.to_pylist()
    for i in range(len(values)):
        for j in range(len(values)):
            same = orjson.dumps(made[i]) == orjson.dumps(made[j])
            assert (texts[i] == texts[j]) == same


def test_nested_struct_arguments_have_no_flat_keys() -> None:
    from transcript_clean.fastpath.declared import _flat_keys

    nested = pa.array([{"a": {"b": 1}}])
    assert _flat_keys(nested) is None


_TYPES = st.sampled_from(["string", "integer", "number", "boolean"] * 3 + ["null", "object", None])
_RARELY = st.sampled_from([False, False, False, False, False, True])
_PROPERTY = st.builds(
    lambda kind, words, bound: {
        **({} if kind is None else {"type": kind}),
        **({"description": "d"} if words else {}),
        **({"minimum": 0} if bound else {}),  # not a simple schema: validated value by value
    },
    _TYPES,
    st.booleans(),
    _RARELY,
)
_NAMES = st.sampled_from(["a", "b", "c", "d", "n", "z", "missing"])
_SCHEMAS = st.builds(
    lambda properties, required, extra: {
        "type": "object",
        "properties": properties,
        **({"required": sorted(set(required))} if required else {}),
        **({"additionalProperties": False} if extra else {}),
    },
    st.dictionaries(_NAMES, _PROPERTY, max_size=5),
    st.lists(_NAMES, max_size=3),
    _RARELY,
)
_WIDE = pa.struct([*_FLAT, ("n", pa.struct([("x", pa.int64())])), ("z", pa.null())])
_WIDE_VALUES = st.fixed_dictionaries(
    {
        "a": st.none() | st.text(alphabet="ab1", max_size=3),
        "b": st.none() | st.integers(-3, 3),
        "c": st.none()
        | st.sampled_from([2.0, -1.0, 0.5, float("nan"), float("inf")])
        | st.floats(),
        "d": st.none() | st.booleans(),
        "n": st.none() | st.fixed_dictionaries({"x": st.none() | st.integers(0, 2)}),
        "z": st.none(),
    }
)


@settings(max_examples=300)
@given(
    st.lists(_SCHEMAS, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.none() | _WIDE_VALUES), min_size=1, max_size=12),
)
def test_struct_arguments_break_a_schema_exactly_where_their_objects_do(
    schemas: list[dict[str, Any]], calls: list[tuple[int, dict[str, Any] | None]]
) -> None:
    """`declared._broken_objects`, over the column where a schema is simple
    (`struct_schemas`), else value by value, says of each call what the validator says of the
    object the per-row path makes of its struct; no object is not this check's (False), and a
    number that is not finite is the per-row path's (True)."""
    from transcript_clean.fastpath.declared import _broken_objects, _fails
    from transcript_clean.tools import canonical

    keys: list[str | None] = [canonical(s) for s in schemas]
    pairs = np.array([p % len(keys) for p, _ in calls], dtype=np.int64)
    structs = pa.array([value for _, value in calls], _WIDE)
    got = _broken_objects(pairs, keys, structs)
    for k, value in enumerate(structs.to_pylist()):
        if value is None:
            expected = False
        elif any(isinstance(v, float) and not np.isfinite(v) for v in value.values()):
            expected = True
        else:
            key = keys[int(pairs[k])]
            assert key is not None
            expected = _fails(key, value)
        assert bool(got[k]) == expected, (schemas[int(pairs[k])], value)


def test_simple_schemas_are_told_over_the_column_and_others_are_not() -> None:
    """Which schemas `struct_schemas` tells over a struct column: properties of scalar types and
    which are required, nothing else; a typed field of another Arrow type is the values'."""
    from transcript_clean.fastpath.struct_schemas import struct_fails
    from transcript_clean.tools import canonical, simple_schema

    simple = {"type": "object", "properties": {"a": {"type": "string", "description": "x"}},
              "required": ["a"]}  # fmt: skip
    told = simple_schema(canonical(simple))
    assert told == ((("a", "string"),), frozenset({"a"}))
    for other in (
        {**simple, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "array"},
    ):
        assert simple_schema(canonical(other)) is None, other
    structs = pa.array([{"a": "x"}, {"a": None}], pa.struct([("a", pa.string())]))
    assert struct_fails(told, structs).tolist() == [False, True]  # type: ignore[union-attr]
    nested = pa.array([{"a": {"b": 1}}])
    assert struct_fails(told, nested) is None


_SIMPLE = st.builds(
    lambda properties, required: {"type": "object", "properties": properties, "required": required},
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "missing"]),
        st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": t}),
    ),
    st.lists(st.sampled_from(["a", "c", "missing"]), max_size=2, unique=True),
)
_FINITE = _SCALARS | st.fixed_dictionaries(
    {"a": st.none(), "b": st.none(), "c": st.sampled_from([2.0, -0.0, 0.5, 1e300]), "d": st.none()}
)


@settings(max_examples=300)
@given(_SIMPLE, st.lists(_FINITE, min_size=1, max_size=8))
def test_a_simple_schema_is_told_over_the_column_as_the_validator_tells_each_object(
    schema: dict[str, Any], values: list[dict[str, Any]]
) -> None:
    from transcript_clean.fastpath.declared import _fails
    from transcript_clean.fastpath.struct_schemas import struct_fails
    from transcript_clean.tools import canonical, simple_schema

    key = canonical(schema)
    told = simple_schema(key)
    assert told is not None
    structs = pa.array(values, _FLAT)
    fails = struct_fails(told, structs)
    assert fails is not None
    assert fails.tolist() == [_fails(key, value) for value in structs.to_pylist()]


_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(width=64)
    | st.sampled_from([1.0, -0.0, 2.5, 1e300, float("inf"), True, 0])
    | st.text(max_size=3)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)
)


@settings(max_examples=500)
@given(_SIMPLE, st.data())
def test_an_object_is_told_against_a_simple_schema_as_the_validator_tells_it(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """`object_fails` (arguments read from JSON text, checked without the compiled validator)
    says what the validator says of any object: booleans are no numbers, a float is an
    integer only where it is whole and finite, a nested value is of no scalar type. The object
    holds the schema's properties (and its required keys, mostly), so that their values
    decide."""
    from transcript_clean.fastpath.declared import _fails
    from transcript_clean.fastpath.struct_schemas import object_fails
    from transcript_clean.tools import canonical, simple_schema

    names = sorted({*schema["properties"], *schema["required"], "other"})
    value = data.draw(st.dictionaries(st.sampled_from(names), _LEAF))
    if data.draw(st.booleans()):
        value = {name: 1 for name in schema["required"]} | value
    key = canonical(schema)
    told = simple_schema(key)
    assert told is not None
    assert object_fails(told, value) == _fails(key, value)


_WORD = st.text(max_size=3) | st.integers() | st.none()
_NEAR_SIMPLE = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["object", "object", "array", 1]),
        "properties": st.dictionaries(
            st.sampled_from(["a", "b", "c"]),
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["string", "integer", "number", "boolean", "array"])
                    | st.just(["string", "null"]),
                    "description": _WORD,
                    "title": _WORD,
                    "enum": st.just(["x"]),
                },
            ),
        ),
        "required": st.lists(st.sampled_from(["a", "b", 1]), max_size=3),
        "description": _WORD,
        "title": _WORD,
        "additionalProperties": st.booleans(),
    },
)


@settings(max_examples=400)
@given(_NEAR_SIMPLE)
def test_a_simple_schema_is_a_valid_one_and_its_problem_is_jsonschemas(
    schema: dict[str, Any],
) -> None:
    """`schema_problem` passes a simple schema without asking jsonschema: every such schema
    is a valid Draft 7 one that fastjsonschema compiles; a schema near it (a duplicate
    required key, a description that is no text, a nested type) is jsonschema's to judge."""
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    from transcript_clean.tools import canonical, fast_validator, schema_problem, simple_schema

    key = canonical(schema)
    try:
        Draft7Validator.check_schema(schema)
        valid = True
    except SchemaError:
        valid = False
    try:
        fast_validator(key)
        compiles = True
    except Exception:
        compiles = False
    if simple_schema(key) is not None:
        assert valid and compiles
    assert (schema_problem(key) is None) == (valid and compiles)
