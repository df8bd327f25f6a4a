"""Gemini's flattener (`formats/gemini/flatten.py`) held to its decoder: each row read as the
decoder reads it, unread exactly where the decoder raises, and each walk attribute what the
rule's `find` finds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from differential import (
    assert_fast_and_slow_agree,
    assert_settled_in_arrow,
    assert_verdicts_equal_on_generated_rows,
)
from flattened import assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import every_rates, generate_rows

from transcript_clean.formats import get_format
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.orphan_tool_result import used_message
from transcript_clean.rules.unanswered_tool_call import uncuttable

GEMINI = get_format("gemini")

_ARGS = pa.struct([("n", pa.int64()), ("x", pa.float64())])


def _schema(response: pa.DataType) -> pa.Schema:
    call = pa.struct([("name", pa.string()), ("id", pa.string()), ("args", _ARGS)])
    answer = pa.struct([("name", pa.string()), ("id", pa.string()), ("response", response)])
    part = pa.struct(
        [
            ("text", pa.string()),
            ("thought", pa.bool_()),
            ("thoughtSignature", pa.string()),
            ("functionCall", call),
            ("functionResponse", answer),
            ("inlineData", pa.struct([("mimeType", pa.string())])),
        ]
    )
    item = pa.struct([("role", pa.string()), ("parts", pa.list_(part))])
    return pa.schema([("contents", pa.list_(item))])


# A response `{"result": text}` (read as its text) or another object (read as its JSON).
RESPONSES = {
    "result": (
        pa.struct([("result", pa.string())]),
        st.sampled_from(["18 C", " ", None]).map(lambda t: {"result": t}),
    ),
    "object": (
        pa.struct([("result", pa.string()), ("temp", pa.int64())]),
        st.sampled_from([{"result": "x", "temp": 3}, {"temp": 4}]),
    ),
    "text": (pa.string(), st.sampled_from(["done", "", "\n", None])),
}

_ids = st.sampled_from([None, None, "a", "b"])
_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!", None])


def _or_rarely_none(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`values`, or now and then None."""
    return st.one_of(values, values, values, values, st.none())


_ARGUMENTS = ({"n": 1}, None, {"x": float("nan")})


def _rows(
    responses: st.SearchStrategy[Any], arguments: tuple[Any, ...] = _ARGUMENTS
) -> st.SearchStrategy[list[list[dict[str, Any]]]]:
    response = st.fixed_dictionaries({"response": responses}) | st.just({})
    result = st.builds(
        lambda body, i, name: {"functionResponse": {"id": i, "name": name, **body}},
        response,
        _ids,
        st.sampled_from(["f", None]),
    )
    call = st.fixed_dictionaries(
        {
            "functionCall": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["f", "g"]),
                    "id": _ids,
                    "args": st.sampled_from(arguments),
                }
            )
        }
    )
    text = st.fixed_dictionaries(
        {"text": _texts},
        optional={
            "thought": st.sampled_from([True, False, None]),
            "thoughtSignature": st.sampled_from(["sig", None]),
        },
    )
    media = st.just({"inlineData": {"mimeType": "image/png"}}) | st.just({})
    part = st.one_of(text, call, call, result, result, media)
    good = st.fixed_dictionaries(
        {
            # no role is the user's (Vertex's own tuning example has a response turn without one)
            "role": st.sampled_from(["user", "user", "model", "model", "function", None]),
            "parts": st.lists(part, max_size=3),
        }
    )
    # What the decoder does not read: a null item, parts or part, another role, a call without
    # a name.
    bad = st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["system", None, "model"]),
                "parts": st.sampled_from([None, [None], [{"functionCall": {"name": None}}]]),
            }
        ),
    )
    item = st.one_of(*[good] * 8, bad)
    # Mostly well formed: a model turn's calls answered by the next user turn.
    exchange = st.builds(
        lambda ids, words: [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "id": i}} for i in ids]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": i}} for i in ids]},
            {"role": "model", "parts": [{"text": words}]},
        ],
        st.lists(_ids, min_size=1, max_size=3),
        _texts.filter(lambda t: t is not None),
    )
    return st.lists(
        _or_rarely_none(
            st.builds(
                lambda head, tail: head + tail, exchange | st.just([]), st.lists(item, max_size=5)
            )
        ),
        min_size=1,
        max_size=6,
    )


@pytest.mark.parametrize("kind", sorted(RESPONSES))
def test_gemini_rows_flatten_as_the_decoder_reads_them(kind: str) -> None:
    response_type, responses = RESPONSES[kind]
    schema = _schema(response_type)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(responses))
    def check(contents: list[list[dict[str, Any]] | None]) -> None:
        table = pa.Table.from_pylist([{"contents": c} for c in contents], schema=schema)
        assert_flattened_as_decoded(GEMINI, table)

    check()


@pytest.mark.parametrize(
    "config",
    [DEFAULT, STRICT, replace(DEFAULT, orphan_result="drop")],
    ids=["default", "strict", "drop orphans"],
)
def test_gemini_batches_of_any_rows_agree_on_both_paths(config: Config) -> None:
    """Whatever the fast path settles in Arrow (empty turns and unanswered calls dropped, used
    orphans rejected) comes out as the per-row path writes it, in the column's own type (no
    NaN among the arguments: a row holding one is never equal to itself)."""
    response_type, responses = RESPONSES["result"]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(responses, ({"n": 1}, None, {"x": 2.5})))
    def check(contents: list[list[dict[str, Any]] | None]) -> None:
        schema = _schema(response_type)
        table = pa.Table.from_pylist([{"contents": c} for c in contents], schema=schema)
        assert_fast_and_slow_agree(table, config, GEMINI)

    check()


def test_snake_case_keys_flatten_the_same() -> None:
    row = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"function_call": {"name": "f", "args": {"n": 1}}}]},
            {"role": "user", "parts": [{"function_response": {"name": "f", "response": {}}}]},
        ]
    }
    view = assert_flattened_as_decoded(GEMINI, pa.Table.from_pylist([row]))
    assert view.result_call.to_pylist() == view.call_id.to_pylist()


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    turn = {"role": "user", "parts": [{"text": "hi"}]}
    system = {"parts": [{"text": "Be brief."}]}
    both = [{"function_call": {"name": "f"}}, {"functionCall": {"name": "f"}}]
    for rows in (
        [{"contents": [turn], "systemInstruction": system}],  # a column it cannot see
        [{"contents": [turn], "tools": '[{"name": "f"}]'}],  # tools the fast path would read
        [{"contents": [{"role": "model", "parts": both}]}],  # a key under two names
        [{"contents": [{"role": "user", "parts": [{"text": 3}]}]}],  # text that is no text
    ):
        table = pa.Table.from_pylist(rows)
        column = table.column("contents").combine_chunks()
        assert GEMINI.flatten(column, table.schema) is None, rows
    tools = [{"functionDeclarations": [{"name": "f"}]}]
    table = pa.Table.from_pylist([{"contents": [turn], "tools": tools}])
    assert GEMINI.flatten(table.column("contents").combine_chunks(), table.schema) is not None


def test_gemini_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [row for row, _ in generate_rows(400, "gemini", seed=21, rates=every_rates("gemini"))]
    view = assert_flattened_as_decoded(GEMINI, pa.Table.from_pylist(rows))
    assert 0 < view.unread.sum() < len(rows) // 5


def test_gemini_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(GEMINI, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_gemini_batches_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "gemini", seed=8, rates=every_rates("gemini"))]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, GEMINI)


# A system instruction column beside `contents` (`GeminiFormat.side_columns`): an object of
# text parts (a null part, text or parts the decoder cannot read), or a string; under either
# of its names.
_PART = pa.struct([("text", pa.string())])
_INSTRUCTION = pa.struct([("role", pa.string()), ("parts", pa.list_(_PART))])
_instructions = st.builds(
    lambda parts: {"role": "system", "parts": parts},
    st.none() | st.lists(st.none() | st.builds(lambda t: {"text": t}, _texts), max_size=3),
)
SYSTEM_LAYOUTS: dict[str, tuple[str, pa.DataType, st.SearchStrategy[Any]]] = {
    "object": ("systemInstruction", _INSTRUCTION, _instructions),
    "snake_case": ("system_instruction", _INSTRUCTION, _instructions),
    "string": ("systemInstruction", pa.string(), _texts),
}


@pytest.mark.parametrize("layout", sorted(SYSTEM_LAYOUTS))
def test_gemini_rows_with_a_system_instruction_flatten_as_the_decoder_reads_them(
    layout: str,
) -> None:
    key, system_type, systems = SYSTEM_LAYOUTS[layout]
    schema = _schema(RESPONSES["result"][0]).append(pa.field(key, system_type))

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(RESPONSES["result"][1]), st.data())
    def check(contents: list[list[dict[str, Any]] | None], data: st.DataObject) -> None:
        rows = [{"contents": c, key: data.draw(st.none() | systems)} for c in contents]
        # roles (the instruction first, where the decoder makes one) and characters included
        assert_flattened_as_decoded(GEMINI, pa.Table.from_pylist(rows, schema=schema))

    check()


def test_an_instruction_under_both_names_is_left_to_the_per_row_path() -> None:
    turn = {"role": "user", "parts": [{"text": "hi"}]}
    table = pa.Table.from_pylist(
        [{"contents": [turn], "systemInstruction": "A", "system_instruction": "B"}]
    )
    side = {k: table.column(k).combine_chunks() for k in GEMINI.side_columns}
    assert GEMINI.flatten(table.column("contents").combine_chunks(), table.schema, side) is None


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_gemini_batches_with_a_system_instruction_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "gemini", seed=8, rates=every_rates("gemini"))]
    instructions = [
        {"role": "system", "parts": [{"text": "Be brief."}]},
        None,
        {"role": "system", "parts": [{"text": ""}]},
        {"role": "system", "parts": [{"text": "A"}, {"text": "B"}]},
    ]
    for k, row in enumerate(rows):
        row["systemInstruction"] = instructions[k % len(instructions)]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(GEMINI, table)
    assert (view.role == 0).sum() == 450  # one in each row with an instruction (an empty one too)
    assert_fast_and_slow_agree(table, config, GEMINI)


def _turn(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def _said(text: str) -> dict[str, Any]:
    return {"text": text}


def _call(call_id: str | None = None) -> dict[str, Any]:
    return {"functionCall": {"name": "f", "args": {"n": 1}, **({"id": call_id} if call_id else {})}}


def _answer(text: str, call_id: str | None = None) -> dict[str, Any]:
    response = {"name": "f", "response": {"result": text}}
    return {"functionResponse": {**response, **({"id": call_id} if call_id else {})}}


def test_empty_turns_unanswered_calls_and_used_orphans_are_settled_in_arrow() -> None:
    """R1's empty turns dropped, R5's cut made or its reject and R3's reject of an orphan a
    later turn may use, each in Arrow (the rows are settled by the fast path, and a reject
    names the call or result by the decoder's id, minted or real); an empty turn right before
    responses paired by place is the per-row path's, as is a row whose kept turns the encoder
    writes anew. Both paths agree on every row."""
    u, m = "user", "model"
    rows = [
        # an empty model turn: dropped
        [_turn(u, _said("hi")), _turn(m, _said(" ")), _turn(u, _said("hi?")), _turn(m, _said("x"))],
        # an unanswered call (minted id): cut before its turn
        [_turn(u, _said("hi")), _turn(m, _said("yo")), _turn(u, _said("go")), _turn(m, _call()),
         _turn(u, _said("stop")), _turn(m, _said("ok"))],
        # nothing would be left: rejected, naming the minted id
        [_turn(u, _said("go")), _turn(m, _call()), _turn(u, _said("stop")), _turn(m, _said("ok"))],
        # an orphan response (no call at its place) a later turn may use: rejected
        [_turn(u, _said("go")), _turn(m, _call()), _turn(u, _answer("18 C"), _answer("19 C")),
         _turn(m, _said("18 C"))],
        # an orphan with a real id
        [_turn(u, _said("go")), _turn(m, _call("a")), _turn(u, _answer("18 C", "a")),
         _turn(u, _answer("19 C", "z")), _turn(m, _said("18 C"))],
        # an empty turn right before responses by place: the per-row path's
        [_turn(u, _said("go")), _turn(m, _call()), _turn(m, _said("")), _turn(u, _answer("18 C")),
         _turn(m, _said("18 C"))],
        # turns the encoder writes anew (a call with no args gets `{}`, a response with no id
        # and no name its call's name): the per-row path's to repair
        [_turn(u, _said("go")), _turn(m, {"functionCall": {"name": "f"}}),
         _turn(u, _answer("18 C")), _turn(m, _said("")), _turn(u, _said("ok?")),
         _turn(m, _said("ok"))],
        [_turn(u, _said("go")), _turn(m, _call()), _turn(u, {"functionResponse": {"response": {}}}),
         _turn(m, _said("")), _turn(u, _said("ok?")), _turn(m, _said("ok"))],
    ]  # fmt: skip
    table = pa.Table.from_pylist([{"contents": r} for r in rows])
    assert_settled_in_arrow(
        table,
        GEMINI,
        handled=[True, True, True, True, True, False, False, False],
        repaired=[True, True, False, False, False, False, False, False],
        lengths=[3, 3],
        words={
            "unanswered_tool_call": [uncuttable(1, "call_1_0")],
            "orphan_tool_result": [used_message(2, "result_contents[2]_1"), used_message(3, "z")],
        },
    )


def test_a_minted_id_the_row_holds_leaves_the_row_unread() -> None:
    """The decoder mints `call_1_0` longer where a row holds that id already: the view does
    not follow it, and leaves such a row to the per-row path."""
    rows = [
        [_turn("user", _said("go")), _turn("model", _call(), _call("call_1_0"))],
        [_turn("user", _said("go")), _turn("model", _call(), _call("call_1_1_"))],
    ]
    table = pa.Table.from_pylist([{"contents": r} for r in rows])
    view = assert_flattened_as_decoded(GEMINI, table, unread_superset=True)
    assert view.unread.tolist() == [True, False]
    assert_fast_and_slow_agree(table, DEFAULT, GEMINI)
