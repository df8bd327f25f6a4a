"""Hermes' flattener (`formats/hermes/flatten.py`) held to its decoder: each row read as the
decoder reads it, unread exactly where the decoder raises (or where the system prompt declares
tools the fast path cannot read), each walk attribute what the rule's `find` finds; and the fast
path's verdicts the per-row path's, on drawn rows, generated rows and the real file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
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
from synthetic import arrow_schema, every_rates, generate_rows

from transcript_clean.formats import get_format
from transcript_clean.formats.base import DecodeError
from transcript_clean.formats.hermes import HermesFormat, tagged
from transcript_clean.formats.hermes.values import read_responses
from transcript_clean.model import is_json
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.orphan_tool_result import used_message
from transcript_clean.rules.unanswered_tool_call import uncuttable
from transcript_clean.tools import read_declarations

HERMES = get_format("hermes")
DATA = Path(__file__).parent / "data"
SCHEMA = pa.schema(
    [("conversations", pa.list_(pa.struct([("from", pa.string()), ("value", pa.string())])))]
)

_texts = st.sampled_from(["", " ", "\n", "hi", " hi\n", "\u3000", "é!", "\x1c", "a <think> b"])
_calls = st.sampled_from(
    [
        '{"name": "f", "arguments": {"n": 1}}',
        "{'name': 'g', 'arguments': {'on': True, 'x': None}}",  # a Python literal
        '{"name": "f", "arguments": "{\\"n\\": 2}"}',  # arguments as JSON text
        '{"name": "f", "arguments": "{oops"}',  # invalid arguments
        '{"name": "f", "arguments": [1, 2]}',  # not an object
        '{"name": "f", "arguments": {"x": NaN}}',  # NaN: the encoder writes the turn anew
        '{"name": "f"}',
        '{"arguments": {}}',  # no name: malformed
        "not json",  # malformed
        "{'name': 'f', 'arguments': {1, 2}}",  # a set: malformed
    ]
)
_responses = st.sampled_from(
    [
        "18 C",
        " ",
        '{"name": "f", "content": "18 C"}',
        '{"name": "f", "content": {"t": 18}}',
        "{'name': 'g', 'content': [1, True]}",
        '{"content": "no name"}',
        "{broken",
    ]
)


def _gpt_value(draw: st.DrawFn) -> str:
    pieces = []
    if draw(st.booleans()):
        pieces.append(f"<think>{draw(_texts)}</think>")
    pieces.append(draw(_texts))
    for _ in range(draw(st.integers(0, 2))):
        pieces.append(f"<tool_call>\n{draw(_calls)}\n</tool_call>")
    if draw(st.integers(0, 9)) == 0:
        pieces.append(draw(st.sampled_from(["<tool_call>{'name': 'f'}", "</tool_call>"])))
    return draw(st.sampled_from(["\n", "", " "])).join(pieces)


def _tool_value(draw: st.DrawFn) -> str:
    tagged = draw(st.integers(0, 3))
    if not tagged:
        return draw(_responses | _texts)
    return "\n".join(
        f"<tool_response>\n{draw(_responses)}\n</tool_response>" for _ in range(tagged)
    )


@st.composite
def _turn(draw: st.DrawFn) -> dict[str, Any] | None:
    kind = draw(
        st.sampled_from(
            ["system", "human", "user", "gpt", "gpt", "assistant", "tool", "tool", "bad"]
        )
    )
    if kind == "bad":  # what the decoder does not read
        return draw(
            st.sampled_from(
                [
                    None,
                    {"from": "observation", "value": "x"},
                    {"from": None, "value": "x"},
                    {"from": "human", "value": None},
                ]
            )
        )
    if kind in ("gpt", "assistant"):
        value = _gpt_value(draw)
    elif kind == "tool":
        value = _tool_value(draw)
    elif kind == "system":
        value = draw(
            _texts
            | st.just("Use <tools>[{'name': 'f'}]</tools> wisely.")
            | st.just("the <tools></tools> tags")
        )
    else:
        value = draw(_texts)
    return {"from": kind, "value": value}


def _rows() -> st.SearchStrategy[list[list[dict[str, Any] | None] | None]]:
    # Mostly well formed: a gpt turn's calls answered by the tool turns after it.
    exchange = st.builds(
        lambda n, together: [
            {"from": "human", "value": "go"},
            {
                "from": "gpt",
                "value": "\n".join(['<tool_call>{"name": "f", "arguments": {}}</tool_call>'] * n),
            },
            *(
                [{"from": "tool", "value": "\n".join(["<tool_response>1</tool_response>"] * n)}]
                if together
                else [{"from": "tool", "value": "<tool_response>1</tool_response>"}] * n
            ),
            {"from": "gpt", "value": "done"},
        ],
        st.integers(1, 3),
        st.booleans(),
    )
    row = st.builds(
        lambda head, tail: head + tail, exchange | st.just([]), st.lists(_turn(), max_size=6)
    )
    return st.lists(st.one_of(row, row, row, row, st.none()), min_size=1, max_size=6)


def _unsure_prompt(row: dict[str, Any]) -> bool:
    """Whether the decoder reads the row and finds a problem in the tools its system prompt
    declares (no `tools` column here): the rows the flattener leaves unread besides those the
    decoder rejects (the fast path would not word `invalid_tool_declaration` as it does)."""
    try:
        HERMES.decode(row)
    except DecodeError:
        return False
    declared = HERMES.declared_tools(row)
    return declared is not None and bool(declared.problems)


def _assert_flattened(table: pa.Table) -> None:
    view = assert_flattened_as_decoded(HERMES, table, unread_superset=True)
    assert view.texts is not None  # where tokens are counted: the texts of `chars`, each once
    pieces, owners = view.texts()
    lengths = [len(t or "") for t in pieces.to_pylist()]  # null: an unread row's
    per_message = [0] * view.messages
    for length, owner in zip(lengths, owners.tolist(), strict=True):
        per_message[owner] += length
    read = ~view.unread[view.message_row]
    assert [c for c, r in zip(per_message, read, strict=True) if r] == view.chars[read].tolist()
    declarations = [None] * len(table) if view.declarations is None else view.declarations
    for r, row in enumerate(table.to_pylist()):
        try:
            HERMES.decode(row)
            reads = True
        except DecodeError:
            reads = False
        assert view.unread[r] == (not reads or _unsure_prompt(row)), row
        if reads and not view.unread[r]:  # the prompt's tools, as the fast path will read them
            text = declarations[r]
            text = text.as_py() if isinstance(text, pa.Scalar) else text
            assert read_declarations(text) == HERMES.declared_tools(row), row


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows())
def test_hermes_rows_flatten_as_the_decoder_reads_them(turns: list[list[Any] | None]) -> None:
    _assert_flattened(pa.Table.from_pylist([{"conversations": t} for t in turns], schema=SCHEMA))


@pytest.mark.parametrize(
    "config",
    [
        DEFAULT,
        STRICT,
        replace(DEFAULT, interrupted_call="error_result"),
        replace(DEFAULT, orphan_result="drop"),
    ],
    ids=["default", "strict", "error_result", "drop orphans"],
)
def test_hermes_batches_of_any_rows_agree_on_both_paths(config: Config) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(turns: list[list[Any] | None]) -> None:
        table = pa.Table.from_pylist([{"conversations": t} for t in turns], schema=SCHEMA)
        assert_fast_and_slow_agree(table, config, HERMES)

    check()


def _real_table() -> pa.Table:
    rows = json.loads((DATA / "hermes_function_calling_rows.json").read_text(encoding="utf-8"))
    return pa.Table.from_pylist(rows)


def test_the_real_rows_flatten_as_decoded_and_agree_on_both_paths() -> None:
    table = _real_table()
    _assert_flattened(table)
    # The tool-use row is read, its prompt's tools handed to the fast path; the extraction row
    # is malformed; the JSON-mode row (a <schema>, no <tools>) declares none.
    view = HERMES.flatten(table.column("conversations").combine_chunks())
    assert view is not None and view.unread.tolist() == [False, True, False]
    assert view.declarations is not None
    declared = read_declarations(view.declarations[0].as_py())
    assert declared is not None and declared.names() == ["search_flights"]
    assert view.declarations[2].as_py() is None
    # its Python-literal call (`True`) and its `{name, content}` response, by the minted id
    assert view.call_id.to_pylist() == view.result_call.to_pylist() == ["call_2_0"]
    assert view.call_name.to_pylist() == ["search_flights"]
    assert json.loads(view.call_arguments[0].as_py())["flexible_cancellation"] is True
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, HERMES)
    # Settled in Arrow: the tool-use row found clean, its call checked against the prompt's
    # schema; the extraction row rejected in the decoder's words.
    verdicts = batch_verdicts(table, DEFAULT, format=HERMES)
    assert verdicts is not None and verdicts.handled.tolist() == [True, True, True]


def test_the_prompts_tools_are_read_where_the_tools_column_declares_nothing() -> None:
    """The decoder reads a `tools` column that declares something, else the prompt's `<tools>`
    (with `--tools-column`, never the prompt): a call to a tool only one of them declares is
    `unknown_tool` exactly where the decoder says so, on both paths."""
    prompt = 'Tools: <tools>[{"name": "f", "parameters": {"type": "object"}}]</tools>'
    turns = [
        _t("system", prompt),
        _t("human", "go"),
        _t("gpt", '<tool_call>{"name": "f", "arguments": {}}</tool_call>'),
        _t("tool", "<tool_response>1</tool_response>"),
        _t("gpt", "done"),
    ]
    columns = [None, "", "[]", '[{"name": "g"}]', '[{"name": "f"}]']
    table = pa.Table.from_pylist([{"conversations": turns, "tools": c} for c in columns])
    for config in (DEFAULT, STRICT):
        slow = assert_fast_and_slow_agree(table, config, HERMES)
        assert slow.rejects.num_rows == 1  # the row whose column declares g alone
    verdicts = batch_verdicts(table, DEFAULT, format=HERMES)
    assert verdicts is not None and verdicts.handled.all()
    named = HermesFormat()
    named.tools_column = "tools"
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, named)


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    for rows in (
        [{"conversations": [{"from": "human", "value": 3}]}],  # value not text
        [{"conversations": ["hi"]}],  # turns no structs
        [{"conversations": "hi"}],
    ):
        column = pa.Table.from_pylist(rows).column("conversations").combine_chunks()
        assert HERMES.flatten(column) is None, rows


def test_hermes_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [row for row, _ in generate_rows(400, "hermes", seed=21, rates=every_rates("hermes"))]
    view = assert_flattened_as_decoded(
        HERMES, pa.Table.from_pylist(rows, schema=arrow_schema("hermes"))
    )
    assert 0 < view.unread.sum() < len(rows) // 5


def test_hermes_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(HERMES, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_hermes_generated_batches_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "hermes", seed=8, rates=every_rates("hermes"))]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, HERMES)


def _t(tag: str, value: str) -> dict[str, str]:
    return {"from": tag, "value": value}


def test_empty_turns_unanswered_calls_and_used_orphans_are_settled_in_arrow() -> None:
    """R1's empty turns dropped, R5's cut made or its reject and R3's reject of an orphan a
    later turn may use, each in Arrow, in the per-row path's words (the minted ids); an empty
    turn right before results paired by place, and a row with a call to a raw-input tool (its
    arguments, NaN here, are R2's question), are the per-row path's. Both paths agree on every
    row."""
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    # A raw-input tool's call holding NaN, which the encoder would write anew (`reencoded`).
    nan = '<tool_call>\n{"name": "code_interpreter", "arguments": {"x": NaN}}\n</tool_call>'
    h, g, t = "human", "gpt", "tool"

    def said(*texts: str) -> str:
        return "\n".join(f"<tool_response>{text}</tool_response>" for text in texts)

    rows = [
        # an empty turn: dropped
        [_t(h, "hi"), _t(g, " "), _t(h, "hi?"), _t(g, "yo")],
        # an unanswered call: cut before its turn
        [_t(h, "hi"), _t(g, "yo"), _t(h, "go"), _t(g, call), _t(h, "stop"), _t(g, "ok")],
        # nothing would be left: rejected, naming the minted id
        [_t(h, "go"), _t(g, call), _t(h, "stop"), _t(g, "ok")],
        # a response past the calls, which a later turn may use: rejected
        [_t(h, "go"), _t(g, call), _t(t, said("18 C", "19 C")), _t(g, "18 C")],
        # an empty turn right before responses by place: the per-row path's
        [_t(h, "go"), _t(g, call), _t(g, ""), _t(t, said("18 C")), _t(g, "18 C")],
        # an empty turn in a row calling a raw-input tool: the per-row path's
        [_t(h, "go"), _t(g, nan), _t(t, said("1")), _t(g, ""), _t(h, "ok?"), _t(g, "ok")],
    ]  # fmt: skip
    table = pa.Table.from_pylist([{"conversations": r} for r in rows], schema=SCHEMA)
    tools = [None] * (len(rows) - 1) + ['[{"type": "code_interpreter"}]']
    table = table.append_column("tools", pa.array(tools, pa.string()))
    assert_settled_in_arrow(
        table,
        HERMES,
        handled=[True, True, True, True, False, False],
        repaired=[True, True, False, False, False, False],
        lengths=[3, 3],
        words={
            "unanswered_tool_call": [uncuttable(1, "call_1_0")],
            "orphan_tool_result": [used_message(2, "result_2_1")],
        },
    )


_odd_calls = st.sampled_from(
    [
        '{"name": "f", "arguments": {"big": 18446744073709551616}}',  # read as a float
        '{"name": "f", "arguments": {"x": 1e400}}',  # infinite: not strict JSON
        '{"name": "f", "arguments": {"s": "\\ud800"}}',  # a lone surrogate
        '{"name": "f", "arguments": {"s": "\\ud83d\\ude00"}}',
        '{"name": "f", "arguments": null}',
        '{"name": "f", "arguments": {"a": 1}, "name": 2}',  # the last key wins
        '{"name": 1, "arguments": {}}',
        "[1]",
        '\u00a0{"name": "f", "arguments": {}}\u00a0',  # white space JSON does not allow
    ]
)


@st.composite
def _tagged_gpt_value(draw: st.DrawFn) -> str:
    value = _gpt_value(draw)
    for _ in range(draw(st.integers(0, 2))):
        call = draw(_odd_calls | _calls)
        gap = draw(st.sampled_from(["", " ", "\n", "text between "]))
        value += f"{gap}<tool_call>{draw(st.sampled_from(['', ' ', chr(10)]))}{call}</tool_call>"
    return value


@given(_tagged_gpt_value())
def test_the_fast_reading_of_a_gpt_turn_is_the_decoders(value: str) -> None:
    fast = tagged._read_gpt_fast(value)
    truth = tagged._read_gpt_parts(value)
    if fast is not None:
        assert fast == truth
    assert tagged._read_gpt(value) == truth


def test_the_fast_reading_reads_the_common_layout_and_leaves_the_rest() -> None:
    call = '{"name": "f", "arguments": {"n": 1}}'
    common = f"<think>\nplan\n</think>\nok\n<tool_call>\n{call}\n</tool_call>"
    assert tagged._read_gpt_fast(common) == (["plan"], "ok", [("f", '{"n":1}', True, True)])
    assert tagged._read_gpt_fast("<think>x</think>") == (["x"], None, [])
    for left in ["<tool_call>{'name': 'f', 'arguments': {}}</tool_call>", "<tool_call>{}"]:
        assert tagged._read_gpt_fast(left) is None


# Integers in 64 bits: a larger one orjson reads as a float, before any text is written.
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(_json_values)
def test_a_result_content_is_written_as_json_dumps_writes_it(content: Any) -> None:
    body = json.dumps({"name": "f", "content": content})
    expected = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    assert read_responses(f"<tool_response>{body}</tool_response>") == [("f", expected)]


# The column read (`tagged.read_gpt`, `tagged.read_tool`) held to the decoder's readers, one
# turn at a time, on values drawn around the edges of the layout it reads fast.
_spaces = st.sampled_from(
    ["", " ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\x1c", "\x85", " \u2028"]
)
_words = st.sampled_from(["", "ok", "I'll look.", "x < y", "é", "<tool_call", "</tool_call>"])
_bodies = (
    _calls
    | _odd_calls
    | st.sampled_from(
        ['{"name": "f", "arguments": {"x": "</think>"}}', '{"name": "\\udc00", "arguments": {}}']
    )
)
_stray = st.sampled_from(
    ["", "<think>", "</think>", "<tool_call>", "</tool_call>", "<think>a</think>", "text"]
)


@st.composite
def _column_gpt_value(draw: st.DrawFn) -> str:
    space = lambda: draw(_spaces)  # noqa: E731
    value = space()
    if draw(st.booleans()):
        value += f"<think>{space()}{draw(_words)}{space()}</think>"
    value += space() + draw(_words) + space()
    for _ in range(draw(st.integers(0, 3))):
        value += f"<tool_call>{space()}{draw(_bodies)}{space()}</tool_call>"
        value += draw(_spaces | _words)  # text between calls is the decoder's text
    if draw(st.integers(0, 3)) == 0:  # something out of the common layout, anywhere
        at = draw(st.integers(0, len(value)))
        value = value[:at] + draw(_stray) + value[at:]
    return value


@st.composite
def _column_tool_value(draw: st.DrawFn) -> str:
    space = lambda: draw(_spaces)  # noqa: E731
    body = _responses | _json_values.map(lambda c: json.dumps({"name": "f", "content": c}))
    if draw(st.integers(0, 3)) == 0:
        value = space() + draw(body | st.just("{'name': 'g', 'content': 'x'}")) + space()
    else:
        value = draw(_words)
        for _ in range(draw(st.integers(1, 3))):
            value += f"<tool_response>{space()}{draw(body)}{space()}</tool_response>"
            value += draw(_words | _spaces)
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(value)))
        value = (
            value[:at] + draw(st.sampled_from(["<tool_response>", "</tool_response>"])) + value[at:]
        )
    return value


def _gpt_read_by_turn(values: list[str]) -> list[Any]:
    read = tagged.read_gpt(pa.array(values, pa.string()), np.arange(len(values), dtype=np.int64))
    texts, reasons = read.text.to_pylist(), read.reason.to_pylist()
    names, arguments = read.call_name.to_pylist(), read.call_arguments.to_pylist()
    out: list[Any] = []
    for turn in range(len(values)):
        if turn in read.unread.tolist():
            out.append(None)
            continue
        words = [t for t, at in zip(texts, read.text_turn.tolist(), strict=True) if at == turn]
        calls = [
            (names[k], arguments[k], bool(read.call_object[k]), bool(read.call_same[k]))
            for k in np.flatnonzero(read.call_turn == turn).tolist()
        ]
        thought = [
            r for r, at in zip(reasons, read.reason_turn.tolist(), strict=True) if at == turn
        ]
        out.append((thought, words[0] if words else None, calls))
    assert sorted([*read.unread.tolist(), *read.read.tolist()]) == list(range(len(values)))
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_column_gpt_value(), min_size=1, max_size=8))
def test_the_column_read_of_gpt_turns_is_the_decoders(values: list[str]) -> None:
    truth = [tagged._read_gpt_parts(v) for v in values]
    # A name Arrow cannot hold (a lone surrogate written as a JSON escape): the per-row path's.
    truth = [t if t is None or all(is_json(c[0]) for c in t[2]) else None for t in truth]
    # A call's arguments are JSON text that every reader parses: the column read gives the
    # source's, the decoder's reader orjson's compact copy; they read as one value.
    assert _parsed(_gpt_read_by_turn(values)) == _parsed(truth)


def _parsed(turns: list[Any]) -> list[Any]:
    """Turns read as `_gpt_read_by_turn` gives them, each call's arguments read as JSON."""
    return [
        None
        if turn is None
        else (
            turn[0],
            turn[1],
            [(n, _value(a), *more) for n, a, *more in turn[2]],
        )
        for turn in turns
    ]


def _value(arguments: str | None) -> Any:
    """Arguments' JSON text as the value it reads as, written one way (NaN equal to itself);
    text that is no JSON as itself."""
    if arguments is None:
        return None
    try:
        return ("json", json.dumps(json.loads(arguments), sort_keys=True))
    except ValueError:
        return ("text", arguments)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_column_tool_value(), min_size=1, max_size=8))
def test_the_column_read_of_tool_turns_is_the_decoders(values: list[str]) -> None:
    read = tagged.read_tool(pa.array(values, pa.string()), np.arange(len(values), dtype=np.int64))
    truth = [[text for _, text in read_responses(v)] for v in values]
    # Results Arrow cannot hold (a lone surrogate written as a JSON escape) are the per-row path's.
    unread = [turn for turn, texts in enumerate(truth) if not all(map(is_json, texts))]
    expected = [(t, text) for t, texts in enumerate(truth) if t not in unread for text in texts]
    assert read.unread.tolist() == unread
    assert list(zip(read.turn.tolist(), read.text.to_pylist(), strict=True)) == expected


def test_the_common_layout_is_read_without_the_per_turn_readers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The column read settles the common layout itself: the per-turn readers, made to fail
    here, are not asked; a turn out of the layout is still theirs."""
    gpt = [
        '<think>\nplan\n</think>\nI will look.\n<tool_call>\n{"name": "f", "arguments": {"n": 1}}'
        '\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>',
        "\u3000<think> </think>",
    ]
    tool = [
        '<tool_response>\n{"name": "f", "content": {"t": 18}}\n</tool_response>',
        'before<tool_response> 18 C </tool_response>\n<tool_response>{"name": "g"}</tool_response>',
        ' {"name": "f", "content": "x"} ',
    ]

    def refuse(*_: Any) -> Any:
        raise AssertionError("read one turn at a time")

    monkeypatch.setattr(tagged, "_read_gpt", refuse)
    monkeypatch.setattr(tagged, "read_responses", refuse)
    read = _gpt_read_by_turn(gpt)
    assert read[0] == (
        ["plan"],
        "I will look.",
        [("f", '{"n": 1}', True, True), ("g", "{}", True, True)],  # as the source holds them
    )
    assert read[1] == ([], None, [("f", "[1]", False, True)])
    assert read[2] == ([""], None, [])
    results = tagged.read_tool(pa.array(tool), np.arange(3, dtype=np.int64))
    assert results.turn.tolist() == [0, 1, 1, 2]
    assert results.text.to_pylist() == ['{"t": 18}', "18 C", '{"name": "g"}', "x"]
    with pytest.raises(AssertionError, match="one turn at a time"):
        tagged.read_gpt(pa.array(["<tool_call>{'name': 'f'}</tool_call>"]), np.arange(1))
    with pytest.raises(AssertionError, match="one turn at a time"):
        tagged.read_tool(pa.array(["<tool_response>{'name': 'f'}</tool_response>"]), np.arange(1))


def test_a_lone_surrogate_in_a_name_or_a_result_is_left_to_the_per_row_path() -> None:
    """JSON may escape a lone surrogate, which `json.loads` reads and Arrow cannot hold: such
    a row is unread here (it crashed the flattener before) and both paths agree on it."""
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    rows = [
        [
            _t("human", "go"),
            _t("gpt", '<tool_call>{"name": "\\ud800", "arguments": {}}</tool_call>'),
        ],
        [
            _t("human", "go"),
            _t("gpt", call),
            _t("tool", '<tool_response>{"name": "f", "content": "\\ud800"}</tool_response>'),
            _t("gpt", "ok"),
        ],
        [_t("human", "go"), _t("gpt", call), _t("tool", "<tool_response>1</tool_response>")],
    ]
    table = pa.Table.from_pylist([{"conversations": r} for r in rows], schema=SCHEMA)
    view = HERMES.flatten(table.column("conversations").combine_chunks())
    assert view is not None and view.unread.tolist() == [True, True, False]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, HERMES)
