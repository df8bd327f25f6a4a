"""The ShareGPT format (SPEC section 6), with LLaMA-Factory's tags for tool use.

    {"conversations": [
        {"from": "human", "value": "Weather in Paris?"},
        {"from": "function_call", "value": "{\\"name\\": \\"get_weather\\", \\"arguments\\": {}}"},
        {"from": "observation", "value": "18 C"},
        {"from": "gpt", "value": "It is 18 C in Paris."}],
     "system": "You are a weather bot.", "tools": "[...]"}

ShareGPT has no call ids: a `function_call` value is one `{name, arguments}` object or a list of
them (parallel calls), and the `observation` turns after it answer them by position, with ids
minted from positions. A `function_call` turn right after a `gpt` turn is the same assistant
turn (the format cannot hold text and calls in one turn), and so are consecutive `function_call`
turns. LLaMA-Factory wants one observation turn per call turn, so parallel results may come as
ONE observation whose value is a JSON list with one item per call: the k-th item answers the k-th
call (a string item is the result's text, any other item its JSON).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.errors import UNKNOWN_ROLE, FormatError
from transcript_clean.formats.base import (
    Decoded,
    DecodeError,
    Format,
    IdMinter,
    Row,
    expect_list,
    expect_object,
    join_texts,
    kind_of,
    malformed,
    parse_arguments,
    put,
    read_reasoning,
    required_str,
    without_origins,
    write_reasoning,
)
from transcript_clean.formats.sharegpt.values import parse_call_objects, read_calls, split_list
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Message,
    Reasoning,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations

ROLES: Final = ("user", "assistant", "system", "function_call", "observation")
"""What a tag can stand for."""

DEFAULT_TAGS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "human": "user",
        "gpt": "assistant",
        "system": "system",
        "function_call": "function_call",
        "observation": "observation",
    }
)
"""LLaMA-Factory's tags (FastChat's human / gpt among them)."""

# The origin of a system message read from the `system` column rather than from a turn.
_SYSTEM_COLUMN: Final[Mapping[str, Any]] = MappingProxyType({"column": "system"})

_Turn = tuple[Mapping[str, Any], str, str]  # the turn, the role its tag stands for, its value


class ShareGPTFormat(Format):
    """`conversations` of `{from, value}` turns; `system` and `tools` columns.

    `tags` maps each tag to what it stands for (one of `ROLES`), e.g.
    `{"user": "user", "assistant": "assistant", "tool": "observation"}`; a turn is written fresh
    with the first tag given for its role.
    """

    name = "sharegpt"
    default_column = "conversations"
    side_columns = ("system",)
    joins_text = True
    merged_field = "value"

    def __init__(self, column: str | None = None, tags: Mapping[str, str] | None = None) -> None:
        super().__init__(column)
        self.tags: Mapping[str, str] = dict(DEFAULT_TAGS if tags is None else tags)
        bad = {tag: role for tag, role in self.tags.items() if role not in ROLES}
        if bad:
            raise FormatError(f"sharegpt tags {bad} stand for no role; the roles: {list(ROLES)}")
        self._tag_of = {role: tag for tag, role in reversed(list(self.tags.items()))}
        for tag, role in DEFAULT_TAGS.items():
            self._tag_of.setdefault(role, tag)

    def __repr__(self) -> str:
        if self.tags == DEFAULT_TAGS:
            return super().__repr__()
        return f"{type(self).__name__}(column={self.column!r}, tags={dict(self.tags)!r})"

    # -----------------------------------------------------------------------------------------
    # decode

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        turns = [
            self.read_turn(t, f"{column}[{i}]")
            for i, t in enumerate(expect_list(row[column], column))
        ]
        messages: list[Message] = []
        system = row.get("system")
        if system is not None and not isinstance(system, str):
            raise malformed("system", f"expected a string, got {kind_of(system)}")
        if system:
            messages.append(SystemMessage(system, origin=_SYSTEM_COLUMN))

        mint = IdMinter(tuple)  # ShareGPT holds no ids a minted one could collide with
        answers: tuple[ToolCall, ...] = ()  # the calls of the last assistant turn
        i = 0
        while i < len(turns):
            turn, role, value = turns[i]
            if role == "system":
                messages.append(SystemMessage(value, origin=turn))
                i += 1
            elif role == "user":
                messages.append(UserMessage((Text(value, origin=turn),), origin=turn))
                answers = ()
                i += 1
            elif role == "observation":
                end = i
                while end < len(turns) and turns[end][1] == "observation":
                    end += 1
                messages.append(UserMessage(_results(turns[i:end], i, answers, mint)))
                answers = ()
                i = end
            else:
                parts: list[AssistantPart] = []
                if role == "assistant":
                    parts.extend(read_reasoning(turn, f"{column}[{i}]"))
                    parts.append(Text(value, origin=turn))
                    i += 1
                while i < len(turns) and turns[i][1] == "function_call":
                    parts.extend(_calls(turns[i], f"{column}[{i}].value", i, mint))
                    i += 1
                message = AssistantMessage(tuple(parts), origin=turn)
                messages.append(message)
                answers = message.tool_calls
        return Decoded(messages, dict(row), frozenset(mint.minted), format=self.name)

    def read_turn(self, item: object, path: str) -> _Turn:
        """One turn at `path`: the object, its role and its text. `decode` reads every turn
        with this, in order, before anything else; raises `DecodeError`."""
        turn = expect_object(item, path)
        tag = required_str(turn, "from", path)
        role = self.tags.get(tag)
        if role is None:
            known = ", ".join(self.tags)
            raise DecodeError(
                UNKNOWN_ROLE,
                f"{path}.from",
                f'unknown tag "{tag}"; the known tags: {known} (set others with the tags option)',
            )
        return turn, role, required_str(turn, "value", path)

    # -----------------------------------------------------------------------------------------
    # encode

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.sharegpt.flatten import flatten_sharegpt

        return flatten_sharegpt(column, schema, side or {}, self.tags)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        turns: list[Row] = []
        calls: tuple[ToolCall, ...] = ()  # the calls the next observations answer by position
        run: list[ToolResult] = []  # results to write as one run of observation turns

        def flush() -> None:
            # Adjacent observation turns read back as one run, so results of consecutive user
            # messages are written together.
            nonlocal calls
            if run:
                turns.extend(self._observations_out(run, calls))
                run.clear()
                calls = ()

        for index, message in enumerate(messages):
            if isinstance(message, UserMessage):
                results = [p for p in message.content if isinstance(p, ToolResult)]
                run.extend(results)
                texts = [p.text for p in message.content if isinstance(p, Text)]
                if texts or not results:
                    flush()
                    turns.append(self._turn_out(message.origin, "user", join_texts(texts)))
                    calls = ()
                continue
            flush()
            if isinstance(message, AssistantMessage):
                turns.extend(self._assistant_out(message))
                calls = message.tool_calls
            elif index == 0 and (message.origin is None or message.origin is _SYSTEM_COLUMN):
                row["system"] = message.content
            else:
                turns.append(self._turn_out(message.origin, "system", message.content))
        flush()
        row[self.column] = turns
        return row

    def _turn_out(self, origin: Mapping[str, Any] | None, role: str, value: str) -> Row:
        if origin is None:
            return {"from": self._tag_of[role], "value": value}
        out = dict(origin)
        put(out, "value", value)
        return out

    def _assistant_out(self, message: AssistantMessage) -> Iterator[Row]:
        texts = [p for p in message.content if isinstance(p, Text)]
        calls = message.tool_calls
        if texts or not calls:
            origin = texts[0].origin if texts else None
            out = self._turn_out(origin, "assistant", join_texts(p.text for p in texts))
            write_reasoning(out, [p for p in message.content if isinstance(p, Reasoning)], origin)
            yield out
        # Calls read from one turn are written back as that turn, verbatim when unchanged.
        group: list[ToolCall] = []
        for call in calls:
            if group and call.origin is not group[0].origin:
                yield self._calls_out(group)
                group = []
            group.append(call)
        if group:
            yield self._calls_out(group)

    def _calls_out(self, group: list[ToolCall]) -> Row:
        origin = group[0].origin
        if origin is not None and read_calls(origin.get("value")) == [_call_key(c) for c in group]:
            return dict(origin)
        objects = [{"name": c.name, "arguments": _arguments_out(c)} for c in group]
        value = json.dumps(objects[0] if len(objects) == 1 else objects, ensure_ascii=False)
        return self._turn_out(origin, "function_call", value)

    def _observations_out(
        self, results: list[ToolResult], calls: tuple[ToolCall, ...]
    ) -> Iterator[Row]:
        if not results:
            return
        # Results answer by position: put them in call order (stable, so results read from a row
        # keep their order; results of no call go last).
        order = {c.id: k for k, c in reversed(list(enumerate(calls)))}
        results = sorted(results, key=lambda r: order.get(r.call, len(calls)))
        texts = [_result_text(r) for r in results]
        # One observation holding a JSON list answers every call of the turn before, when it is
        # the only observation of its run: for results of one such turn, or fresh results.
        origin = results[0].origin
        if (
            len(results) >= 2
            and all(r.origin is origin for r in results)
            and [r.call for r in results] == [c.id for c in calls]
        ):
            if origin is not None and split_list(origin.get("value"), len(texts)) == texts:
                yield dict(origin)
            else:
                yield self._turn_out(origin, "observation", _list_value(texts))
            return
        for result, text in zip(results, texts, strict=True):
            yield self._turn_out(result.origin, "observation", text)


# ---------------------------------------------------------------------------------------------
# helpers


def _calls(turn: _Turn, path: str, i: int, mint: IdMinter) -> Iterator[ToolCall]:
    origin, _, value = turn
    objects = parse_call_objects(value)
    if not objects:
        raise malformed(path, "expected JSON: one {name, arguments} object or a list of them")
    single = len(objects) == 1 and not value.lstrip().startswith("[")
    for k, item in enumerate(objects):
        item_path = path if single else f"{path}[{k}]"
        obj = expect_object(item, item_path)
        name = required_str(obj, "name", item_path)
        arguments, raw = parse_arguments(obj.get("arguments"))
        yield ToolCall(mint(f"call_{i}_{k}"), name, arguments, raw, origin=origin)


def _call_key(call: ToolCall) -> tuple[Any, ...]:
    return (call.name, call.arguments, call.raw_arguments)


def _arguments_out(call: ToolCall) -> Any:
    """A call's arguments as LLaMA-Factory writes them: an object, or the raw string as read."""
    if call.raw_arguments is None:
        return call.arguments
    if call.origin is None and isinstance(call.arguments, dict):
        return call.arguments
    return call.raw_arguments


def _results(
    run: list[_Turn], start: int, answers: tuple[ToolCall, ...], mint: IdMinter
) -> tuple[ToolResult, ...]:
    """A run of observation turns: the k-th answers the k-th call of the turn before; one turn
    with a JSON list of one item per call answers them all."""
    if len(run) == 1 and len(answers) >= 2:
        texts = split_list(run[0][2], len(answers))
        if texts is not None:
            return tuple(
                ToolResult(c.id, (Text(t),), c.name, origin=run[0][0])
                for c, t in zip(answers, texts, strict=True)
            )
    results = []
    for k, (turn, _, value) in enumerate(run):
        if k < len(answers):
            call_id, name = answers[k].id, answers[k].name
        else:
            call_id, name = mint(f"result_{start + k}"), None  # answers nothing: an orphan
        results.append(ToolResult(call_id, (Text(value),), name, origin=turn))
    return tuple(results)


def _list_value(texts: list[str]) -> str:
    """One observation value for several results; `split_list` reads the texts back."""
    items: list[Any] = []
    for text in texts:
        item: Any = text
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            # Embedded as JSON only where it reads back as the same text.
            if parsed is not None and json.dumps(parsed, ensure_ascii=False) == text:
                item = parsed
        items.append(item)
    return json.dumps(items, ensure_ascii=False)


def _result_text(result: ToolResult) -> str:
    return join_texts(p.text for p in result.content if isinstance(p, Text))
