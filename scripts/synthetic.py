"""Realistic generated conversation rows with known defects, for tests, the demo and benchmarks.

    >>> rows = list(generate_rows(1000, format="sharegpt", seed=0))
    >>> row, planted = rows[0]            # planted: the codes a strict run finds in the row

Each row is a chat, now and then with a system prompt, with tool calls (some parallel) and their
results where the format can hold them (not in the formats of plain strings), reasoning where the
format has it, an `id` column and a `tools` column where the format has one. A row carries at
most one defect, drawn at the given rates. The rows of one format type
together as Arrow (`arrow_schema`), so they write to Parquet in record batches.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.formats.base import Row
from transcript_clean.formats.text.hh import render_hh

if TYPE_CHECKING:
    import pyarrow as pa

CODES: Final = (
    "malformed_row",
    "unknown_role",
    "empty_assistant_turn",
    "invalid_tool_arguments",
    "orphan_tool_result",
    "consecutive_assistant",
    "unanswered_tool_call",
    "trailing_tool_call",
    "no_assistant_turn",
    "unknown_tool",
    "tool_arguments_schema",
    "duplicate_call_id",
    "invalid_tool_declaration",
)

DEFAULT_RATES: Final[Mapping[str, float]] = {
    "malformed_row": 0.01,
    "unknown_role": 0.005,
    "empty_assistant_turn": 0.02,
    "invalid_tool_arguments": 0.015,
    "orphan_tool_result": 0.01,
    "consecutive_assistant": 0.01,
    "unanswered_tool_call": 0.01,
    "trailing_tool_call": 0.015,
    "no_assistant_turn": 0.005,
}
"""About 10% of rows with a defect, spread over the codes."""

FORMATS: Final = (
    "openai",
    "sharegpt",
    "anthropic",
    "rig",
    "gemini",
    "bedrock",
    "llamafactory",
    "responses",
    "hermes",
    "openhands",
    "alpaca",
    "query-response",
    "completion",
    "hh",
    "pairs",
    "claude-code",
)

# Anthropic's `input`, rig's `arguments`, Gemini's `args` and Bedrock's `input` are JSON objects:
# a bad call's string would not share an Arrow type with them, so these formats get no invalid
# arguments.
# OpenAI, ShareGPT, LLaMA-Factory and Responses rows declare their tools (a `tools` column): the
# declared-tools codes need it. They are planted only when asked for (`TOOLS_RATES`, the bench's
# tools mode). Anthropic and rig rows get a `tools` column only then (`TOOLS_ONLY`), so that
# every other run's rows, and the golden digests made of them, are as they were.
# ShareGPT and LLaMA-Factory have no call ids, so no two calls can share one.
_DECLARED: Final = frozenset({"unknown_tool", "tool_arguments_schema", "invalid_tool_declaration"})
_NO_CALLS: Final = _DECLARED | {
    "invalid_tool_arguments",
    "orphan_tool_result",
    "unanswered_tool_call",
    "trailing_tool_call",
    "duplicate_call_id",
}
UNSUPPORTED: Final[Mapping[str, frozenset[str]]] = {
    "sharegpt": frozenset({"duplicate_call_id"}),
    "anthropic": frozenset({"invalid_tool_arguments"}),
    "rig": frozenset({"invalid_tool_arguments"}),
    "gemini": frozenset({"invalid_tool_arguments"}) | _DECLARED,
    "bedrock": frozenset({"invalid_tool_arguments"}) | _DECLARED,
    "llamafactory": frozenset({"duplicate_call_id"}),  # no ids either
    "hermes": frozenset({"duplicate_call_id"}),  # nor Hermes
    # OpenHands' events have no roles (a message action is the user's or the agent's by its
    # `source`); its tools are in the trajectory's system action, which these rows leave out.
    "openhands": frozenset({"unknown_role"}) | _DECLARED,
    # The Responses API's assistant items between two user-side items are one turn: two
    # assistant turns in a row are one.
    "responses": frozenset({"consecutive_assistant"}),
    # The formats of plain strings make no calls and have no roles; their turns alternate, a
    # user's and the assistant's, so no two assistant turns are adjacent. TRL's prompt /
    # completion is one pair: an empty completion is also a row with no assistant turn (see
    # `ALSO`).
    "alpaca": _NO_CALLS | {"unknown_role", "consecutive_assistant"},
    "query-response": _NO_CALLS | {"unknown_role", "consecutive_assistant"},
    "pairs": _NO_CALLS | {"unknown_role", "consecutive_assistant"},
    "completion": _NO_CALLS | {"unknown_role", "consecutive_assistant", "empty_assistant_turn"},
    # An hh-rlhf transcript's turns are `Human:` or `Assistant:`: any other name is their text.
    "hh": _NO_CALLS | {"unknown_role"},
    # A Claude Code event's role is its type, and an event of another type is passed over;
    # its `input` is an object, as Anthropic's; its rows declare no tools.
    "claude-code": frozenset({"invalid_tool_arguments", "unknown_role"}) | _DECLARED,
}

TOOLS_ONLY: Final[Mapping[str, frozenset[str]]] = {"anthropic": _DECLARED, "rig": _DECLARED}
"""Codes a format's rows carry only with a `tools` column, which they have only when one of these
codes is asked for (`declares_tools`); `default_rates` and `every_rates` leave them out."""

ALSO: Final[Mapping[tuple[str, str], frozenset[str]]] = {
    (fmt, "no_assistant_turn"): frozenset({"empty_assistant_turn"})
    for fmt in ("alpaca", "query-response", "completion", "pairs")
}
"""Codes that come with a planted one, by (format, code): a row of plain strings always ends
on an answer, so one with no assistant turn is one whose last answer is empty."""

TOOLS_RATES: Final[Mapping[str, float]] = {"unknown_tool": 0.05, "tool_arguments_schema": 0.05}
"""Rows with declared tools: 5% call a tool the row does not declare, 5% break its schema."""

EVERY_RATES: Final[Mapping[str, float]] = {
    **{code: 3 * rate for code, rate in DEFAULT_RATES.items()},
    **TOOLS_RATES,
    "duplicate_call_id": 0.03,
    "invalid_tool_declaration": 0.03,
}
"""Every code the generator can plant, each in a few percent of the rows: the differential tests'
rates (`every_rates(format)` leaves out what a format's rows cannot carry)."""


def default_rates(format: str) -> dict[str, float]:
    """`DEFAULT_RATES` without the codes `format`'s rows cannot carry (or carry only with a
    `tools` column they do not always have)."""
    left_out = UNSUPPORTED.get(format, frozenset()) | TOOLS_ONLY.get(format, frozenset())
    return {c: r for c, r in DEFAULT_RATES.items() if c not in left_out}


def every_rates(format: str, *, tools: bool = False) -> dict[str, float]:
    """`EVERY_RATES` without the codes `format`'s rows cannot carry; with `tools`, those they
    carry only with a `tools` column too (`TOOLS_ONLY`)."""
    left_out = UNSUPPORTED.get(format, frozenset())
    if not tools:
        left_out |= TOOLS_ONLY.get(format, frozenset())
    return {c: r for c, r in EVERY_RATES.items() if c not in left_out}


def declares_tools(format: str, rates: Mapping[str, float] | None) -> bool:
    """Whether `format`'s rows generated at `rates` have a `tools` column (`arrow_schema`'s
    `tools`): always for the formats with one, else when a code of `TOOLS_ONLY` is asked for."""
    if format not in TOOLS_ONLY:
        return True
    return any(rates.get(code, 0) > 0 for code in TOOLS_ONLY[format]) if rates else False


# ---------------------------------------------------------------------------------------------
# what the conversations say

SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a concise assistant. Answer in at most three sentences.",
    "You are a travel assistant with access to live weather and currency tools.",
    "You are a customer support agent for an online shop. Be polite and precise.",
)
CHAT = (
    ("Hi! Who are you?", "I'm an AI assistant. How can I help you today?"),
    (
        "Can you explain what a hash map is?",
        "A hash map stores key-value pairs and finds a value by hashing its key, so a lookup "
        "takes constant time on average.",
    ),
    ("Give me a synonym for 'happy'.", "Cheerful, content or joyful, depending on the tone."),
    ("What's the capital of Australia?", "The capital of Australia is Canberra."),
    (
        "Summarise the plot of Hamlet in one sentence.",
        "Prince Hamlet feigns madness to avenge his father's murder by his uncle, and nearly "
        "everyone dies.",
    ),
    (
        "How do I reverse a list in Python?",
        "Use `items.reverse()` to reverse it in place, or `items[::-1]` for a reversed copy.",
    ),
    ("Thanks, that's all!", "You're welcome. Have a great day!"),
)
THOUGHTS = (
    "The user wants live data, so I should call the tool rather than guess.",
    "I can answer this directly.",
    "Two independent lookups: I can run them in parallel.",
    "Let me make sure I use the right units.",
)
PREFACES = ("Let me check that for you.", "I'll look that up.", "One moment.")
FOLLOW_UPS = ("Hello? Are you there?", "Sorry, let me rephrase.", "Never mind that, actually.")
CITIES = ("Paris", "Tokyo", "Lagos", "Lima", "Oslo", "Hanoi", "Denver", "Cairo")
WORDS = ("solar panels", "rust borrow checker", "sourdough", "marathon training", "jazz")

# name, description, parameters (name -> JSON type), result keys, question, answer (the last
# two formatted with the call's facts)
TOOLS: Final = (
    (
        "get_weather",
        "Current weather in a city",
        {"city": "string", "unit": "string"},
        ("city", "temperature", "conditions"),
        "What's the weather in {city}?",
        "It is {temperature} degrees and {conditions} in {city}.",
    ),
    (
        "search_web",
        "Search the web",
        {"query": "string", "max_results": "integer"},
        ("query", "title"),
        "Find me something about {query}.",
        'The top result about {query} is "{title}".',
    ),
    (
        "convert_currency",
        "Convert money",
        {"amount": "integer", "from_currency": "string", "to_currency": "string"},
        ("amount", "converted", "to_currency"),
        "How much is {amount} {from_currency} in {to_currency}?",
        "{amount} {from_currency} is {converted} {to_currency}.",
    ),
    (
        "lookup_order",
        "Status of an order",
        {"order_id": "string"},
        ("order_id", "status"),
        "Where is my order {order_id}?",
        "Order {order_id} is {status}.",
    ),
)
_SPECS = {
    name: {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {p: {"type": t} for p, t in params.items()},
            "required": list(params),
        },
    }
    for name, description, params, *_ in TOOLS
}
# The `tools` column as JSON text: LLaMA-Factory's list of functions, or OpenAI's tool objects.
_TOOL_JSON = {name: json.dumps(spec) for name, spec in _SPECS.items()}
_OPENAI_TOOL_JSON = {n: json.dumps({"type": "function", "function": s}) for n, s in _SPECS.items()}
_RESPONSES_TOOL_JSON = {n: json.dumps({"type": "function", **s}) for n, s in _SPECS.items()}
# Anthropic's tools name their schema `input_schema`; rig's `ToolDefinition` is the plain spec.
_ANTHROPIC_TOOL_JSON = {
    n: json.dumps({"name": n, "description": s["description"], "input_schema": s["parameters"]})
    for n, s in _SPECS.items()
}

_Call = tuple[str, str, Any, str]  # id, name, arguments (None when bad), raw JSON arguments
_Result = tuple[str | None, str, str]  # call id (None: answers nothing), tool name, text
_Item = tuple[Any, ...]  # ("system", text) ("user", text) ("results", [_Result])
#                          ("assistant", text | None, reasoning | None, (_Call, ...))


def _pick(rng: random.Random, seq: tuple[Any, ...]) -> Any:
    return seq[int(rng.random() * len(seq))]  # rng.choice, at a third of the cost


def _int(rng: random.Random, low: int, high: int) -> int:
    return low + int(rng.random() * (high - low + 1))


def _facts(rng: random.Random, tool: str) -> dict[str, Any]:
    """What a call to `tool` asks and what it finds."""
    if tool == "get_weather":
        conditions = _pick(rng, ("sunny", "cloudy", "raining", "windy"))
        city, temperature = _pick(rng, CITIES), _int(rng, -5, 35)
        return {
            "city": city,
            "unit": "celsius",
            "temperature": temperature,
            "conditions": conditions,
        }
    if tool == "search_web":
        query = _pick(rng, WORDS)
        return {"query": query, "max_results": _int(rng, 1, 5), "title": f"A guide to {query}"}
    if tool == "convert_currency":
        amount = _int(rng, 5, 900)
        converted = round(amount * 1.08, 2)
        return {
            "amount": amount,
            "from_currency": "EUR",
            "to_currency": "USD",
            "converted": converted,
        }
    status = _pick(rng, ("shipped", "delayed", "delivered"))
    return {"order_id": f"A{_int(rng, 10000, 99999)}", "status": status}


def _call(rng: random.Random, tool: tuple[Any, ...]) -> tuple[_Call, str, str, str]:
    """A call to `tool`, and its question, result text and answer."""
    name, _, params, result_keys, question, answer = tool
    facts = _facts(rng, name)
    arguments = {p: facts[p] for p in params}
    result = json.dumps({k: facts[k] for k in result_keys})
    call = (f"call_{rng.getrandbits(64):016x}", name, arguments, json.dumps(arguments))
    return call, question.format(**facts), result, answer.format(**facts)


def _tool_exchange(rng: random.Random, reasoning: bool) -> list[_Item]:
    draw = rng.random()
    width = 1 if draw < 0.7 else 2 if draw < 0.92 else 3
    picked = [_call(rng, _pick(rng, TOOLS)) for _ in range(width)]
    calls = tuple(c for c, _, _, _ in picked)
    question = " Also, ".join(q for _, q, _, _ in picked)
    thought = _pick(rng, THOUGHTS) if reasoning and rng.random() < 0.4 else None
    preface = _pick(rng, PREFACES) if rng.random() < 0.3 else None
    return [
        ("user", question),
        ("assistant", preface, thought, calls),
        ("results", [(c[0], c[1], text) for c, (_, _, text, _) in zip(calls, picked, strict=True)]),
        ("assistant", " ".join(a for _, _, _, a in picked), None, ()),
    ]


def _conversation(
    rng: random.Random,
    with_calls: bool,
    reasoning: bool,
    system: bool,
    *,
    calls: bool = True,
    single: bool = False,
) -> list[_Item]:
    """A conversation's items; with `calls` False it makes no call, with `single` it is one
    question and its answer."""
    items: list[_Item] = []
    if system and rng.random() < 0.35:
        items.append(("system", _pick(rng, SYSTEM_PROMPTS)))
    turns = 1 if single else _pick(rng, (1, 1, 2, 2, 3, 4))
    if not calls:
        tool_turn = -1
    else:
        tool_turn = int(rng.random() * turns) if with_calls or rng.random() < 0.5 else -1
    for turn in range(turns):
        if turn == tool_turn:
            items.extend(_tool_exchange(rng, reasoning))
        else:
            question, answer = _pick(rng, CHAT)
            thought = _pick(rng, THOUGHTS) if reasoning and rng.random() < 0.15 else None
            items += [("user", question), ("assistant", answer, thought, ())]
    return items


def _plant(rng: random.Random, items: list[_Item], code: str) -> list[_Item]:
    """`items` with the defect `code` planted (decode-level codes are planted in the row)."""
    find = [i for i, item in enumerate(items) if item[0] == "results"]
    if code == "empty_assistant_turn":
        at = next(i for i, item in enumerate(items) if item[0] == "user") + 1
        items[at:at] = [
            ("assistant", rng.choice(("", " ", "\n")), None, ()),
            ("user", rng.choice(FOLLOW_UPS)),
        ]
    elif code == "consecutive_assistant":
        at = next(i for i, item in enumerate(items) if item[0] == "assistant" and not item[3]) + 1
        items.insert(
            at, ("assistant", "To add to that: let me know if you need anything else.", None, ())
        )
    elif code == "unanswered_tool_call":
        at = rng.choice(find)
        if len(items[at][1]) > 1 and rng.random() < 0.5:
            items[at] = ("results", items[at][1][:-1])  # the last of parallel calls unanswered
        else:
            items[at] = ("user", rng.choice(FOLLOW_UPS))
    elif code == "orphan_tool_result":
        at = rng.choice(find)
        items[at] = (
            "results",
            [*items[at][1], (None, items[at][1][0][1], '{"error": "duplicate"}')],
        )
    elif code == "invalid_tool_arguments":
        at = rng.choice(find) - 1
        kind, text, thought, calls = items[at]
        k = rng.randrange(len(calls))
        bad = rng.choice(('{"city": "Paris"', "city=Paris", '["Paris"]', '"Paris"'))
        calls = (*calls[:k], (calls[k][0], calls[k][1], None, bad), *calls[k + 1 :])
        items[at] = (kind, text, thought, calls)
    elif code in ("unknown_tool", "tool_arguments_schema"):
        at = rng.choice(find) - 1
        kind, text, thought, calls = items[at]
        k = rng.randrange(len(calls))
        call_id, name, arguments, _ = calls[k]
        if code == "unknown_tool":  # a tool the model was never offered
            name, arguments = name + "_v2", arguments
            results = [(r[0], name if r[0] == call_id else r[1], r[2]) for r in items[at + 1][1]]
            items[at + 1] = ("results", results)
        else:  # its first required property left out
            arguments = dict(list(arguments.items())[1:])
        new = (call_id, name, arguments, json.dumps(arguments))
        items[at] = (kind, text, thought, (*calls[:k], new, *calls[k + 1 :]))
    elif code == "duplicate_call_id":
        # the turn's second call reuses the first's id; the one result answers the id once
        at = rng.choice(find) - 1
        kind, text, thought, calls = items[at]
        first = calls[0]
        again = calls[1] if len(calls) > 1 else first
        calls = (first, (first[0], again[1], again[2], again[3]), *calls[2:])
        results = [items[at + 1][1][0], *items[at + 1][1][2:]]
        items[at], items[at + 1] = (kind, text, thought, calls), ("results", results)
    elif code == "trailing_tool_call":
        exchange = _tool_exchange(rng, reasoning=False)
        items += exchange[:2]
    elif code == "no_assistant_turn":
        items = [item for item in items[:2] if item[0] in ("system", "user")]
        if not items or items[-1][0] != "user":
            items.append(("user", rng.choice(CHAT)[0]))
    return items


# ---------------------------------------------------------------------------------------------
# the formats' rows


def _openai(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    with_ids = rng.random() < 0.8  # else TRL's id-less shape: results answer by position
    with_ids |= planted == "duplicate_call_id"  # an id-less row mints an id per call
    messages: list[Row] = []
    for item in items:
        kind = item[0]
        if kind in ("system", "user"):
            messages.append({"role": kind, "content": item[1]})
        elif kind == "assistant":
            message: Row = {"role": "assistant", "content": item[1]}
            if item[2] is not None:
                message["reasoning_content"] = item[2]
            if item[3]:
                message["tool_calls"] = [
                    {**({"id": c[0]} if with_ids else {}), "type": "function",
                     "function": {"name": c[1], "arguments": c[3]}}
                    for c in item[3]
                ]  # fmt: skip
            messages.append(message)
        else:
            for call_id, name, text in item[1]:
                if with_ids:
                    messages.append(
                        {"role": "tool", "tool_call_id": call_id or _bogus(rng), "content": text}
                    )
                else:
                    messages.append({"role": "tool", "name": name, "content": text})
    tools = _tools_json(items, _OPENAI_TOOL_JSON, planted)
    return {"id": i, "messages": messages, "tools": tools}


def _sharegpt(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    turns: list[Row] = []
    row: Row = {"id": i, "system": None}  # every row has every column
    calls = 0  # of the last assistant turn
    for item in items:
        kind = item[0]
        if kind == "system":
            row["system"] = item[1]
        elif kind == "user":
            turns.append({"from": "human", "value": item[1]})
        elif kind == "assistant":
            if item[1] is not None or not item[3]:
                turns.append({"from": "gpt", "value": item[1]})
            if item[3]:
                objects = [
                    {"name": c[1], "arguments": c[2] if c[2] is not None else c[3]} for c in item[3]
                ]
                turns.append(
                    {
                        "from": "function_call",
                        "value": json.dumps(objects[0] if len(objects) == 1 else objects),
                    }
                )
                calls = len(objects)
        else:
            results = item[1]
            if len(results) == calls > 1 and all(r[0] for r in results) and rng.random() < 0.5:
                texts = [json.loads(text) for _, _, text in results]
                turns.append({"from": "observation", "value": json.dumps(texts)})  # one per call
            else:
                turns.extend({"from": "observation", "value": text} for _, _, text in results)
    row["conversations"] = turns
    row["tools"] = _tools_json(items, _TOOL_JSON, planted)
    return row


def _anthropic(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    row: Row = {"id": i, "system": None}  # every row has every column
    messages: list[Row] = []
    for item in items:
        kind = item[0]
        if kind == "system":
            row["system"] = item[1]
        elif kind == "user":
            messages.append({"role": "user", "content": [{"type": "text", "text": item[1]}]})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": _anthropic_blocks(rng, item)})
        else:
            messages.append(
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": _toolu(c or _bogus(rng)), "content": t}
                    for c, _, t in item[1]
                ]}
            )  # fmt: skip
    row["messages"] = messages
    return row


def _claude_code(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    """A Claude Code session's thread as `sources/sessions.py` groups it (column `events`):
    Anthropic messages, each in an event chained to the one before by `parentUuid`; half the
    answers of several blocks streamed as Claude Code writes them, an event per block with one
    `message.id`; now and then a `system` event after an answer, which holds no message."""
    session = f"session-{i}"
    events: list[Row] = []

    def event(type_: str, message: Row | None, **extra: Any) -> None:
        parent = events[-1]["uuid"] if events else None
        events.append(
            {"type": type_, "uuid": f"{i}-{len(events)}", "parentUuid": parent,
             "sessionId": session, "isSidechain": False, "message": message, **extra}
        )  # fmt: skip

    for k, item in enumerate(items):
        kind = item[0]
        if kind == "user":
            event("user", {"role": "user", "content": [{"type": "text", "text": item[1]}]})
        elif kind == "assistant":
            blocks = _anthropic_blocks(rng, item)
            message_id = f"msg_{i}_{k}"
            if len(blocks) > 1 and rng.random() < 0.5:
                for block in blocks:
                    event("assistant", {"id": message_id, "role": "assistant", "content": [block]})
            else:
                event("assistant", {"id": message_id, "role": "assistant", "content": blocks})
            if not item[3] and rng.random() < 0.15:
                event("system", None, subtype="turn_duration")
        else:
            event("user", {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": _toolu(c or _bogus(rng)), "content": t}
                for c, _, t in item[1]
            ]})  # fmt: skip
    return {"id": i, "sessionId": session, "events": events}


def _anthropic_blocks(rng: random.Random, item: _Item) -> list[Row]:
    """An assistant item's content blocks, as `_anthropic` writes them."""
    blocks: list[Row] = []
    if item[2] is not None:
        if rng.random() < 0.05:
            blocks.append({"type": "redacted_thinking", "data": f"{rng.getrandbits(256):064x}"})
        else:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": item[2],
                    "signature": f"{rng.getrandbits(192):048x}",
                }
            )
    if item[1] is not None:
        blocks.append({"type": "text", "text": item[1]})
    blocks.extend(
        {"type": "tool_use", "id": _toolu(c[0]), "name": c[1], "input": c[2]} for c in item[3]
    )
    return blocks


def _rig(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    messages: list[Row] = []
    for item in items:
        kind = item[0]
        if kind == "user":
            messages.append({"role": "user", "content": [{"type": "text", "text": item[1]}]})
        elif kind == "assistant":
            parts: list[Row] = []
            if item[2] is not None:
                parts.append(
                    {
                        "type": "reasoning",
                        "id": None,
                        "signature": None,
                        "content": [{"type": "text", "text": item[2]}],
                    }
                )
            if item[1] is not None:
                parts.append({"type": "text", "text": item[1]})
            parts.extend(
                {"type": "toolcall", "id": c[0], "function": {"name": c[1], "arguments": c[2]},
                 "signature": None, "additional_params": None}
                for c in item[3]
            )  # fmt: skip
            messages.append({"role": "assistant", "id": None, "content": parts})
        elif kind == "results":
            messages.append(
                {"role": "user", "content": [
                    {"type": "toolresult", "call": call_id or _bogus(rng),
                     "name": name, "content": [{"type": "text", "text": text}]}
                    for call_id, name, text in item[1]
                ]}
            )  # fmt: skip
    return {"id": i, "messages": messages}


def _gemini(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    # Calls without ids, answered by position, as most files have them; some with ids (newer
    # API responses carry them), and a row with a repeated id needs them.
    with_ids = rng.random() < 0.3 or planted == "duplicate_call_id"
    row: Row = {"id": i, "systemInstruction": None}  # every row has every column
    contents: list[Row] = []
    for item in items:
        kind = item[0]
        if kind == "system":
            row["systemInstruction"] = {"role": "system", "parts": [{"text": item[1]}]}
        elif kind == "user":
            contents.append({"role": "user", "parts": [{"text": item[1]}]})
        elif kind == "assistant":
            parts: list[Row] = []
            if item[2] is not None:
                thought: Row = {"text": item[2], "thought": True}
                if rng.random() < 0.5:
                    thought["thoughtSignature"] = f"{rng.getrandbits(192):048x}"
                parts.append(thought)
            if item[1] is not None:
                parts.append({"text": item[1]})
            parts.extend(
                {"functionCall": {**({"id": c[0]} if with_ids else {}), "name": c[1],
                                  "args": c[2]}}
                for c in item[3]
            )  # fmt: skip
            contents.append({"role": "model", "parts": parts})
        elif kind == "results":
            responses: list[Row] = []
            for call_id, name, text in item[1]:
                response: Row = {"name": name, "response": {"result": text}}
                if with_ids:
                    response["id"] = call_id or _bogus(rng)
                responses.append({"functionResponse": response})
            contents.append({"role": "user", "parts": responses})
    row["contents"] = contents
    return row


def _bedrock(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    row: Row = {"id": i, "system": None}  # every row has every column
    messages: list[Row] = []
    for item in items:
        kind = item[0]
        if kind == "system":
            row["system"] = [{"text": item[1]}]
        elif kind == "user":
            messages.append({"role": "user", "content": [{"text": item[1]}]})
        elif kind == "assistant":
            blocks: list[Row] = []
            if item[2] is not None:
                text = {"text": item[2], "signature": f"{rng.getrandbits(192):048x}"}
                blocks.append({"reasoningContent": {"reasoningText": text}})
            if item[1] is not None:
                blocks.append({"text": item[1]})
            blocks.extend(
                {"toolUse": {"toolUseId": _tooluse(c[0]), "name": c[1], "input": c[2]}}
                for c in item[3]
            )
            messages.append({"role": "assistant", "content": blocks})
        elif kind == "results":
            messages.append(
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": _tooluse(c or _bogus(rng)),
                                    "content": [{"text": t}], "status": "success"}}
                    for c, _, t in item[1]
                ]}
            )  # fmt: skip
    row["messages"] = messages
    return row


def _responses(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    out: list[Row] = []
    row: Row = {"id": i, "instructions": None}  # every row has every column
    for item in items:
        kind = item[0]
        if kind == "system":
            row["instructions"] = item[1]
        elif kind == "user":
            out.append(_responses_message("user", "input_text", item[1]))
        elif kind == "assistant":
            if item[2] is not None:
                summary = [{"type": "summary_text", "text": item[2]}]
                out.append({"type": "reasoning", "id": f"rs_{rng.getrandbits(64):016x}",
                            "summary": summary})  # fmt: skip
            if item[1] is not None or (not item[2] and not item[3]):
                out.append(_responses_message("assistant", "output_text", item[1]))
            out.extend(
                {"type": "function_call", "call_id": c[0], "name": c[1], "arguments": c[3]}
                for c in item[3]
            )
        else:
            out.extend(
                {"type": "function_call_output", "call_id": c or _bogus(rng), "output": t}
                for c, _, t in item[1]
            )
    row["input"] = out
    row["tools"] = _tools_json(items, _RESPONSES_TOOL_JSON, planted)
    return row


def _responses_message(role: str, kind: str, text: str | None) -> Row:
    content = [] if text is None else [{"type": kind, "text": text}]
    return {"type": "message", "role": role, "content": content}


def _tooluse(call_id: str) -> str:
    return "tooluse_" + call_id.removeprefix("call_")


def _bogus(rng: random.Random) -> str:
    """The id of a call nobody made."""
    return f"call_{rng.getrandbits(64):016x}"


def _toolu(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def _llamafactory(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    # LLaMA-Factory v1: `{type, value}` items, calls as JSON text, results by position (parallel
    # ones now and then packed into one tool message, as its reason_tool_use_demo has them),
    # each message with the `loss_weight` its converters give it.
    messages: list[Row] = []
    calls = 0  # of the last assistant turn

    def text(role: str, value: str) -> Row:
        content = [{"type": "text", "value": value}]
        return {"role": role, "content": content, "loss_weight": 0.0}

    for item in items:
        kind = item[0]
        if kind in ("system", "user"):
            messages.append(text(kind, item[1]))
        elif kind == "assistant":
            content: list[Row] = []
            if item[2] is not None:
                content.append({"type": "reasoning", "value": item[2]})
            if item[1] is not None:
                content.append({"type": "text", "value": item[1]})
            for c in item[3]:
                call = {"name": c[1], "arguments": c[2] if c[2] is not None else c[3]}
                content.append({"type": "tool_call", "value": json.dumps(call)})
            messages.append({"role": "assistant", "content": content, "loss_weight": 1.0})
            calls = len(item[3])
        else:
            results = item[1]
            if len(results) == calls > 1 and all(r[0] for r in results) and rng.random() < 0.3:
                packed = [{"name": name, "content": t} for _, name, t in results]
                messages.append(text("tool", json.dumps(packed)))
            else:
                messages.extend(text("tool", t) for _, _, t in results)
    tools = _tools_json(items, _OPENAI_TOOL_JSON, planted)
    return {"id": i, "messages": messages, "tools": tools}


def _hermes(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    # NousResearch's hermes-function-calling-v1: reasoning in `<think>`, each call a JSON
    # object in `<tool_call>` tags after the text, each result a `<tool_response>` of
    # `{name, content}` in a tool turn (parallel ones now and then in one turn). The tools are
    # in a `tools` column, where the fast path reads them, not in the system prompt.
    turns: list[Row] = []
    for item in items:
        kind = item[0]
        if kind == "system":
            turns.append({"from": "system", "value": item[1]})
        elif kind == "user":
            turns.append({"from": "human", "value": item[1]})
        elif kind == "assistant":
            pieces = [] if item[2] is None else [f"<think>\n{item[2]}\n</think>"]
            if item[1] is not None:
                pieces.append(item[1])
            for c in item[3]:
                call = {"name": c[1], "arguments": c[2] if c[2] is not None else c[3]}
                pieces.append(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
            turns.append({"from": "gpt", "value": "\n".join(pieces)})
        else:
            responses = [
                f"<tool_response>\n{json.dumps({'name': name, 'content': json.loads(text)})}"
                "\n</tool_response>"
                for _, name, text in item[1]
            ]
            if len(responses) > 1 and rng.random() < 0.3:
                turns.append({"from": "tool", "value": "\n".join(responses)})
            else:
                turns.extend({"from": "tool", "value": r} for r in responses)
    tools = _tools_json(items, _OPENAI_TOOL_JSON, planted)
    return {"id": i, "conversations": turns, "tools": tools}


def _openhands(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    # An OpenHands trajectory as a resolver's `history` holds it: message actions, each call an
    # action whose `tool_call_metadata` holds the model response (the same response in each
    # action of parallel calls, its reasoning in `reasoning_content`), each result an
    # observation naming its call by metadata and `cause` (now and then by `cause` only), and
    # the agent's bookkeeping (state changes) passed over by the decoder.
    events: list[Row] = []
    actions: dict[str, int] = {}  # each call's action event id, by the call's id
    by_cause = rng.random() < 0.1

    def add(event: Row) -> None:
        events.append({"id": len(events), **event})

    for item in items:
        kind = item[0]
        if kind == "system":
            add({"source": "agent", "message": item[1], "action": "system",
                 "args": {"content": item[1]}})  # fmt: skip
        elif kind == "user":
            args = {"content": item[1], "image_urls": None, "wait_for_response": False}
            add({"source": "user", "message": item[1], "action": "message", "args": args})
            if len(events) < 3 and rng.random() < 0.5:
                add({"source": "environment", "observation": "agent_state_changed",
                     "content": ""})  # fmt: skip
        elif kind == "assistant" and not item[3]:
            args = {"content": item[1], "image_urls": None, "wait_for_response": True}
            add({"source": "agent", "message": item[1], "action": "message", "args": args})
        elif kind == "assistant":
            message: Row = {
                "content": item[1],
                "role": "assistant",
                "tool_calls": [
                    {"id": c[0], "type": "function",
                     "function": {"name": c[1], "arguments": c[3]}}
                    for c in item[3]
                ],
                "reasoning_content": item[2],
            }  # fmt: skip
            response = {
                "id": f"chatcmpl-{rng.getrandbits(64):016x}",
                "choices": [{"finish_reason": "tool_calls", "index": 0, "message": message}],
            }
            for c in item[3]:
                actions.setdefault(c[0], len(events))
                metadata = {
                    "function_name": c[1],
                    "tool_call_id": c[0],
                    "model_response": response,
                    "total_calls_in_response": len(item[3]),
                }
                add({"source": "agent", "action": "call_tool_mcp",
                     "args": {"name": c[1], "thought": item[1] or ""},
                     "tool_call_metadata": metadata})  # fmt: skip
        else:
            for call_id, name, text in item[1]:
                event: Row = {"source": "agent", "observation": "mcp", "content": text}
                if call_id is not None:
                    event["cause"] = actions.get(call_id)
                if call_id is None or not by_cause:
                    metadata = {"function_name": name, "tool_call_id": call_id or _bogus(rng)}
                    event["tool_call_metadata"] = metadata
                add(event)
    if rng.random() < 0.5:
        add({"source": "agent", "action": "change_agent_state",
             "args": {"agent_state": "awaiting_user_input", "thought": ""}})  # fmt: skip
    return {"id": i, "history": events}


def _tools_json(items: list[_Item], specs: Mapping[str, str], planted: str | None) -> str:
    """The tools the row calls (or one, when it calls none), as a JSON list; with
    `invalid_tool_declaration` planted, one more tool whose parameters are no JSON Schema."""
    used = [
        name
        for name in dict.fromkeys(c[1] for item in items if item[0] == "assistant" for c in item[3])
        if name in specs  # not a tool planted as unknown
    ]
    declared = [specs[name] for name in used or ("get_weather",)]
    if planted == "invalid_tool_declaration":
        declared.append(
            _BROKEN_TOOL_JSON
            if specs is _TOOL_JSON
            else _BROKEN_RESPONSES_TOOL_JSON
            if specs is _RESPONSES_TOOL_JSON
            else _BROKEN_ANTHROPIC_TOOL_JSON
            if specs is _ANTHROPIC_TOOL_JSON
            else _BROKEN_OPENAI_TOOL_JSON
        )
    return "[" + ", ".join(declared) + "]"


# a tool nobody calls, whose parameter's type is no JSON Schema type
_BROKEN_TOOL = {
    "name": "archive_order",
    "description": "Archive an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "strng"}}},
}
_BROKEN_TOOL_JSON = json.dumps(_BROKEN_TOOL)
_BROKEN_OPENAI_TOOL_JSON = json.dumps({"type": "function", "function": _BROKEN_TOOL})
_BROKEN_RESPONSES_TOOL_JSON = json.dumps({"type": "function", **_BROKEN_TOOL})
_BROKEN_ANTHROPIC_TOOL_JSON = json.dumps(
    {
        "name": _BROKEN_TOOL["name"],
        "description": _BROKEN_TOOL["description"],
        "input_schema": _BROKEN_TOOL["parameters"],
    }
)

# ---------------------------------------------------------------------------------------------
# the formats of plain strings (formats/text/): a system prompt where the format has one, the
# earlier pairs as `history`, the last question and its answer in fields of their own

PLAIN: Final[Mapping[str, bool]] = {
    "alpaca": False,
    "query-response": False,
    "completion": True,
    "hh": False,
    "pairs": False,
}
"""The formats of plain strings (their rows make no call), each with whether it holds one pair."""

INSTRUCTIONS = (
    "Answer the question below.",
    "Reply to the customer's message.",
    "Respond helpfully and briefly.",
)


def _string_pairs(
    rng: random.Random, items: list[_Item]
) -> tuple[str | None, list[list[str]], str, str]:
    """The system prompt, the earlier [question, answer] pairs, the last question and its
    answer (empty where the conversation ends on a question)."""
    system, pairs, question = None, [], None
    for item in items:
        if item[0] == "system":
            system = item[1]
        elif item[0] == "user":
            question = item[1]
        elif item[0] == "assistant":
            assert question is not None, items
            pairs.append([question, item[1]])
            question = None
    if question is not None:
        pairs.append([question, rng.choice(("", " "))])
    *history, (last, answer) = pairs
    return system, history, last, answer


def _alpaca(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    system, history, question, answer = _string_pairs(rng, items)
    instruction, given = question, ""  # LLaMA-Factory's files hold `input` even when empty
    if rng.random() < 0.3:  # the task in `instruction`, the question in `input`
        instruction, given = _pick(rng, INSTRUCTIONS), question
    return {"id": i, "instruction": instruction, "input": given, "output": answer,
            "system": system, "history": history}  # fmt: skip


def _query_response(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    system, history, question, answer = _string_pairs(rng, items)
    return {"id": i, "system": system, "query": question, "response": answer, "history": history}


def _completion(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    _, _, question, answer = _string_pairs(rng, items)
    return {"id": i, "prompt": question, "completion": answer}


def _swift_pairs(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    system, history, question, answer = _string_pairs(rng, items)
    pairs = [{"human": q, "assistant": a} for q, a in [*history, [question, answer]]]
    return {"id": i, "system": system, "conversation": pairs}


def _hh(rng: random.Random, items: list[_Item], i: int, planted: str | None) -> Row:
    # hh-rlhf's texts open with a blank line; some sets made from it start with the marker
    lead = "\n\n" if rng.random() < 0.9 else ""
    return {"id": i, "text": render_hh([(item[0], item[1]) for item in items], lead=lead)}


_STRING_FIELDS: Final = {
    "alpaca": ("instruction", "output"),
    "query-response": ("query", "response"),
    "completion": ("prompt", "completion"),
}


def _break_plain(rng: random.Random, row: Row, format: str) -> None:
    """A row of plain strings the decoder rejects: a required field null, or a history item
    that is no pair; an hh text null, with no marker, or with words before its first."""
    if format == "pairs":
        pair = rng.choice(row["conversation"])
        pair[rng.choice(("human", "assistant"))] = None
        return
    if format == "hh":
        text = row["text"]
        row["text"] = rng.choice((None, "Transcript:" + text, text.replace(":", " said", 1)))
        return
    names = [*_STRING_FIELDS[format], *(["history"] if row.get("history") else [])]
    name = rng.choice(names)
    if name == "history":
        k = rng.randrange(len(row["history"]))
        row["history"][k] = row["history"][k][:1]
    else:
        row[name] = None


_Render = Callable[[random.Random, list[_Item], int, str | None], Row]
_RENDER: Final[Mapping[str, tuple[_Render, str, bool, bool]]] = {
    # renderer, conversation column, has reasoning, has a system prompt
    "openai": (_openai, "messages", True, True),
    "sharegpt": (_sharegpt, "conversations", False, True),
    "anthropic": (_anthropic, "messages", True, True),
    "rig": (_rig, "messages", True, False),  # rig keeps the preamble out of the history
    "gemini": (_gemini, "contents", True, True),  # in `systemInstruction`
    "bedrock": (_bedrock, "messages", True, True),  # in `system`, as text blocks
    "llamafactory": (_llamafactory, "messages", True, True),
    "responses": (_responses, "input", True, True),  # the system prompt in `instructions`
    "hermes": (_hermes, "conversations", True, True),
    "openhands": (_openhands, "history", True, True),  # reasoning in the model's responses
    "alpaca": (_alpaca, "instruction", False, True),
    "query-response": (_query_response, "query", False, True),
    "completion": (_completion, "prompt", False, False),
    "hh": (_hh, "text", False, False),
    "pairs": (_swift_pairs, "conversation", False, True),
    "claude-code": (_claude_code, "events", True, False),  # a session holds no system prompt
}


def _break(rng: random.Random, row: Row, format: str, code: str) -> None:
    """Plants a defect the decoder rejects: an unknown role, or a field that cannot be read."""
    if format in PLAIN:
        _break_plain(rng, row, format)
        return
    messages = row[_RENDER[format][1]]
    if format == "claude-code":  # an event's message: its content unreadable
        rng.choice([e for e in messages if e["message"] is not None])["message"]["content"] = None
        return
    if format == "responses":  # a message item: calls and outputs have no role
        messages = [m for m in messages if m.get("role") is not None] or messages
    message = rng.choice(messages)
    if format == "openhands":  # an event that is neither an action nor an observation
        message["action"] = message["observation"] = None
        return
    if code == "unknown_role":
        if format == "sharegpt":
            message["from"] = rng.choice(("bing", "chatgpt", "bot"))
        elif format == "hermes":
            message["from"] = rng.choice(("observation", "function_call", "bot"))
        else:
            message["role"] = {
                "openai": "narrator",
                "anthropic": "system",
                "rig": "tool",
                "gemini": "assistant",
                "bedrock": "system",
                "llamafactory": "observation",
                "responses": "tool",
            }[format]
    elif format in ("openai", "responses"):
        message["role"] = None
    elif format == "gemini":
        message["parts"] = None
    else:
        message["value" if format in ("sharegpt", "hermes") else "content"] = None


def arrow_schema(format: str, *, tools: bool = False) -> pa.Schema:
    """The Arrow schema every generated row of `format` fits (keys a row lacks are null); with
    `tools`, Anthropic's and rig's have their `tools` column too (`declares_tools`)."""
    import pyarrow as pa

    schema = _arrow_schema(format)
    if tools and format in TOOLS_ONLY:
        schema = schema.append(pa.field("tools", pa.string()))
    return schema


def _arrow_schema(format: str) -> pa.Schema:
    import pyarrow as pa

    s = pa.string()
    params = {p: t for tool in TOOLS for p, t in tool[2].items()}
    arguments = pa.struct([(p, pa.int64() if t == "integer" else s) for p, t in params.items()])
    if format == "openai":
        function = pa.struct([("name", s), ("arguments", s)])
        call = pa.struct([("id", s), ("type", s), ("function", function)])
        message = pa.struct(
            [("role", s), ("content", s), ("reasoning_content", s), ("tool_calls", pa.list_(call)),
             ("tool_call_id", s), ("name", s)]
        )  # fmt: skip
        return pa.schema([("id", pa.int64()), ("messages", pa.list_(message)), ("tools", s)])
    if format == "sharegpt":
        turn = pa.struct([("from", s), ("value", s)])
        return pa.schema(
            [("id", pa.int64()), ("system", s), ("conversations", pa.list_(turn)), ("tools", s)]
        )
    if format == "hermes":
        turn = pa.struct([("from", s), ("value", s)])
        return pa.schema([("id", pa.int64()), ("conversations", pa.list_(turn)), ("tools", s)])
    if format == "anthropic":
        block = pa.struct(
            [("type", s), ("text", s), ("thinking", s), ("signature", s), ("data", s), ("id", s),
             ("name", s), ("input", arguments), ("tool_use_id", s), ("content", s)]
        )  # fmt: skip
        message = pa.struct([("role", s), ("content", pa.list_(block))])
        return pa.schema([("id", pa.int64()), ("system", s), ("messages", pa.list_(message))])
    if format == "rig":
        piece = pa.struct([("type", s), ("text", s)])
        function = pa.struct([("name", s), ("arguments", arguments)])
        part = pa.struct(
            [("type", s), ("text", s), ("id", s), ("signature", s), ("content", pa.list_(piece)),
             ("function", function), ("additional_params", pa.null()), ("call", s), ("name", s)]
        )  # fmt: skip
        message = pa.struct([("role", s), ("id", s), ("content", pa.list_(part))])
        return pa.schema([("id", pa.int64()), ("messages", pa.list_(message))])
    if format == "gemini":
        call = pa.struct([("id", s), ("name", s), ("args", arguments)])
        response = pa.struct([("name", s), ("response", pa.struct([("result", s)])), ("id", s)])
        part = pa.struct(
            [("text", s), ("thought", pa.bool_()), ("thoughtSignature", s),
             ("functionCall", call), ("functionResponse", response)]
        )  # fmt: skip
        item = pa.struct([("role", s), ("parts", pa.list_(part))])
        instruction = pa.struct([("role", s), ("parts", pa.list_(pa.struct([("text", s)])))])
        return pa.schema(
            [("id", pa.int64()), ("systemInstruction", instruction), ("contents", pa.list_(item))]
        )
    if format == "bedrock":
        reasoning = pa.struct([("reasoningText", pa.struct([("text", s), ("signature", s)]))])
        use = pa.struct([("toolUseId", s), ("name", s), ("input", arguments)])
        result = pa.struct(
            [("toolUseId", s), ("content", pa.list_(pa.struct([("text", s)]))), ("status", s)]
        )
        block = pa.struct(
            [("reasoningContent", reasoning), ("text", s), ("toolUse", use), ("toolResult", result)]
        )
        message = pa.struct([("role", s), ("content", pa.list_(block))])
        system = pa.list_(pa.struct([("text", s)]))
        return pa.schema([("id", pa.int64()), ("system", system), ("messages", pa.list_(message))])
    if format == "llamafactory":
        item = pa.struct([("type", s), ("value", s)])
        message = pa.struct(
            [("role", s), ("content", pa.list_(item)), ("loss_weight", pa.float64())]
        )
        return pa.schema([("id", pa.int64()), ("messages", pa.list_(message)), ("tools", s)])
    if format == "responses":
        part = pa.struct([("type", s), ("text", s)])
        item = pa.struct(
            [("type", s), ("role", s), ("content", pa.list_(part)), ("id", s),
             ("summary", pa.list_(part)), ("call_id", s), ("name", s), ("arguments", s),
             ("output", s)]
        )  # fmt: skip
        return pa.schema(
            [("id", pa.int64()), ("instructions", s), ("input", pa.list_(item)), ("tools", s)]
        )
    if format == "openhands":
        function = pa.struct([("name", s), ("arguments", s)])
        call = pa.struct([("id", s), ("type", s), ("function", function)])
        message = pa.struct(
            [("content", s), ("role", s), ("tool_calls", pa.list_(call)),
             ("reasoning_content", s)]
        )  # fmt: skip
        choice = pa.struct([("finish_reason", s), ("index", pa.int64()), ("message", message)])
        response = pa.struct([("id", s), ("choices", pa.list_(choice))])
        metadata = pa.struct(
            [("function_name", s), ("tool_call_id", s), ("model_response", response),
             ("total_calls_in_response", pa.int64())]
        )  # fmt: skip
        args = pa.struct(
            [("content", s), ("image_urls", pa.list_(s)), ("wait_for_response", pa.bool_()),
             ("name", s), ("thought", s), ("agent_state", s)]
        )  # fmt: skip
        event = pa.struct(
            [("id", pa.int64()), ("source", s), ("message", s), ("action", s), ("args", args),
             ("observation", s), ("content", s), ("cause", pa.int64()),
             ("tool_call_metadata", metadata)]
        )  # fmt: skip
        return pa.schema([("id", pa.int64()), ("history", pa.list_(event))])
    if format == "claude-code":
        block = pa.struct(
            [("type", s), ("text", s), ("thinking", s), ("signature", s), ("data", s), ("id", s),
             ("name", s), ("input", arguments), ("tool_use_id", s), ("content", s)]
        )  # fmt: skip
        message = pa.struct([("id", s), ("role", s), ("content", pa.list_(block))])
        event = pa.struct(
            [("type", s), ("uuid", s), ("parentUuid", s), ("sessionId", s),
             ("isSidechain", pa.bool_()), ("message", message), ("subtype", s)]
        )  # fmt: skip
        return pa.schema([("id", pa.int64()), ("sessionId", s), ("events", pa.list_(event))])
    if format == "hh":
        return pa.schema([("id", pa.int64()), ("text", s)])
    if format == "pairs":
        pair = pa.struct([("human", s), ("assistant", s)])
        return pa.schema([("id", pa.int64()), ("system", s), ("conversation", pa.list_(pair))])
    if format in PLAIN:
        fields = [(n, s) for n in _STRING_FIELDS[format]]
        if format == "alpaca":
            fields.insert(1, ("input", s))
        if format != "completion":
            fields += [("system", s), ("history", pa.list_(pa.list_(s)))]
        return pa.schema([("id", pa.int64()), *fields])
    return _bad_format(format)


# ---------------------------------------------------------------------------------------------
# the generator


def generate_rows(
    n: int, format: str = "openai", seed: int = 0, rates: Mapping[str, float] | None = None
) -> Iterator[tuple[Row, frozenset[str]]]:
    """`n` rows of `format`, each with the set of codes planted in it (empty for a clean row).

    `rates` gives each code's share of rows (codes left out: none); None is
    `default_rates(format)`. A row carries at most one planted code (with the codes that come
    with it in its format, `ALSO`), so the rates add up to at most 1.
    """
    render, _, reasoning, system = _RENDER.get(format) or _bad_format(format)
    rates = default_rates(format) if rates is None else dict(rates)
    unknown = sorted(set(rates) - set(CODES))
    if unknown:
        raise ValueError(f"unknown codes {unknown}; the codes are {', '.join(CODES)}")
    unsupported = sorted(c for c, r in rates.items() if r > 0 and c in UNSUPPORTED.get(format, ()))
    if unsupported:
        raise ValueError(f"{format} rows cannot carry {unsupported}")
    if any(r < 0 for r in rates.values()) or sum(rates.values()) > 1 + 1e-9:
        raise ValueError(f"rates must be at least 0 and add up to at most 1, got {rates}")
    thresholds: list[tuple[float, str]] = []
    total = 0.0
    for code in CODES:
        if rates.get(code, 0) > 0:
            total += rates[code]
            thresholds.append((total, code))

    # Anthropic's and rig's declarations, where the rates ask for them (`TOOLS_ONLY`).
    tools = (
        (_ANTHROPIC_TOOL_JSON if format == "anthropic" else _TOOL_JSON)
        if format in TOOLS_ONLY and declares_tools(format, rates)
        else None
    )
    rng = random.Random(seed)
    needs_calls = {"invalid_tool_arguments", "orphan_tool_result", "unanswered_tool_call"}
    needs_calls |= {"unknown_tool", "tool_arguments_schema", "duplicate_call_id"}
    for i in range(n):
        draw = rng.random()
        planted = next((c for limit, c in thresholds if draw < limit), None)
        plain = {"calls": False, "single": PLAIN[format]} if format in PLAIN else {}
        items = _conversation(rng, planted in needs_calls, reasoning, system, **plain)
        if planted is not None and planted not in ("malformed_row", "unknown_role"):
            items = _plant(rng, items, planted)
        row = render(rng, items, i, planted)
        if tools is not None:
            row["tools"] = _tools_json(items, tools, planted)
        if planted in ("malformed_row", "unknown_role"):
            _break(rng, row, format, planted)
        if planted is None:
            yield row, frozenset()
        else:
            yield row, frozenset((planted,)) | ALSO.get((format, planted), frozenset())


def _bad_format(format: str) -> Any:
    raise ValueError(f"unknown format {format!r}; the formats are {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------------
# preference rows (issue 16): a prompt and two candidates

ROW_TYPES: Final = ("conversation", "preference")
"""What `make_synthetic.py --type` writes: one conversation column, or preference rows."""

PREFERENCE_CODES: Final = ("prompt_consecutive", "prompt_empty", "candidate_empty")
"""Where a preference row's defect is planted: two assistant messages in a row in the prompt,
an empty assistant turn in the prompt, an empty assistant turn in one candidate."""

PREFERENCE_RATES: Final[Mapping[str, float]] = {
    "prompt_consecutive": 0.03,
    "prompt_empty": 0.02,
    "candidate_empty": 0.05,
}

REJECTED_ANSWERS = (
    "I don't know.",
    "Could you ask someone else?",
    "That is outside what I can help with.",
)


def preference_schema(format: str) -> pa.Schema:
    """The Arrow schema of generated preference rows: openai `prompt` / `chosen` / `rejected`
    lists of messages (TRL's conversational preference rows); sharegpt LLaMA-Factory's ranking
    rows, `conversations` and one turn each for `chosen` and `rejected`."""
    import pyarrow as pa

    base = arrow_schema(format)
    if format == "openai":
        messages = base.field("messages").type
        return pa.schema(
            [("id", pa.int64()), ("prompt", messages), ("chosen", messages),
             ("rejected", messages), ("tools", pa.string())]
        )  # fmt: skip
    if format == "sharegpt":
        turns = base.field("conversations").type
        return base.append(pa.field("chosen", turns.value_type)).append(
            pa.field("rejected", turns.value_type)
        )
    raise ValueError(f"preference rows are generated in openai and sharegpt, not {format!r}")


def generate_preference_rows(
    n: int,
    format: str = "openai",
    seed: int = 0,
    rates: Mapping[str, float] | None = None,
    defects: Mapping[str, float] | None = None,
) -> Iterator[tuple[Row, frozenset[str]]]:
    """`n` preference rows of `format` (`preference_schema`), each with the codes a strict run
    finds in it; `rates`: the share of rows of each of `PREFERENCE_CODES` (default
    `PREFERENCE_RATES`). The prompt ends on a user turn; `chosen` is the conversation's answer,
    `rejected` a poorer one.

    `defects`: rates of `generate_rows`' codes in the conversations the rows are cut from (none
    by default; the decoder's codes, `malformed_row` and `unknown_role`, would leave no turns to
    cut, and are not taken). Where a code lands in the prompt or a candidate depends on the cut,
    so the codes given for such a row are only those of `rates`."""
    preference_schema(format)  # checks the format
    rates = dict(PREFERENCE_RATES if rates is None else rates)
    cut = {c: r for c, r in (defects or {}).items() if c not in ("malformed_row", "unknown_role")}
    rng = random.Random(seed)
    for row, _ in generate_rows(n, format, seed, rates=cut):
        draw, planted = rng.random(), None
        for code in PREFERENCE_CODES:
            draw -= rates.get(code, 0.0)
            if draw < 0:
                planted = code
                break
        if format == "openai":
            yield _openai_preference(rng, row, planted)
        else:
            yield _sharegpt_ranking(rng, row, planted)


def _openai_preference(
    rng: random.Random, row: Row, planted: str | None
) -> tuple[Row, frozenset[str]]:
    messages = row.pop("messages")
    last = max(k for k, m in enumerate(messages) if m["role"] == "user")
    prompt, chosen = messages[: last + 1], messages[last + 1 :]
    if not any(m["role"] == "assistant" for m in chosen):
        chosen = [{"role": "assistant", "content": rng.choice(CHAT)[1]}]
    rejected = [{"role": "assistant", "content": rng.choice(REJECTED_ANSWERS)}]
    first = next(k for k, m in enumerate(prompt) if m["role"] == "user")
    codes: frozenset[str] = frozenset()
    if planted == "prompt_consecutive":
        prompt[first + 1 : first + 1] = [
            {"role": "assistant", "content": rng.choice(PREFACES)},
            {"role": "assistant", "content": rng.choice(THOUGHTS)},
            {"role": "user", "content": rng.choice(FOLLOW_UPS)},
        ]
        codes = frozenset({"consecutive_assistant"})
    elif planted == "prompt_empty":
        prompt[first + 1 : first + 1] = [
            {"role": "assistant", "content": ""},
            {"role": "user", "content": rng.choice(FOLLOW_UPS)},
        ]
        codes = frozenset({"empty_assistant_turn"})
    elif planted == "candidate_empty":
        candidate = chosen if rng.random() < 0.5 else rejected
        candidate.append({"role": "assistant", "content": " "})
        codes = frozenset({"empty_assistant_turn"})
    out = {"id": row["id"], "prompt": prompt, "chosen": chosen, "rejected": rejected}
    return {**out, "tools": row["tools"]}, codes


def _sharegpt_ranking(
    rng: random.Random, row: Row, planted: str | None
) -> tuple[Row, frozenset[str]]:
    turns = row.pop("conversations")
    # the prompt: up to the last human turn answered by a gpt turn
    last = max(
        (k for k in range(len(turns) - 1) if turns[k]["from"] == "human"
         and turns[k + 1]["from"] == "gpt"),
        default=None,
    )  # fmt: skip
    if last is None:
        prompt = [t for t in turns if t["from"] == "human"][:1] or [
            {"from": "human", "value": rng.choice(CHAT)[0]}
        ]
        chosen = {"from": "gpt", "value": rng.choice(CHAT)[1]}
    else:
        prompt, chosen = turns[: last + 1], turns[last + 1]
    rejected = {"from": "gpt", "value": rng.choice(REJECTED_ANSWERS)}
    codes: frozenset[str] = frozenset()
    if planted == "prompt_consecutive":
        prompt[1:1] = [
            {"from": "gpt", "value": rng.choice(PREFACES)},
            {"from": "gpt", "value": rng.choice(THOUGHTS)},
            {"from": "human", "value": rng.choice(FOLLOW_UPS)},
        ]
        codes = frozenset({"consecutive_assistant"})
    elif planted == "prompt_empty":
        prompt[1:1] = [{"from": "gpt", "value": ""}, {"from": "human", "value": "Hello?"}]
        codes = frozenset({"empty_assistant_turn"})
    elif planted == "candidate_empty":
        # one turn that is empty: once dropped, the candidate is gone (so is the only
        # assistant turn, when the prompt has none)
        (chosen if rng.random() < 0.5 else rejected)["value"] = " "
        codes = frozenset({"empty_assistant_turn"})
        if not any(t["from"] == "gpt" for t in prompt):
            codes |= {"no_assistant_turn"}
    return {**row, "conversations": prompt, "chosen": chosen, "rejected": rejected}, codes
