"""`auto`: which format a dataset is in, from its column names and the keys of its first rows.

Each column holding lists of objects is a candidate conversation column. Its message keys, roles,
tags and part types point at formats (an `observation` tag at ShareGPT, a `tool_use` block at
Anthropic, a `toolcall` part at rig, a `tool_calls` key at OpenAI (and other role names, such
as Cohere's `Chatbot`, at OpenAI with those names mapped), a `<tool_call>` tag in a turn's text
at Hermes, `parts` at Gemini, `{type, value}` content items at LLaMA-Factory v1, `human` /
`assistant` pairs at ms-swift's, `function_call` items at the Responses API, `action` and
`observation` events at OpenHands). Columns of plain strings are read too: `instruction` + `output`
(Alpaca), `instruction` + `context` + `response` (Dolly), `query` + `response` (ms-swift), `prompt`
+ `completion` (TRL), and a text of `Human:` / `Assistant:` turns (hh-rlhf) or of `### Human:` /
`### Assistant:` turns (Guanaco). Each format pointed at is then tried on the first rows: the one
the keys point at most clearly wins if it reads nearly as many of them as any (`NEARLY`), so that a
few bad rows cannot hand the dataset to a more lenient reader.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from transcript_clean.errors import FormatError
from transcript_clean.formats.base import DecodeError, Format
from transcript_clean.formats.hermes.values import TAGS as HERMES_TAGS
from transcript_clean.formats.openai.codec import ROLE_ALIASES
from transcript_clean.formats.openai.codec import ROLES as OPENAI_ROLES
from transcript_clean.formats.registry import get_format
from transcript_clean.formats.responses.codec import ITEM_TYPES as RESPONSES_ITEMS
from transcript_clean.formats.sharegpt import DEFAULT_TAGS
from transcript_clean.formats.text.hh import looks_like_guanaco, looks_like_hh

SAMPLE_ROWS: Final = 20
"""How many of the first rows detection looks at."""

NEARLY: Final = 0.8
"""The most likely format wins if it reads this share of what the best reader reads."""

# Where conversations usually live: these columns are tried first.
_USUAL_COLUMNS: Final = ("messages", "conversations", "conversation", "chat", "dialog")

# Tags ShareGPT-style sets use beyond LLaMA-Factory's, and what they stand for.
_TAG_ALIASES: Final[Mapping[str, str]] = {
    **DEFAULT_TAGS,
    "user": "user",
    "assistant": "assistant",
    "tool": "observation",
}

_OPENAI_ROLES: Final = {"system", "developer", "tool", "function"}
_OPENAI_KEYS: Final = {"tool_calls", "tool_call_id", "function_call", "reasoning_content"}
_OPENAI_PARTS: Final = {"image_url", "input_audio", "file", "refusal"}
_ANTHROPIC_PARTS: Final = {"tool_use", "tool_result", "thinking", "redacted_thinking"}
_RIG_PARTS: Final = {"toolcall", "toolresult", "reasoning"}
_RESPONSES_PARTS: Final = {"input_text", "output_text"}
_BEDROCK_BLOCKS: Final = {"text", "toolUse", "toolResult", "reasoningContent"}

# Rows of plain strings: the columns that must hold text (the first is the format's column).
_TEXT_LAYOUTS: Final = (
    (("instruction", "output"), "alpaca"),
    (("instruction", "context", "response"), "dolly"),
    (("query", "response"), "query-response"),
    (("prompt", "completion"), "completion"),
)


@dataclass
class _Seen:
    """What the first rows hold in one column."""

    column: str
    keys: set[str] = field(default_factory=set)
    roles: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    part_types: set[str] = field(default_factory=set)
    assistant_ids: bool = False  # an assistant message has an "id" key (rig writes one)
    tagged_calls: bool = False  # a turn's text holds <tool_call> or <tool_response> (Hermes)
    block_keys: set[str] = field(default_factory=set)  # keys of content items with no "type"
    item_keys: set[str] = field(default_factory=set)  # keys of content items with a "type"
    item_types: set[str] = field(default_factory=set)  # the messages' own "type" (Responses)

    def describe(self) -> str:
        def listed(values: set[str]) -> str:
            return ", ".join(sorted(values)) or "-"

        return (
            f"column {self.column!r}: message keys {listed(self.keys)}; roles "
            f"{listed(self.roles)}; tags {listed(self.tags)}; part types {listed(self.part_types)}"
        )


def detect_conversation_format(
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    *,
    column: str | None = None,
    source: str | None = None,
) -> Format:
    """The conversation format (with its conversation column set) of a dataset with these
    columns, judged by its first rows; `column`: of the conversations in that column. Raises
    `FormatError` naming `source` (the file or dataset the rows come from), the columns and keys
    seen and the formats tried. Several columns of conversations stop detection.

    Dataset types (prompt and candidates) are the next layer's: `shapes.detect.detect_format`
    tries them first and then this.
    """
    sample = [json_decoded(row) for row in rows[:SAMPLE_ROWS]]
    looked = [column] if column is not None else _ordered(columns)
    seen = [s for s in (_look(c, sample) for c in looked) if s is not None]
    hh = [c for c in looked if _first_value(sample, c, looks_like_hh)]
    guanaco = [c for c in looked if _first_value(sample, c, looks_like_guanaco)]
    held = [s.column for s in seen if _candidates(s, set(columns))] + hh + guanaco
    if len(held) > 1:
        raise FormatError(
            f"{source + ': ' if source else ''}several columns hold conversations: "
            f"{', '.join(held)}; name the one to read with "
            "--column, or the dataset type with --type (with --prompt-column and --candidates)"
        )
    if not sample:
        for usual, name in (("messages", "openai"), ("conversations", "sharegpt")):
            if usual in columns and column in (None, usual):
                return get_format(name, usual)
    candidates = [c for s in seen for c in _candidates(s, set(columns))]
    candidates += _text_candidates(columns, sample, column) + [get_format("hh", c) for c in hh]
    candidates += [get_format("guanaco", c) for c in guanaco]
    tried: list[str] = []
    reads: list[tuple[int, Format]] = []
    for fmt in candidates:
        read, first_error = _trial(fmt, sample)
        tried.append(f"{fmt.name} on column {fmt.column!r}: read {read} of {len(sample)} rows")
        if first_error is not None:
            tried[-1] += f" ({first_error})"
        reads.append((read, fmt))
    most = max((read for read, _ in reads), default=0)
    for read, fmt in reads:  # the most likely first
        # A few bad rows in the sample must not hand the dataset to a more lenient reader
        # (OpenAI's reads Anthropic blocks as media): nearly as many rows read is enough.
        if read and read >= most * NEARLY:
            return fmt
    lines = [
        f"{source + ': ' if source else ''}cannot tell the conversation format of these rows",
        f"  columns: {', '.join(columns) or '-'}",
        *(f"  {s.describe()}" for s in seen),
        "  formats tried:"
        + (
            "".join(f"\n    {t}" for t in tried)
            or " none (no column holds messages, nor the strings of a known layout)"
        ),
        _advice(seen, tried, len(sample), columns, sample),
    ]
    raise FormatError("\n".join(lines))


def _advice(
    seen: list[_Seen],
    tried: list[str],
    rows: int,
    columns: Sequence[str] = (),
    sample: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The last line of detection's error: what to do, fitted to what was seen. Naming the
    format and the column helps only where there were no rows to judge by: otherwise every
    format the messages' keys allow was tried, and none read them."""
    if not rows:
        return "There are no rows to tell it by: name the format (--format) and the column."
    if not seen and not tried and "text" in columns and _first_value(sample, "text", _is_str):
        return (
            "The column 'text' holds plain text: language-modeling rows, with no turns for this "
            "tool to check (a text of 'Human:' / 'Assistant:' turns would be read as hh)."
        )
    if not seen and not tried:
        return (
            "No column holds a list of messages (JSON objects), so no format can read these rows."
        )
    if not tried:
        return (
            "No column's messages have a 'role' key, or 'from' and 'value' keys, so no format "
            "can read these rows."
        )
    return f"No format reads any of the first {rows} rows; the first error of each is above."


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _first_value(sample: Sequence[Mapping[str, Any]], column: str, test: Any) -> bool:
    """Whether the first value of `column` in the sample that is not null passes `test`."""
    value = next((row[column] for row in sample if row.get(column) is not None), None)
    return value is not None and bool(test(value))


def _text_candidates(
    columns: Sequence[str], sample: Sequence[Mapping[str, Any]], column: str | None
) -> list[Format]:
    """The formats of plain strings whose columns the rows have, the first holding text."""
    out = []
    for fields, name in _TEXT_LAYOUTS:
        if (
            set(fields) <= set(columns)
            and column in (None, fields[0])
            and _first_value(sample, fields[0], _is_str)
        ):
            out.append(get_format(name))
    return out


def json_decoded(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with conversation columns stored as JSON strings decoded, as the cleaner reads
    them."""
    out = dict(row)
    for key, value in row.items():
        text = value.lstrip() if isinstance(value, str) else ""
        if text.startswith("[") and text[1:].lstrip().startswith("{"):
            with contextlib.suppress(ValueError, RecursionError):
                out[key] = json.loads(text)
    return out


def _ordered(columns: Sequence[str]) -> list[str]:
    usual = [c for c in _USUAL_COLUMNS if c in columns]
    return usual + [c for c in columns if c not in usual]


def _look(column: str, sample: list[dict[str, Any]]) -> _Seen | None:
    """What the sample holds in `column`, or None when it holds no list of objects."""
    seen = _Seen(column)
    found = False
    for row in sample:
        messages = row.get(column)
        if not isinstance(messages, list):
            continue
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            found = True
            seen.keys.update(k for k in message if isinstance(k, str) and message[k] is not None)
            role, tag = message.get("role"), message.get("from")
            if isinstance(message.get("type"), str):
                seen.item_types.add(message["type"])
            if isinstance(role, str):
                seen.roles.add(role)
                if role == "assistant" and "id" in message:
                    seen.assistant_ids = True
            if isinstance(tag, str):
                seen.tags.add(tag)
                value = message.get("value")
                if isinstance(value, str) and (
                    "<tool_call>" in value or "<tool_response>" in value
                ):
                    seen.tagged_calls = True
            content = message.get("content")
            if isinstance(content, list):
                seen.part_types.update(
                    p["type"]
                    for p in content
                    if isinstance(p, Mapping) and isinstance(p.get("type"), str)
                )
                seen.block_keys.update(
                    k for p in content if isinstance(p, Mapping) and "type" not in p for k in p
                )
                seen.item_keys.update(
                    k for p in content if isinstance(p, Mapping) and "type" in p for k in p
                )
    return seen if found else None


def _candidates(seen: _Seen, columns: set[str]) -> list[Format]:
    """The formats `seen` may be in, the most likely first."""
    column = seen.column
    if {"uuid", "sessionId", "message"} <= seen.keys:  # Claude Code events
        return [get_format("claude-code", column)]
    if "source" in seen.keys and seen.keys & {"action", "observation"}:  # OpenHands events
        return [get_format("openhands", column)]
    if "from" in seen.keys and "value" in seen.keys:
        if seen.tagged_calls and seen.tags <= set(HERMES_TAGS):
            # Calls inside the text: ShareGPT would read them as text, and the results as
            # observations answering nothing.
            return [get_format("hermes", column), get_format("sharegpt", column)]
        if seen.tags <= set(DEFAULT_TAGS) or not seen.tags <= set(_TAG_ALIASES):
            return [get_format("sharegpt", column)]
        # The set's own tags first, so that turns written fresh use them.
        tags = {t: _TAG_ALIASES[t] for t in sorted(seen.tags)} | dict(DEFAULT_TAGS)
        return [get_format("sharegpt", column, tags=tags)]
    if {"human", "assistant"} <= seen.keys and "role" not in seen.keys:
        return [get_format("pairs", column)]  # ms-swift's {human, assistant} pairs
    if seen.item_types & RESPONSES_ITEMS or seen.part_types & _RESPONSES_PARTS:
        # Responses items: calls and results are items of their own, with no role
        return [get_format("responses", column), get_format("openai", column)]
    if "role" not in seen.keys:
        return []
    if "parts" in seen.keys and "content" not in seen.keys:
        return [get_format("gemini", column)]  # Gemini's turns hold parts, not content
    others = seen.roles - set(OPENAI_ROLES)
    if others and all(role.lower() in ROLE_ALIASES for role in others):
        # OpenAI-shaped rows that name roles otherwise (Cohere's `Chatbot`, `model`, `agent`)
        roles = {role: ROLE_ALIASES[role.lower()] for role in sorted(others)}
        return [get_format("openai", column, roles=roles)]
    if "value" in seen.item_keys and "text" not in seen.item_keys:
        # LLaMA-Factory v1's {type, value} items: every other reader wants "text"
        return [get_format("llamafactory", column)]
    types = seen.part_types
    scores = {
        "openai": 2 * bool(seen.roles & _OPENAI_ROLES)
        + 2 * bool(seen.keys & _OPENAI_KEYS)
        + 2 * bool(types & _OPENAI_PARTS),
        "anthropic": 3 * bool(types & _ANTHROPIC_PARTS)
        + bool("system" in columns and seen.roles <= {"user", "assistant"}),
        "rig": 3 * bool(types & _RIG_PARTS) + 2 * seen.assistant_ids,
        # Converse blocks are objects of one key, with no "type"
        "bedrock": 3 * bool(seen.block_keys & _BEDROCK_BLOCKS),
    }
    if not scores["bedrock"]:
        del scores["bedrock"]  # tried only where its blocks are seen
    ranked = sorted(scores, key=lambda name: -scores[name])  # stable: openai first on ties
    return [get_format(name, column) for name in ranked]


def _trial(fmt: Format, sample: list[dict[str, Any]]) -> tuple[int, str | None]:
    """How many sample rows `fmt` reads, and why it could not read the first it could not."""
    read, first_error = 0, None
    for k, row in enumerate(sample):
        try:
            fmt.decode(row)
        except DecodeError as err:
            first_error = first_error or f"row {k}: {err}"
        else:
            read += 1
    return read, first_error
