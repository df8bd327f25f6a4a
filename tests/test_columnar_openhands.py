"""OpenHands' flattener (`formats/openhands/flatten.py`) held to its decoder: each row read as the
decoder reads it, unread exactly where the decoder raises (or where the flattener says it leaves
the row to the per-row path), and each walk attribute what the rule's `find` finds; the fast
path and the per-row path agree on whole batches, drawn, generated and real."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from differential import assert_fast_and_slow_agree
from flattened import assert_flattened_as_decoded, truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import arrow_schema, every_rates, generate_rows

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.unanswered_tool_call import INTERRUPTED_TEXT

OPENHANDS = get_format("openhands")
DATA = Path(__file__).parent / "data" / "openhands"
REAL = [DATA / "basic_interactions.json", DATA / "wrong_initial_state_trimmed.json"]

_s = pa.string()
_FUNCTION = pa.struct([("name", _s), ("arguments", _s)])
_MESSAGE = pa.struct(
    [
        ("content", _s),
        ("tool_calls", pa.list_(pa.struct([("id", _s), ("function", _FUNCTION)]))),
        ("reasoning_content", _s),
        ("thinking", _s),
    ]
)
_RESPONSE = pa.struct([("id", _s), ("choices", pa.list_(pa.struct([("message", _MESSAGE)])))])
_EVENT = pa.struct(
    [
        ("id", pa.int64()),
        ("source", _s),
        ("action", _s),
        ("observation", _s),
        ("cause", pa.int64()),
        ("message", _s),
        ("content", _s),
        ("args", pa.struct([("content", _s), ("image_urls", pa.list_(_s))])),
        (
            "tool_call_metadata",
            pa.struct([("function_name", _s), ("tool_call_id", _s), ("model_response", _RESPONSE)]),
        ),
    ]
)
SCHEMA = pa.schema([("history", pa.list_(_EVENT))])

_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])
_maybe_texts = st.one_of(_texts, _texts, st.none())
_ids = st.sampled_from(["a", "b", "c"])
_event_ids = st.sampled_from([1, 2, 3, None])


def _call() -> st.SearchStrategy[dict[str, Any]]:
    tool_call = st.builds(
        lambda i, arguments, function: {
            "id": i,
            "function": {"name": "f", "arguments": arguments} if function else None,
        },
        st.one_of(_ids, st.none()),
        st.sampled_from(['{"n": 1}', "{}", "[1]", "{bad", None]),
        st.booleans() | st.just(True),
    )
    message = st.builds(
        lambda content, calls, reasoning, thinking: {
            "content": content,
            "tool_calls": calls,
            "reasoning_content": reasoning,
            "thinking": thinking,
        },
        _maybe_texts,
        st.lists(tool_call, max_size=3) | st.none(),
        st.one_of(st.none(), st.none(), _texts),
        st.one_of(st.none(), st.none(), st.none(), _texts),
    )
    response = st.builds(
        lambda i, choices: {"id": i, "choices": choices},
        st.sampled_from(["r1", "r1", "r2", None]),
        st.one_of(st.lists(st.builds(lambda m: {"message": m}, message), max_size=1), st.none()),
    )
    return st.builds(
        lambda i, call_id, name, response: {
            "id": i,
            "source": "agent",
            "action": "run",
            "tool_call_metadata": {
                "function_name": name,
                "tool_call_id": call_id,
                "model_response": response,
            },
        },
        _event_ids,
        st.one_of(_ids, _ids, st.none()),
        st.sampled_from(["f", "f", None]),
        st.one_of(response, response, st.none()),
    )


def _events() -> st.SearchStrategy[dict[str, Any] | None]:
    said = st.builds(
        lambda i, source, content, message, images: {
            "id": i,
            "source": source,
            "action": "message",
            "args": {"content": content, "image_urls": images},
            "message": message,
        },
        _event_ids,
        st.sampled_from(["user", "user", "agent", None]),
        _maybe_texts,
        _maybe_texts,
        st.one_of(st.none(), st.lists(st.sampled_from(["u.png", None]), max_size=2)),
    )
    system = st.builds(
        lambda content, message: {
            "source": "agent",
            "action": "system",
            "args": {"content": content},
            "message": message,
        },
        _maybe_texts,
        _maybe_texts,
    )
    observation = st.builds(
        lambda i, kind, cause, content, message, metadata: {
            "id": i,
            "source": "agent",
            "observation": kind,
            "cause": cause,
            "content": content,
            "message": message,
            "tool_call_metadata": metadata,
        },
        _event_ids,
        st.sampled_from(["run", "run", "error", "null", "agent_state_changed", "read"]),
        _event_ids,
        _maybe_texts,
        _maybe_texts,
        st.one_of(
            st.none(),
            st.builds(
                lambda i: {"function_name": "f", "tool_call_id": i},
                st.one_of(_ids, _ids, st.none()),
            ),
        ),
    )
    other = st.builds(
        lambda action: {"source": "agent", "action": action},
        st.sampled_from(["change_agent_state", "recall", "condensation", "browse"]),
    )
    neither = st.just({"source": "agent"})
    return st.one_of(said, said, _call(), _call(), observation, observation, system, other) | (
        neither | st.none()
    )


def _exchange(ids: list[str], words: str) -> list[dict[str, Any]]:
    """A user's question, one response's calls answered by their observations, an answer."""
    message = {"content": "Let me look.", "tool_calls": [
        {"id": i, "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]}  # fmt: skip
    response = {"id": "r0", "choices": [{"message": message}]}
    calls = [
        {"id": 10 + k, "source": "agent", "action": "run",
         "tool_call_metadata": {"function_name": "f", "tool_call_id": i,
                                "model_response": response}}
        for k, i in enumerate(ids)
    ]  # fmt: skip
    answers = [
        {"id": 20 + k, "source": "agent", "observation": "run", "cause": 10 + k, "content": "ok"}
        for k in range(len(ids))
    ]
    user = {"source": "user", "action": "message", "args": {"content": "go"}}
    answer = {"source": "agent", "action": "message", "args": {"content": words}}
    return [user, *calls, *answers, answer]


def _rows() -> st.SearchStrategy[list[dict[str, Any]]]:
    row = st.builds(
        lambda head, tail: {"history": head + tail},
        st.builds(_exchange, st.lists(_ids, max_size=3, unique=True), _texts) | st.just([]),
        st.lists(_events(), max_size=6),
    )
    return st.lists(row | st.just({"history": None}), min_size=1, max_size=6)


def _left_to_the_per_row_path(row: dict[str, Any]) -> bool:
    """Rows the decoder reads that the flattener leaves unread: two calls with one event id, or
    an observation naming by `cause` alone a call that comes after it."""
    events = [e for e in row["history"] or [] if e is not None]
    calls = [
        (k, e["id"])
        for k, e in enumerate(events)
        if e["action"] is not None and e["tool_call_metadata"] is not None and e["id"] is not None
    ]
    if len({i for _, i in calls}) < len(calls):
        return True
    for k, event in enumerate(events):
        if event["action"] is not None or event["tool_call_metadata"] is not None:
            continue
        if event["observation"] is None or event["cause"] is None:
            continue
        if any(i == event["cause"] and at > k for at, i in calls):
            return True
    return False


def test_openhands_rows_flatten_as_the_decoder_reads_them() -> None:
    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(rows: list[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        view = assert_flattened_as_decoded(OPENHANDS, table, unread_superset=True)
        rows = table.to_pylist()
        unread = [truth(OPENHANDS, row) is None or _left_to_the_per_row_path(row) for row in rows]
        assert view.unread.tolist() == unread, rows

    check()


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_openhands_batches_agree_on_both_paths(config: Config) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(rows: list[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        assert_fast_and_slow_agree(table, config, OPENHANDS)

    check()


def _real_rows() -> list[dict[str, Any]]:
    return [{"instance_id": p.stem, "history": json.loads(p.read_text())} for p in REAL]


def test_the_real_trajectories_are_read_and_settled_in_arrow() -> None:
    table = pa.Table.from_pylist(_real_rows())
    view = assert_flattened_as_decoded(OPENHANDS, table)
    assert not view.unread.any()
    assert view.role.tolist() == [1, 2] * 6  # each a user's message, then the agent's
    assert view.call_name.to_pylist() == ["finish", "str_replace_editor", "execute_bash", "finish"]
    verdicts = fast_verdicts(OPENHANDS, table.column("history").combine_chunks())
    assert verdicts is not None
    # each ends on a `finish` call no observation answers: pending at the end, which the
    # default config repairs with the error result an agent loop writes (the per-row path's)
    assert verdicts.trailing_calls.tolist() == [1, 1]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENHANDS)


def _traced(name: str) -> dict[str, Any]:
    """A trajectory whose `system` action declares `execute_bash` and whose agent calls the tool
    `name` (with a `command`), gets its result and answers."""
    tool = {"type": "function", "function": {"name": "execute_bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]
    }}}  # fmt: skip
    system = {"source": "agent", "action": "system", "args": {"content": "Hi.", "tools": [tool]}}
    message = {"content": None, "tool_calls": [
        {"id": "t1", "function": {"name": name, "arguments": '{"command": "ls"}'}}
    ]}  # fmt: skip
    metadata = {"function_name": name, "tool_call_id": "t1",
                "model_response": {"id": "r", "choices": [{"message": message}]}}  # fmt: skip
    return {"history": [
        system,
        {"source": "user", "action": "message", "args": {"content": "List the files."}},
        {"id": 3, "source": "agent", "action": "run", "tool_call_metadata": metadata},
        {"source": "agent", "observation": "run", "cause": 3, "content": "a.py"},
        {"source": "agent", "action": "message", "args": {"content": "One file."}},
    ]}  # fmt: skip


def test_the_system_actions_tools_are_checked_in_arrow() -> None:
    """A trajectory's tools are its `system` action's `args.tools`: a call to another tool is
    rejected in Arrow, in the per-row path's words."""
    table = pa.Table.from_pylist([_traced("execute_bash"), _traced("rm_rf")])
    view = assert_flattened_as_decoded(OPENHANDS, table)
    assert view.declarations is not None and view.declarations.null_count == 0
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False]
    assert verdicts.handled.tolist() == [True, True]  # the unknown tool rejected in Arrow
    assert [r.code for r in verdicts.rejects] == ["unknown_tool"]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENHANDS)
    # with --tools-column, the decoder reads no tools in the trajectory: nor does the view
    named = type(OPENHANDS)()
    named.tools_column = "tools"
    flattened = named.flatten(table.column("history").combine_chunks())
    assert flattened is not None and flattened.declarations is None


def _generated(n: int, seed: int) -> tuple[pa.Table, list[frozenset[str]]]:
    rates = every_rates("openhands")
    made = list(generate_rows(n, "openhands", seed=seed, rates=rates))
    table = pa.Table.from_pylist([row for row, _ in made], schema=arrow_schema("openhands"))
    return table, [codes for _, codes in made]


# Whose repair is the per-row path's: a repeated id (R4's merges are written in Arrow).
PER_ROW = {"duplicate_call_id"}


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_generated_rows_agree_on_both_paths_and_most_are_settled_in_arrow(config: Config) -> None:
    table, planted = _generated(1500, seed=5)
    view = assert_flattened_as_decoded(OPENHANDS, table)
    assert view.unread.tolist() == ["malformed_row" in codes for codes in planted]
    assert view.texts is not None  # the texts tokens are counted over: those of `chars`
    texts, owner = view.texts()
    lengths = pc.utf8_length(texts).to_numpy()
    assert (
        np.bincount(owner, weights=lengths, minlength=view.messages).tolist() == view.chars.tolist()
    )
    assert_fast_and_slow_agree(table, config, OPENHANDS)
    verdicts = batch_verdicts(table, config, format=OPENHANDS)
    assert verdicts is not None
    assert verdicts.handled.sum() > 0.75 * table.num_rows
    if config is DEFAULT:  # every row left to the per-row path has a code only it repairs
        left = [codes for codes, done in zip(planted, verdicts.handled, strict=True) if not done]
        assert left and all(codes & PER_ROW for codes in left)


def test_bookkeeping_after_an_empty_turn_leaves_its_repair_to_the_per_row_path() -> None:
    """The encoder writes an event holding no message after the message before it, and those
    after a dropped message last: dropping the empty turn's event alone would not be that."""
    empty = {"source": "agent", "action": "message", "args": {"content": " "}}
    state = {"source": "environment", "observation": "agent_state_changed", "content": ""}
    user = {"source": "user", "action": "message", "args": {"content": "Hi"}}
    answer = {"source": "agent", "action": "message", "args": {"content": "Hello."}}
    rows = [
        {"history": [user, empty, state, user, answer]},
        {"history": [user, state, empty, user, answer]},
    ]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(OPENHANDS, table)
    assert view.reencoded is not None and view.reencoded.tolist() == [True, False]
    assert view.item_message is not None  # the state change is in no message
    assert view.item_message.tolist() == [0, 1, -1, 2, 3, 4, -1, 5, 6, 7]
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [False, True]
    assert verdicts.repaired.tolist() == [False, True]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENHANDS)


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    user = {"source": "user", "action": "message", "args": {"content": "hi"}}
    for rows in (
        [{"history": [{**user, "id": "7"}]}],  # an event id of text
        [{"history": [{**user, "args": {"content": 3}}]}],  # a content that is no text
        [{"history": [{**user, "args": {"content": "hi", "image_urls": "u.png"}}]}],
        [{"history": "hi"}],  # no list of events
    ):
        table = pa.Table.from_pylist(rows)
        assert OPENHANDS.flatten(table.column("history").combine_chunks()) is None, rows


def test_a_broken_declaration_is_left_to_the_per_row_path_which_names_where_it_is() -> None:
    def tool(name: str, kind: str) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"a": {"type": kind}}}
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    def row(tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"history": [
            {"source": "agent", "action": "system", "args": {"content": "S", "tools": tools}},
            {"source": "user", "action": "message", "args": {"content": "q"}},
            {"source": "agent", "action": "message", "args": {"content": "a"}},
        ]}  # fmt: skip

    table = pa.Table.from_pylist([row([tool("f", "string"), tool("x", "strng")]), row([])])
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS)
    assert verdicts is not None and verdicts.handled.tolist() == [False, True]
    slow = assert_fast_and_slow_agree(table, DEFAULT, OPENHANDS)
    (message,) = slow.rejects.column("_reject_message").to_pylist()
    assert message.startswith("history[].args.tools[1] 'x': its parameters are not a JSON Schema")


def test_trajectories_read_from_json_lines_are_flattened_around_their_json_fields(
    tmp_path: Path,
) -> None:
    """A JSON Lines source types what holds values of several types, or `{}`, or a tool's
    `parameters`, as `pa.json_()` (a `finish` action's `args.outputs` is `{}` in every real
    trajectory): the flattener reads around such fields, so the rows are still settled in
    Arrow, the declarations' JSON read as the decoder reads it."""
    from transcript_clean.sources import open_source
    from transcript_clean.sources.jsontypes import has_json

    def traced(name: str) -> dict[str, Any]:
        return {"instance_id": name, **_traced(name)}

    empty = {"source": "agent", "action": "message", "args": {"content": ""}}
    events = traced("execute_bash")["history"]
    repaired = {"instance_id": "empty", "history": [*events[:2], empty, *events[1:]]}
    rows = [*_real_rows(), traced("execute_bash"), traced("rm_rf"), repaired]
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    source = open_source(str(path))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    assert has_json(table.schema.field("history").type)
    # (as a run writing Parquet reads them: a line written as JSON Lines again is the per-row
    # path's to re-encode where a row is repaired)
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS, exact_lines=False)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True] * 5
    # the real ones end on a pending `finish`; one calls an undeclared tool; one's empty turn
    # is dropped in Arrow, the tool's `parameters` (JSON in Arrow) written back as they were
    assert verdicts.clean.tolist() == [False, False, True, False, False]
    assert verdicts.repaired.tolist() == [False, False, False, False, True]
    assert [r.code for r in verdicts.rejects] == ["unknown_tool"]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENHANDS)


def test_a_json_field_where_the_decoder_reads_is_not_flattened() -> None:
    """A message's `content` typed `pa.json_()` (text in some rows, a list in others): the
    decoder reads the text, so the flattener does not read the column."""
    from transcript_clean.sources.jsontypes import to_array

    said = {"source": "user", "action": "message", "args": {"content": "hi"}}
    message = pa.struct([("content", pa.json_()), ("tool_calls", pa.null())])
    response = pa.struct(
        [("id", pa.string()), ("choices", pa.list_(pa.struct([("message", message)])))]
    )
    event = pa.struct(
        [("source", pa.string()), ("action", pa.string()),
         ("args", pa.struct([("content", pa.string())])),
         ("tool_call_metadata", pa.struct([("model_response", response)]))]
    )  # fmt: skip
    column = to_array([[said]], pa.list_(event))
    assert OPENHANDS.flatten(column) is None


def _calls(first_id: int | None, *call_ids: str) -> list[dict[str, Any]]:
    """The actions of one model response calling `call_ids` (event ids from `first_id`)."""
    tool_calls = [
        {"id": c, "type": "function", "function": {"name": "run", "arguments": "{}"}}
        for c in call_ids
    ]
    message = {"content": "Let me look.", "role": "assistant", "tool_calls": tool_calls}
    response = {"id": f"r-{call_ids[0]}", "choices": [{"message": message}]}
    return [
        {"id": None if first_id is None else first_id + k, "source": "agent", "action": "run",
         "args": {}, "tool_call_metadata": {"function_name": "run", "tool_call_id": c,
                                            "model_response": response}}
        for k, c in enumerate(call_ids)
    ]  # fmt: skip


def _observed(event_id: int, cause: int, call_id: str) -> dict[str, Any]:
    return {"id": event_id, "source": "agent", "observation": "run", "cause": cause,
            "content": "ok", "tool_call_metadata": {"function_name": "run",
                                                    "tool_call_id": call_id}}  # fmt: skip


def _said(source: str, text: str, images: list[str] | None = None) -> dict[str, Any]:
    return {"source": source, "action": "message",
            "args": {"content": text, "image_urls": images}}  # fmt: skip


def test_error_results_are_written_in_arrow_where_the_encoder_puts_them() -> None:
    """R5's error result (the default for an agent trace) is written in Arrow as the encoder
    writes it: a new `error` observation naming its call (`cause`: its action's id), after the
    results that answer its turn and the bookkeeping after them, or before the user's message
    that answers it. A user's message with images (which the encoder writes otherwise) or with
    no text leaves its row to the per-row path."""
    state = {"source": "environment", "observation": "agent_state_changed", "content": ""}
    user, done = _said("user", "Look."), _said("agent", "Done.")
    rows = [
        # one of two parallel calls unanswered: after the other's result and the bookkeeping
        [user, *_calls(1, "a", "b"), state, _observed(3, 1, "a"), state, done],
        # the user spoke instead: before the user's message (its action's id as `cause`)
        [user, *_calls(1, "a"), state, _said("user", "Stop."), done],
        # an action with no id: no `cause`
        [user, *_calls(None, "a"), _said("user", "Stop."), done],
        # the user's message holds an image, or no text: the per-row path's
        [user, *_calls(1, "a"), _said("user", "Stop.", ["https://x/y.png"]), done],
        [user, *_calls(1, "a"), _said("user", ""), done],
    ]
    table = pa.Table.from_pylist([{"history": r} for r in rows])
    assert_flattened_as_decoded(OPENHANDS, table)
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, False, False]
    assert verdicts.repaired.tolist() == [True, True, True, False, False]
    assert verdicts.repaired_column is not None
    written = verdicts.repaired_column.to_pylist()
    kinds = [[e["observation"] or e["action"] for e in events] for events in written]
    assert kinds == [
        ["message", "run", "run", "agent_state_changed", "run", "agent_state_changed", "error",
         "message"],
        ["message", "run", "agent_state_changed", "error", "message", "message"],
        ["message", "run", "error", "message", "message"],
    ]  # fmt: skip
    new = [e for events in written for e in events if e["observation"] == "error"]
    assert [(e["cause"], e["tool_call_metadata"]["tool_call_id"]) for e in new] == [
        (2, "b"),
        (1, "a"),
        (None, "a"),
    ]
    assert {e["content"] for e in new} == {INTERRUPTED_TEXT}
    for config in (DEFAULT, STRICT, replace(DEFAULT, interrupted_call="cut")):
        assert_fast_and_slow_agree(table, config, OPENHANDS)


def test_r4s_merges_are_written_in_arrow_as_the_encoder_writes_them() -> None:
    """Two message actions of the agent in a row: the second's event goes and the first holds
    the joined text in `args.content` and `message`, its empty `image_urls` null, as the
    encoder writes it. Left to the per-row path: a first message with an image (more than one
    text), bookkeeping after the joined event with a message after it (the encoder writes it
    last), a first event with no `args` (the encoder writes one anew)."""
    user = {"id": 0, "source": "user", "action": "message", "message": "Hi",
            "args": {"content": "Hi", "image_urls": None}}  # fmt: skip

    def said(id_: int, text: str, images: list[str] | None = None) -> dict[str, Any]:
        args = {"content": text, "image_urls": images}
        return {"id": id_, "source": "agent", "action": "message", "message": text, "args": args}

    state = {"id": 9, "source": "environment", "observation": "agent_state_changed",
             "content": ""}  # fmt: skip
    first, second = said(1, "Hello."), said(2, "Anything else?")
    rows = [
        [user, first, second],
        [user, said(1, "Hello.", []), second, state],  # bookkeeping last: stays last
        [user, first, state, second],  # bookkeeping between: stays after the first
        [user, first, said(2, "Hello."), said(3, "More.")],  # a repeat goes, adds nothing
        [user, said(1, "Look.", ["a.png"]), second],  # an image: per row
        [user, first, second, state, user, said(4, "Bye.")],  # bookkeeping moved last
        [user, {**first, "args": None}, second],  # no args: per row
    ]
    table = pa.Table.from_pylist([{"history": r} for r in rows])
    view = assert_flattened_as_decoded(OPENHANDS, table)
    assert view.message_text is not None
    verdicts = batch_verdicts(table, DEFAULT, format=OPENHANDS)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, True, False, False, False]
    assert verdicts.repaired.tolist() == [True, True, True, True, False, False, False]
    assert verdicts.repaired_column is not None
    written = verdicts.repaired_column.to_pylist()
    joined = "Hello.\n\nAnything else?"
    assert written[0][1]["message"] == joined and written[0][1]["args"]["content"] == joined
    assert written[1][1]["args"]["image_urls"] is None  # `[]`: the encoder writes none
    assert [e["id"] for e in written[2]] == [0, 1, 9]
    assert written[3][1]["message"] == "Hello.\n\nMore."
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENHANDS)
