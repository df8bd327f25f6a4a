"""Hermes / ChatML function calling: ShareGPT-like turns whose tool calls live in the
assistant's text, as NousResearch's hermes-function-calling-v1 and Hermes agent trajectories
write them.

    {"conversations": [
        {"from": "system", "value": "You are a function calling AI model. ... <tools>
            [{'type': 'function', 'function': {'name': 'get_weather', ...}}] </tools> ..."},
        {"from": "human", "value": "Weather in Paris?"},
        {"from": "gpt", "value": "<tool_call>\\n{'arguments': {'city': 'Paris'},
            'name': 'get_weather'}\\n</tool_call>\\n"},
        {"from": "tool", "value": "<tool_response>\\n{\\"name\\": \\"get_weather\\",
            \\"content\\": \\"18 C\\"}\\n</tool_response>\\n"},
        {"from": "gpt", "value": "It is 18 C in Paris."}]}

A `gpt` turn is read as its `<think>...</think>` blocks (reasoning), the text outside the tags,
and one call per `<tool_call>{name, arguments}</tool_call>`: JSON, or the Python literal the
dataset writes (`{'arguments': {...}, 'name': ...}`, `True`, `None`). A `tool` turn holds one
result per `<tool_response>` (the whole value when it has none); a body `{"name", "content"}` is
a result of that name whose text is `content`. Hermes has no call ids: the results of a run of
`tool` turns answer the calls of the turn before by position, with ids minted from positions as
the ShareGPT and OpenAI codecs mint them. The declared tools are the `tools` column when the row
has one, else the `<tools>` block of the system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.formats.base import (
    Decoded,
    DecodeError,
    Format,
    IdMinter,
    Row,
    expect_list,
    expect_object,
    join_texts,
    malformed,
    put,
    required_str,
    unknown_role,
    without_origins,
)
from transcript_clean.formats.hermes.values import (
    TAGS,
    assistant_parts,
    prompt_tools,
    read_responses,
    read_tools_block,
)
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.tools import Declared

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations

_FRESH_TAGS: Final = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}

_Turn = tuple[Mapping[str, Any], str, str]  # the turn, what its tag stands for, its value


class HermesFormat(Format):
    """`conversations` of `{from, value}` turns with `<tool_call>` / `<tool_response>` tags."""

    name = "hermes"
    default_column = "conversations"
    joins_text = True
    merged_field = "value"
    words = "Hermes function calling: <tool_call> in gpt turns, <tool_response> in tool turns"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        turns = [
            _read_turn(t, f"{column}[{i}]") for i, t in enumerate(expect_list(row[column], column))
        ]
        mint = IdMinter(tuple)  # Hermes holds no ids a minted one could collide with
        messages: list[Message] = []
        answers: tuple[ToolCall, ...] = ()  # the calls the next tool turns answer
        i = 0
        while i < len(turns):
            turn, role, value = turns[i]
            path = f"{column}[{i}].value"
            if role == "system":
                messages.append(SystemMessage(value, origin=turn))
            elif role == "user":
                messages.append(UserMessage((Text(value),), origin=turn))
                answers = ()
            elif role == "assistant":
                message = AssistantMessage(assistant_parts(value, path, i, mint), origin=turn)
                messages.append(message)
                answers = message.tool_calls
            else:
                results: list[ToolResult] = []
                while i < len(turns) and turns[i][1] == "tool":
                    turn, _, value = turns[i]
                    for name, text in read_responses(value):
                        k = len(results)
                        if k < len(answers):
                            call_id, name = answers[k].id, name or answers[k].name
                        else:
                            call_id = mint(f"result_{i}_{k}")  # answers nothing: an orphan
                        results.append(ToolResult(call_id, (Text(text),), name, origin=turn))
                    i += 1
                messages.append(UserMessage(tuple(results)))
                answers = ()
                continue
            i += 1
        return Decoded(messages, dict(row), frozenset(mint.minted), format=self.name)

    def declared_tools(self, row: Mapping[str, Any]) -> Declared | None:
        """The `tools` column's declarations (or `--tools-column`'s), else those in the first
        `<tools>` block of the first system turn that holds something."""
        found = super().declared_tools(row)
        if found is not None or self.tools_column is not None:
            return found
        turns = row.get(self.column)
        if not isinstance(turns, list):
            return None
        for turn in turns:
            if isinstance(turn, Mapping) and TAGS.get(str(turn.get("from"))) == "system":
                value = turn.get("value")
                body = prompt_tools(value) if isinstance(value, str) else None
                return read_tools_block(body)[0] if body is not None else None
        return None

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.hermes.flatten import flatten_hermes

        # With `--tools-column`, the decoder reads no declarations in the system prompt.
        return flatten_hermes(column, prompt_tools=self.tools_column is None)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        tags = dict(_FRESH_TAGS)
        was = row.get(self.column)
        # A turn written fresh takes the tag the row already uses for its role.
        for turn in reversed(was if isinstance(was, list) else []):
            if isinstance(turn, Mapping) and isinstance(turn.get("from"), str):
                role = TAGS.get(turn["from"])
                if role is not None:
                    tags[role] = turn["from"]
        turns: list[Row] = []
        calls: tuple[ToolCall, ...] = ()
        for message in messages:
            if isinstance(message, SystemMessage):
                turns.append(_turn_out(message.origin, tags["system"], message.content))
            elif isinstance(message, AssistantMessage):
                turns.append(_assistant_out(message, tags["assistant"]))
                calls = message.tool_calls
            else:
                results = [p for p in message.content if isinstance(p, ToolResult)]
                turns.extend(_results_out(results, calls, tags["tool"]))
                texts = [p.text for p in message.content if isinstance(p, Text)]
                if texts or not results:
                    turns.append(_turn_out(message.origin, tags["user"], join_texts(texts)))
                calls = ()
        row[self.column] = turns
        return row


# ---------------------------------------------------------------------------------------------
# decode


def _read_turn(item: object, path: str) -> _Turn:
    turn = expect_object(item, path)
    tag = required_str(turn, "from", path)
    role = TAGS.get(tag)
    if role is None:
        raise unknown_role(
            f"{path}.from", f'unknown tag "{tag}"; the known tags: {", ".join(TAGS)}'
        )
    return turn, role, required_str(turn, "value", path)


# ---------------------------------------------------------------------------------------------
# encode


def _turn_out(origin: Mapping[str, Any] | None, tag: str, value: str) -> Row:
    if origin is None:
        return {"from": tag, "value": value}
    out = dict(origin)
    put(out, "value", value)
    return out


def _assistant_out(message: AssistantMessage, tag: str) -> Row:
    origin = message.origin
    value = origin.get("value") if origin is not None else None
    if origin is not None and isinstance(value, str):
        try:
            same = assistant_parts(value, "", 0, IdMinter(tuple)) == _without_ids(message)
        except DecodeError:
            same = False
        if same:
            return dict(origin)
    return _turn_out(origin, tag, _assistant_value(message.content))


def _without_ids(message: AssistantMessage) -> tuple[AssistantPart, ...]:
    """The message's parts with its calls' ids set as a fresh decode of one turn mints them
    (position k in turn 0), so that an unchanged turn compares equal to its source."""
    out: list[AssistantPart] = []
    k = 0
    for part in message.content:
        if isinstance(part, ToolCall):
            out.append(ToolCall(f"call_0_{k}", part.name, part.arguments, part.raw_arguments))
            k += 1
        else:
            out.append(part)
    return tuple(out)


def _assistant_value(parts: Sequence[AssistantPart]) -> str:
    pieces: list[str] = []
    for part in parts:
        if isinstance(part, Reasoning):
            text = join_texts(p.text for p in part.content if isinstance(p, ReasoningText))
            pieces.append(f"<think>\n{text}\n</think>")
    texts = [p.text for p in parts if isinstance(p, Text)]
    if texts:
        pieces.append(join_texts(texts))
    for part in parts:
        if isinstance(part, ToolCall):
            arguments = (
                part.arguments
                if part.raw_arguments is None or part.arguments is not None
                else part.raw_arguments
            )
            body = json.dumps({"name": part.name, "arguments": arguments}, ensure_ascii=False)
            pieces.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(pieces)


def _response(result: ToolResult) -> str:
    text = join_texts(p.text for p in result.content if isinstance(p, Text))
    if result.name is None:
        return f"<tool_response>\n{text}\n</tool_response>"
    body = json.dumps({"name": result.name, "content": text}, ensure_ascii=False)
    return f"<tool_response>\n{body}\n</tool_response>"


def _results_out(results: list[ToolResult], calls: tuple[ToolCall, ...], tag: str) -> Iterator[Row]:
    """Tool turns for the results: those read from one turn and unchanged are that turn as it
    was; the others are written fresh, one turn per source turn (one for fresh results)."""
    # Results answer by position: put them in call order (stable, so results read from a row
    # keep their order; results of no call go last).
    order = {c.id: k for k, c in reversed(list(enumerate(calls)))}
    results = sorted(results, key=lambda r: order.get(r.call, len(calls)))
    groups: list[list[ToolResult]] = []
    for result in results:
        if groups and result.origin is groups[-1][0].origin:
            groups[-1].append(result)
        else:
            groups.append([result])
    for group in groups:
        origin = group[0].origin
        value = origin.get("value") if origin is not None else None
        if origin is not None and isinstance(value, str) and _same_results(value, group):
            yield dict(origin)
        else:
            yield _turn_out(origin, tag, "\n".join(_response(r) for r in group))


def _same_results(value: str, group: list[ToolResult]) -> bool:
    read = read_responses(value)
    if len(read) != len(group):
        return False
    for (name, text), result in zip(read, group, strict=True):
        if result.content != (Text(text),) or (name is not None and name != result.name):
            return False
    return True
