"""The OpenAI chat format (SPEC section 6): a `messages` column of system / developer / user /
assistant / tool messages, as the Chat Completions API, OpenAI fine-tuning files and TRL take them.

    {"messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
        {"role": "assistant", "content": "It is 18 C in Paris."}],
     "tools": [...]}

A run of consecutive tool messages is one canonical user message. A tool message without
`tool_call_id` (TRL's documented shape, functionary's) answers by position: the k-th tool message
of a run answers the k-th call of the assistant turn before it, and calls without an `id` get ids
minted from their position, which are never written back. The legacy `function_call` /
`role: function` shape reads the same way; `reasoning_content`, `reasoning` and `thinking` are the
assistant's reasoning, each written back in its own field.

A call's `arguments` are written back as the row held them (JSON text, or an object), a fresh
call's as JSON text; `with_arguments` gives the format writing every call's in one form
(`--arguments-as`: objects, or JSON text).

Rows that name roles otherwise (Cohere's fine-tuning files: `System` / `User` / `Chatbot`;
Gemini's `model`; RL rollout logs' `agent` and `environment`) are read with `roles`, which maps
each such name to the role it stands for; a message written back keeps its own name, and one
written fresh takes the first name mapped to its role.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.errors import UNKNOWN_ROLE, FormatError
from transcript_clean.formats.base import (
    MISSING,
    ArgumentsForm,
    Decoded,
    DecodeError,
    Format,
    IdMinter,
    Row,
    expect_list,
    expect_object,
    join_texts,
    malformed,
    optional_str,
    parse_arguments,
    put,
    read_reasoning,
    required_str,
    without_origins,
    write_reasoning,
)
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    UserPart,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits


# OpenAI's content-part types for media, and the canonical kinds they read as.
_MEDIA_KINDS = {"image_url": "image", "input_audio": "audio", "file": "document"}
_MEDIA_TYPES = {kind: type_ for type_, kind in _MEDIA_KINDS.items()}
_TEXT_TYPES = ("text", "refusal")  # a refusal is text the model wrote

ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles the decoder knows, and what a role name of `roles` may stand for."""

ROLE_ALIASES: Final[Mapping[str, str]] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",  # Cohere's chat fine-tuning files (`System` / `User` / `Chatbot`)
    "model": "assistant",  # Gemini's name for the assistant
    "agent": "assistant",  # RL rollout logs: the agent acts,
    "environment": "user",  # and the environment's observation is its next input
}
"""Role names `auto` reads as OpenAI's roles, by their lower-case spelling (`System`, `USER`)."""


class OpenAIFormat(Format):
    """`messages` of system / developer / user / assistant / tool; a `tools` column passes
    through with the row."""

    name = "openai"
    default_column = "messages"
    tools_columns = ("tools", "functions")  # `functions`: the legacy declarations
    joins_text = True
    merged_field = "content"
    edits_lines = True
    arguments_as: ArgumentsForm | None = None
    """The form every call's `arguments` are written in (`with_arguments`); None: as the row
    held them."""

    def with_arguments(self, form: ArgumentsForm) -> OpenAIFormat:
        """This format writing every call's `arguments` as `form` says: `object`, the JSON
        value (arguments that are not JSON stay their text), or `string`, JSON text (the row's
        own text where it held text)."""
        out = copy.copy(self)
        out.arguments_as = form
        return out

    def written_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """With `with_arguments`, the schema a typed conversation column's calls' arguments
        need: `json_` for objects (which `datasets` reads back as `Json()`: each object as it
        is, not a struct of every row's keys), text for JSON text. None where it is the
        input's (or the column is JSON as a whole)."""
        if self.arguments_as is None or self.column not in schema.names:
            return None
        import pyarrow as pa

        leaf = pa.json_() if self.arguments_as == "object" else pa.string()
        at = schema.get_field_index(self.column)
        field = schema.field(at)
        retyped = _with_arguments_type(field.type, leaf)
        if retyped == field.type:
            return None
        return schema.set(at, field.with_type(retyped))

    def __init__(self, column: str | None = None, roles: Mapping[str, str] | None = None) -> None:
        super().__init__(column)
        self.roles: dict[str, str] = dict(roles or {})
        """Other role names the rows use, and the role each stands for (one of `ROLES`)."""
        bad = {name: role for name, role in self.roles.items() if role not in ROLES}
        if bad:
            raise FormatError(f"openai roles {bad} stand for no role; the roles: {list(ROLES)}")
        self.names: dict[str, str] = {}
        """Each role's name in these rows, where they name it otherwise: what a message
        written fresh is called (the first name given for its role)."""
        for name, role in self.roles.items():
            self.names.setdefault(role, name)
        if self.roles:
            self.words = "roles " + ", ".join(f"{n} as {r}" for n, r in self.roles.items())

    def __repr__(self) -> str:
        if not self.roles:
            return super().__repr__()
        return f"{type(self).__name__}(column={self.column!r}, roles={self.roles!r})"

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.openai.flatten import flatten_openai

        return flatten_openai(column, self.roles)

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """`Format.write`, and R2's answers: results written anew in place of their tool
        messages (`flatten.with_answers`)."""
        if edits.answers is not None:
            from transcript_clean.formats.openai.flatten import with_answers

            answered = with_answers(column, edits, self.names.get("tool", "tool"))
            if answered is None:
                return None
            column = answered
            edits = replace(edits, answers=None)
        return super().write(column, edits)

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        items = expect_list(row[column], column)
        mint = IdMinter(lambda: _real_ids(items))
        messages: list[Message] = []
        run: list[ToolResult] = []  # the tool messages read so far into one user message
        answers: tuple[ToolCall, ...] = ()  # the calls of the turn before, which a run answers
        by_id: dict[str, ToolCall] = {}  # the same by id (the first call of each id)

        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            role = required_str(obj, "role", path)
            role = self.roles.get(role, role)
            if role in ("tool", "function"):
                run.append(_tool_result(obj, path, answers, by_id, len(run), mint, i))
                continue
            if run:
                messages.append(UserMessage(tuple(run)))
                run = []
                answers, by_id = (), {}
            if role in ("system", "developer"):
                messages.append(SystemMessage(_system_text(obj, path), origin=obj))
            elif role == "user":
                parts = _content_parts(obj.get("content"), f"{path}.content")
                messages.append(UserMessage(parts, origin=obj))
                answers, by_id = (), {}
            elif role == "assistant":
                message = _assistant(obj, path, mint, i)
                messages.append(message)
                answers = message.tool_calls
                by_id = _calls_by_id(answers)
            else:
                raise DecodeError(
                    UNKNOWN_ROLE,
                    f"{path}.role",
                    f'unknown role "{role}"; expected system, developer, user, assistant, '
                    "tool or function",
                )
        if run:
            messages.append(UserMessage(tuple(run)))
        return Decoded(messages, dict(row), frozenset(mint.minted), format=self.name)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        names = self.names if decoded.format == self.name else {}
        row[self.column] = list(
            _encode_messages(messages, decoded.minted, names, self.arguments_as)
        )
        return row


def _with_arguments_type(type_: pa.DataType, leaf: pa.DataType) -> pa.DataType:
    """A `messages` column's Arrow type with the type of every call's `arguments` (in
    `tool_calls[].function` and the legacy `function_call`) made `leaf`."""
    import pyarrow as pa

    def fields(struct: pa.StructType, change: Mapping[str, Any]) -> pa.StructType:
        out = []
        for field in struct:
            make = change.get(field.name)
            out.append(field.with_type(make(field.type)) if make is not None else field)
        return pa.struct(out)

    def arguments(t: pa.DataType) -> pa.DataType:
        return fields(t, {"arguments": lambda _: leaf}) if pa.types.is_struct(t) else t

    def call(t: pa.DataType) -> pa.DataType:
        return fields(t, {"function": arguments}) if pa.types.is_struct(t) else t

    def calls(t: pa.DataType) -> pa.DataType:
        if not pa.types.is_list(t):
            return t
        return pa.list_(t.value_field.with_type(call(t.value_type)))

    def message(t: pa.DataType) -> pa.DataType:
        if not pa.types.is_struct(t):
            return t
        return fields(t, {"tool_calls": calls, "function_call": arguments})

    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        item = type_.value_field.with_type(message(type_.value_type))
        return pa.list_(item) if pa.types.is_list(type_) else pa.large_list(item)
    return type_


# ---------------------------------------------------------------------------------------------
# decode


def _real_ids(items: list[Any]) -> Iterator[str]:
    """Every call id and tool_call_id the messages hold, whatever else is wrong with them."""
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if isinstance(item.get("tool_call_id"), str):
            yield item["tool_call_id"]
        calls = item.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    yield call["id"]


def _system_text(obj: Mapping[str, Any], path: str) -> str:
    content = obj.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = expect_list(content, f"{path}.content")
    texts = []
    for k, part in enumerate(parts):
        part_path = f"{path}.content[{k}]"
        if expect_object(part, part_path).get("type") != "text":
            raise malformed(part_path, "a system message holds only text parts")
        texts.append(required_str(part, "text", part_path))
    return join_texts(texts)


def _content_parts(content: object, path: str) -> tuple[Text | Media, ...]:
    """A message's `content`: a string is one text part, null none, a list its parts."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    parts: list[Text | Media] = []
    for k, item in enumerate(expect_list(content, path)):
        part_path = f"{path}[{k}]"
        part = expect_object(item, part_path)
        type_ = required_str(part, "type", part_path)
        if type_ in _TEXT_TYPES:
            parts.append(Text(required_str(part, type_, part_path), origin=part))
            continue
        if type_ in _MEDIA_KINDS and part.get(type_) is None:
            raise malformed(part_path, f'missing "{type_}"')
        data = {key: value for key, value in part.items() if key != "type"}
        parts.append(Media(_MEDIA_KINDS.get(type_, type_), data))
    return tuple(parts)


def _tool_call(item: object, path: str, mint: IdMinter, position: str) -> ToolCall:
    obj = expect_object(item, path)
    function = obj.get("function")
    if function is None:
        raise malformed(path, 'missing "function"')
    return _function(expect_object(function, f"{path}.function"), obj, path, mint, position)


def _function(
    function: Mapping[str, Any], origin: Mapping[str, Any], path: str, mint: IdMinter, at: str
) -> ToolCall:
    """A call from its `{name, arguments}`; `origin` is the object holding its `id`, if any."""
    fn_path = path if function is origin else f"{path}.function"
    name = required_str(function, "name", fn_path)
    arguments, raw = parse_arguments(function.get("arguments"))
    call_id = optional_str(origin, "id", path) if function is not origin else None
    return ToolCall(call_id or mint(f"call_{at}"), name, arguments, raw, origin=origin)


def _assistant(obj: Mapping[str, Any], path: str, mint: IdMinter, i: int) -> AssistantMessage:
    parts: list[AssistantPart] = list(read_reasoning(obj, path))
    parts.extend(_content_parts(obj.get("content"), f"{path}.content"))
    calls = obj.get("tool_calls")
    if calls is not None:
        for k, call in enumerate(expect_list(calls, f"{path}.tool_calls")):
            parts.append(_tool_call(call, f"{path}.tool_calls[{k}]", mint, f"{i}_{k}"))
    legacy = obj.get("function_call")
    if legacy is not None:
        function = expect_object(legacy, f"{path}.function_call")
        k = len(parts)
        parts.append(_function(function, function, f"{path}.function_call", mint, f"{i}_{k}"))
    return AssistantMessage(tuple(parts), origin=obj)


def _calls_by_id(calls: tuple[ToolCall, ...]) -> dict[str, ToolCall]:
    """`calls` by id, the first of a repeated id: what a result naming its call answers, looked
    up at once (a turn of 40,000 parallel calls took 10 s searched call by call)."""
    by_id: dict[str, ToolCall] = {}
    for call in calls:
        by_id.setdefault(call.id, call)
    return by_id


def _tool_result(
    obj: Mapping[str, Any],
    path: str,
    answers: tuple[ToolCall, ...],
    by_id: Mapping[str, ToolCall],
    k: int,
    mint: IdMinter,
    i: int,
) -> ToolResult:
    """The k-th tool message of a run: it names its call, or answers the k-th call by position."""
    call_id = optional_str(obj, "tool_call_id", path)
    call = None
    if call_id is None:
        if k < len(answers):
            call = answers[k]
            call_id = call.id
        else:
            call_id = mint(f"result_{i}")  # answers nothing: an orphan result
    else:
        call = by_id.get(call_id)
    name = obj.get("name")
    if not isinstance(name, str):
        name = call.name if call is not None else None
    content = _content_parts(obj.get("content"), f"{path}.content")
    return ToolResult(call_id, content, name, origin=obj)


# ---------------------------------------------------------------------------------------------
# encode


def _encode_messages(
    messages: Sequence[Message],
    minted: frozenset[str],
    names: Mapping[str, str],
    form: ArgumentsForm | None = None,
) -> Iterator[Row]:
    """The messages written out, calls' arguments in `form` where it is set; one written
    fresh is called by its role's name in `names` (the row's own name for it), else by the
    role."""
    calls: tuple[ToolCall, ...] = ()  # the calls of the last assistant turn
    legacy: frozenset[str] = frozenset()  # those of them written as a legacy function_call
    for message in messages:
        if isinstance(message, SystemMessage):
            yield _named(_system_out(message), message.origin, names)
        elif isinstance(message, AssistantMessage):
            out, legacy = _assistant_out(message, minted, form)
            calls = message.tool_calls
            yield _named(out, message.origin, names)
        else:
            results = [p for p in message.content if isinstance(p, ToolResult)]
            for result, out in _results_out(results, calls, legacy, minted):
                yield _named(out, result.origin, names)
            others = [p for p in message.content if not isinstance(p, ToolResult)]
            if others or not results:
                yield _named(_user_out(message, others), message.origin, names)
            calls, legacy = (), frozenset()


def _named(out: Row, origin: Mapping[str, Any] | None, names: Mapping[str, str]) -> Row:
    if origin is None and out.get("role") in names:
        out["role"] = names[out["role"]]
    return out


def _content_out(parts: Sequence[UserPart | AssistantPart], was: Any, empty: Any) -> Any:
    """A `content` value for `parts`, in the shape the source had (`was`, MISSING when fresh):
    a list of parts stays a list, a string or null stays one; several texts join (SPEC R4)."""
    if isinstance(was, list) or any(isinstance(p, Media) for p in parts):
        return [_part_out(p) for p in parts]
    if not parts:
        return empty if was is MISSING else (None if was is None else "")
    return join_texts(p.text for p in parts if isinstance(p, Text))


def _part_out(part: UserPart | AssistantPart) -> Row:
    if isinstance(part, Text):
        if part.origin is None:
            return {"type": "text", "text": part.text}
        out = dict(part.origin)
        put(out, "refusal" if out.get("type") == "refusal" else "text", part.text)
        return out
    if isinstance(part, Media):
        type_ = _MEDIA_TYPES.get(part.kind)
        if type_ is None or part.data.get(type_) is None:
            type_ = part.kind
        return {"type": type_, **part.data}
    raise TypeError(f"{type(part).__name__} is not a content part")


def _system_out(message: SystemMessage) -> Row:
    if message.origin is None:
        return {"role": "system", "content": message.content}
    out = dict(message.origin)
    try:
        same = _system_text(out, "system") == message.content
    except DecodeError:
        same = False
    if not same:
        out["content"] = message.content
    return out


def _user_out(message: UserMessage, parts: Sequence[UserPart]) -> Row:
    if message.origin is None:
        return {"role": "user", "content": _content_out(parts, MISSING, "")}
    out = dict(message.origin)
    put(out, "content", _content_out(parts, out.get("content"), ""))
    return out


def _assistant_out(
    message: AssistantMessage, minted: frozenset[str], form: ArgumentsForm | None
) -> tuple[Row, frozenset[str]]:
    """The assistant message, and the ids of its calls written as a legacy `function_call`."""
    origin = message.origin
    content = [p for p in message.content if isinstance(p, Text | Media)]
    if origin is None:
        out: Row = {"role": "assistant", "content": _content_out(content, MISSING, None)}
    else:
        out = dict(origin)
        put(out, "content", _content_out(content, out.get("content"), None))

    write_reasoning(out, [p for p in message.content if isinstance(p, Reasoning)], origin)

    legacy_origin: Mapping[str, Any] | None = None
    if origin is not None:
        legacy_origin = origin.get("function_call")
    tool_calls: list[Row] = []
    function_call: Row | None = None
    for call in message.tool_calls:
        if legacy_origin is not None and call.origin is legacy_origin:
            function_call = dict(legacy_origin)
            put(function_call, "name", call.name)
            put(function_call, "arguments", _arguments_out(call, form))
        else:
            tool_calls.append(_call_out(call, minted, form))
    if tool_calls:
        out["tool_calls"] = tool_calls
    elif out.get("tool_calls"):
        del out["tool_calls"]
    if function_call is not None:
        out["function_call"] = function_call
    elif out.get("function_call") is not None:
        del out["function_call"]
    if legacy_origin is None:
        return out, frozenset()
    return out, frozenset(c.id for c in message.tool_calls if c.origin is legacy_origin)


def _arguments_out(call: ToolCall, form: ArgumentsForm | None) -> Any:
    if form == "object" and call.arguments is not None:
        return call.arguments
    if form == "string" and call.raw_arguments is None:
        return json.dumps(call.arguments, ensure_ascii=False)
    if call.raw_arguments is not None:
        return call.raw_arguments
    if call.origin is None:  # a fresh call: OpenAI writes its arguments as a JSON string
        return json.dumps(call.arguments, ensure_ascii=False)
    return call.arguments


def _call_out(call: ToolCall, minted: frozenset[str], form: ArgumentsForm | None) -> Row:
    if call.origin is None:
        out: Row = {} if call.id in minted else {"id": call.id}
        out["type"] = "function"
        out["function"] = {"name": call.name, "arguments": _arguments_out(call, form)}
        return out
    out = dict(call.origin)
    function = dict(out.get("function") or {})
    if call.id not in minted:
        put(out, "id", call.id)
    put(function, "name", call.name)
    put(function, "arguments", _arguments_out(call, form))
    out["function"] = function
    return out


def _writes_id(result: ToolResult, minted: frozenset[str]) -> bool:
    if result.origin is not None:
        return result.origin.get("tool_call_id") is not None
    return result.call not in minted


def _results_out(
    results: list[ToolResult],
    calls: tuple[ToolCall, ...],
    legacy: frozenset[str],
    minted: frozenset[str],
) -> Iterator[tuple[ToolResult, Row]]:
    if results and not any(_writes_id(r, minted) for r in results):
        # Written without ids, the results pair with the calls by position: put them in call
        # order (stable, so a run read from a row keeps its order; results of no call go last).
        order = {c.id: k for k, c in reversed(list(enumerate(calls)))}
        results = sorted(results, key=lambda r: order.get(r.call, len(calls)))
    for result in results:
        if result.origin is not None:
            out = dict(result.origin)
            if out.get("tool_call_id") is not None:
                put(out, "tool_call_id", result.call)
            put(out, "content", _content_out(result.content, out.get("content"), ""))
            yield result, out
        elif result.call in legacy:
            call = next(c for c in calls if c.id == result.call)
            yield (
                result,
                {
                    "role": "function",
                    "name": result.name or call.name,
                    "content": _content_out(result.content, MISSING, ""),
                },
            )
        else:
            out = {"role": "tool"}
            if result.call not in minted:
                out["tool_call_id"] = result.call
            elif result.name is not None:
                out["name"] = result.name  # what id-less rows (TRL, functionary) name results by
            out["content"] = _content_out(result.content, MISSING, "")
            yield result, out
