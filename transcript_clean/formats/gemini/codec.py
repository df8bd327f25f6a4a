"""Gemini / Vertex AI `contents`: turns of `parts`, as the Gemini API takes them and Vertex AI's
supervised tuning files hold them.

    {"systemInstruction": {"parts": [{"text": "You are a weather bot."}]},
     "contents": [
        {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"result": "18 C"}}}]},
        {"role": "model", "parts": [{"text": "It is 18 C in Paris."}]}],
     "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {...}}]}]}

Roles: `user` (and the older `function`, for results) and `model`. Parts: `text` (with `thought:
true` the model's reasoning, its `thoughtSignature` kept), `functionCall {name, args, id?}` a call,
`functionResponse {name, response, id?}` its result, anything else (`inlineData`, `fileData`, ...)
media. The Python SDK's snake_case keys (`function_call`, `system_instruction`, ...) read the
same and are written back as they came. Calls without an `id` (the usual case) are answered by
position: the k-th response of a turn answers the k-th call of the model turn before, with ids
minted from positions as the OpenAI codec mints them, never written back. A response
`{"result": text}` (or `{"error": text}`, an error) is that text; any other response its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from transcript_clean.formats.base import (
    MISSING,
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
    put,
    required_str,
    unknown_role,
    without_origins,
)
from transcript_clean.jsontext import strict_loads
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    UserPart,
)
from transcript_clean.tools import Declared, read_declarations

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations

_SYSTEM_KEYS: Final = ("systemInstruction", "system_instruction")
_CALL_KEYS: Final = ("functionCall", "function_call")
_RESPONSE_KEYS: Final = ("functionResponse", "function_response")
_DECLARATION_KEYS: Final = ("functionDeclarations", "function_declarations")
_SIGNATURE_KEYS: Final = ("thoughtSignature", "thought_signature")


class GeminiFormat(Format):
    """`contents` of user / model turns of `parts`; `systemInstruction` and `tools` columns."""

    name = "gemini"
    default_column = "contents"
    side_columns = _SYSTEM_KEYS
    joins_text = False
    merged_field = "parts"
    words = (
        "Gemini contents: parts text / functionCall / functionResponse, calls paired by position"
    )

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        items = expect_list(row[column], column)
        mint = IdMinter(lambda: _real_ids(items))
        messages: list[Message] = []
        key = next((k for k in _SYSTEM_KEYS if row.get(k) is not None), None)
        if key is not None:
            messages.append(SystemMessage(_system_text(row[key], key), origin={key: row[key]}))
        answers: tuple[ToolCall, ...] = ()  # the calls of the last model turn
        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            # `role` is optional in Gemini's Content; a content without one is the user's, as
            # the API takes it (Vertex's own function-calling tuning example has such a
            # functionResponse turn).
            role = "user" if obj.get("role") is None else required_str(obj, "role", path)
            parts = expect_list(obj.get("parts"), f"{path}.parts")
            if role == "model":
                message = AssistantMessage(_model_parts(parts, path, i, mint), origin=obj)
                messages.append(message)
                answers = message.tool_calls
            elif role in ("user", "function"):
                messages.append(UserMessage(_user_parts(parts, path, answers, mint), origin=obj))
                answers = ()
            else:
                raise unknown_role(
                    f"{path}.role", f'unknown role "{role}"; expected user, model or function'
                )
        return Decoded(messages, dict(row), frozenset(mint.minted), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """The `contents` column and the system instruction flattened (`gemini.flatten`); None
        where the batch has tools in another layout."""
        from transcript_clean.formats.gemini.flatten import flatten_gemini, reads_schema

        if not reads_schema(schema, self.tools_column):
            return None
        return flatten_gemini(column, schema, side or {}, self.column)

    def declared_tools(self, row: Mapping[str, Any]) -> Declared | None:
        """`tools[].functionDeclarations`, each declaration's `parametersJsonSchema` or its
        `parameters` (Gemini's OpenAPI subset, whose upper-case types read as JSON Schema's)."""
        if self.tools_column is not None:
            return super().declared_tools(row)
        tools = row.get("tools")
        if tools is None or tools == []:
            return None
        found = _declarations(tools)
        if isinstance(found, str):
            return Declared({}, (found,))
        return read_declarations(found[0], "tools[].functionDeclarations")

    def declaration_entries(self, row: Mapping[str, Any]) -> list[Any] | None:
        """The declarations as `--to` writes them: each function declaration with its JSON
        Schema as `parameters`, then each `tools` entry that declares no function (a built-in
        tool such as `googleSearch`, which no other format can hold) as it is."""
        tools = row.get("tools")
        if self.tools_column is not None or tools is None:
            return None
        found = _declarations(tools)
        return None if isinstance(found, str) else found[0] + found[1]

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        systems = [m for m in messages if isinstance(m, SystemMessage)]
        if systems:
            text = join_texts(m.content for m in systems)
            origin = systems[0].origin or {}
            key = next(iter(origin), "systemInstruction")
            was = origin.get(key, MISSING)
            try:
                same = was is not MISSING and _system_text(was, key) == text
            except DecodeError:
                same = False
            if not same:
                out = dict(was) if isinstance(was, Mapping) else {}
                out["parts"] = [{"text": text}]
                row[key] = out
        calls: tuple[ToolCall, ...] = ()
        contents: list[Row] = []
        for message in messages:
            if isinstance(message, AssistantMessage):
                contents.append(_turn_out(message, "model", _model_out(message, decoded.minted)))
                calls = message.tool_calls
            elif isinstance(message, UserMessage):
                parts = list(_user_out(message.content, calls, decoded.minted))
                contents.append(_turn_out(message, "user", parts))
                calls = ()
        row[self.column] = contents
        return row


# ---------------------------------------------------------------------------------------------
# decode


def _get(part: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for key in keys:
        value = part.get(key)
        if value is not None:
            return key, value
    return None


def _real_ids(items: list[Any]) -> Iterator[str]:
    for item in items:
        parts = item.get("parts") if isinstance(item, Mapping) else None
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, Mapping):
                continue
            found = _get(part, _CALL_KEYS) or _get(part, _RESPONSE_KEYS)
            value = found[1] if found is not None else None
            if isinstance(value, Mapping) and isinstance(value.get("id"), str):
                yield value["id"]


def _system_text(value: object, key: str) -> str:
    if isinstance(value, str):
        return value
    obj = expect_object(value, key)
    texts = []
    for k, part in enumerate(expect_list(obj.get("parts"), f"{key}.parts")):
        path = f"{key}.parts[{k}]"
        texts.append(required_str(expect_object(part, path), "text", path))
    return join_texts(texts)


def _model_parts(parts: list[Any], path: str, i: int, mint: IdMinter) -> tuple[AssistantPart, ...]:
    out: list[AssistantPart] = []
    for k, item in enumerate(parts):
        part_path = f"{path}.parts[{k}]"
        part = expect_object(item, part_path)
        call = _get(part, _CALL_KEYS)
        if call is not None:
            key, value = call
            function = expect_object(value, f"{part_path}.{key}")
            name = required_str(function, "name", f"{part_path}.{key}")
            call_id = optional_str(function, "id", f"{part_path}.{key}")
            arguments = function.get("args")
            arguments = {} if arguments is None else arguments
            out.append(ToolCall(call_id or mint(f"call_{i}_{k}"), name, arguments, origin=part))
        elif part.get("text") is not None:
            text = required_str(part, "text", part_path)
            if part.get("thought") is True:
                signature = _get(part, _SIGNATURE_KEYS)
                sig = signature[1] if signature and isinstance(signature[1], str) else None
                out.append(Reasoning((ReasoningText(text),), signature=sig))
            else:
                out.append(Text(text, origin=part))
        else:
            out.append(_media(part))
    return tuple(out)


def _media(part: Mapping[str, Any]) -> Media:
    kind = next(iter(part), "part")
    return Media(kind, dict(part))


def _response_text(response: object) -> tuple[str, bool]:
    """A response's text, and whether it is an error."""
    if isinstance(response, Mapping) and len(response) == 1:
        ((key, value),) = response.items()
        if key in ("result", "error") and isinstance(value, str):
            return value, key == "error"
    if isinstance(response, str):
        return response, False
    return json.dumps(response, ensure_ascii=False), False


def _user_parts(
    parts: list[Any], path: str, answers: tuple[ToolCall, ...], mint: IdMinter
) -> tuple[UserPart, ...]:
    out: list[UserPart] = []
    k = 0  # responses so far: the k-th answers the k-th call
    for j, item in enumerate(parts):
        part_path = f"{path}.parts[{j}]"
        part = expect_object(item, part_path)
        found = _get(part, _RESPONSE_KEYS)
        if found is not None:
            key, value = found
            response = expect_object(value, f"{part_path}.{key}")
            name = optional_str(response, "name", f"{part_path}.{key}")
            call_id = optional_str(response, "id", f"{part_path}.{key}")
            if call_id is None:
                if k < len(answers):
                    call_id = answers[k].id
                    name = name or answers[k].name
                else:
                    call_id = mint(f"result_{path}_{j}")  # answers nothing: an orphan
            text, error = _response_text(response.get("response"))
            status: Literal["success", "error"] = "error" if error else "success"
            out.append(ToolResult(call_id, (Text(text),), name, status, origin=part))
            k += 1
        elif part.get("text") is not None:
            out.append(Text(required_str(part, "text", part_path), origin=part))
        else:
            out.append(_media(part))
    return tuple(out)


_GEMINI_TYPES: Final = frozenset(
    {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
)


def _declarations(tools: Any) -> tuple[list[Any], list[Any]] | str:
    """The function declarations of a `tools` list (as `_as_json_schema` gives them) and its
    entries that hold none; or what is wrong with it."""
    if not isinstance(tools, list):
        return "tools: expected a list"
    declarations: list[Any] = []
    others: list[Any] = []
    for entry in tools:
        if not isinstance(entry, Mapping):
            return "tools: expected a list of objects"
        found: Any = next((entry[k] for k in _DECLARATION_KEYS if entry.get(k) is not None), None)
        if found is None:
            others.append(entry)
        elif not isinstance(found, list):
            return "tools[].functionDeclarations: expected a list"
        else:
            declarations.extend(_as_json_schema(d) for d in found)
    return declarations, others


def _as_json_schema(declaration: Any) -> Any:
    """A function declaration with its JSON Schema as `parameters`: `parametersJsonSchema`
    when given, else `parameters` with Gemini's upper-case type names lowered."""
    if not isinstance(declaration, Mapping):
        return declaration
    out = dict(declaration)
    for key in ("parametersJsonSchema", "parameters_json_schema"):
        if out.get(key) is not None:
            out["parameters"] = out.pop(key)
            return out
    if out.get("parameters") is not None:
        out["parameters"] = _lowered(out["parameters"])
    return out


def _lowered(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_lowered(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _lowered(v) for k, v in schema.items()}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _GEMINI_TYPES:
        out["type"] = kind.lower()
    return out


# ---------------------------------------------------------------------------------------------
# encode


def _turn_out(message: UserMessage | AssistantMessage, role: str, parts: list[Row]) -> Row:
    if message.origin is None:
        return {"role": role, "parts": parts}
    out = dict(message.origin)
    out["parts"] = parts
    return out


def _model_out(message: AssistantMessage, minted: frozenset[str]) -> list[Row]:
    # A reasoning part has no origin of its own: the k-th is written over the k-th thought part
    # of the source, so that the keys it does not use come back too.
    was = message.origin.get("parts") if message.origin is not None else None
    templates = [
        p
        for p in (was if isinstance(was, list) else ())
        if isinstance(p, Mapping) and p.get("thought") is True
    ]
    out: list[Row] = []
    for part in message.content:
        if isinstance(part, Text):
            text = dict(part.origin) if part.origin is not None else {}
            put(text, "text", part.text)
            out.append(text)
        elif isinstance(part, ToolCall):
            out.append(_call_out(part, minted))
        elif isinstance(part, Reasoning):
            template = templates.pop(0) if templates else None
            thought = dict(template) if template is not None else {}
            texts = (p.text for p in part.content if isinstance(p, ReasoningText))
            put(thought, "text", join_texts(texts))
            thought["thought"] = True
            if part.signature is not None:
                key = next((k for k in _SIGNATURE_KEYS if k in thought), _SIGNATURE_KEYS[0])
                put(thought, key, part.signature)
            out.append(thought)
        else:
            out.append(dict(part.data))
    return out


def _call_out(call: ToolCall, minted: frozenset[str]) -> Row:
    arguments = call.arguments
    if arguments is None:  # raw arguments that never parsed: Gemini's args are an object
        arguments = {}
    if call.origin is None:
        function: Row = {"name": call.name, "args": arguments}
        if call.id not in minted:
            function["id"] = call.id
        return {"functionCall": function}
    out = dict(call.origin)
    key, value = _get(out, _CALL_KEYS) or (_CALL_KEYS[0], {})
    function = dict(value)
    put(function, "name", call.name)
    put(function, "args", arguments)
    if call.id not in minted:
        put(function, "id", call.id)
    out[key] = function
    return out


def _response_out(result: ToolResult) -> Any:
    text = join_texts(p.text for p in result.content if isinstance(p, Text))
    if result.status == "error":
        return {"error": text}
    try:
        value = strict_loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and not (
        len(value) == 1 and next(iter(value)) in ("result", "error")
    ):
        return value
    return {"result": text}


def _user_out(
    parts: Sequence[UserPart], calls: tuple[ToolCall, ...], minted: frozenset[str]
) -> Iterator[Row]:
    results = [p for p in parts if isinstance(p, ToolResult)]
    if results and all(r.call in minted or r.origin is None for r in results):
        # Written without ids, the results pair with the calls by position: put them in call
        # order (stable; results of no call go last), first when that moves any.
        order = {c.id: k for k, c in reversed(list(enumerate(calls)))}
        ordered = sorted(results, key=lambda r: order.get(r.call, len(calls)))
        if ordered != results or any(r.origin is None for r in results):
            # responses first, as a tool-calling loop sends them
            parts = [*ordered, *(p for p in parts if not isinstance(p, ToolResult))]
    for part in parts:
        if isinstance(part, Text):
            text = dict(part.origin) if part.origin is not None else {}
            put(text, "text", part.text)
            yield text
        elif isinstance(part, ToolResult):
            yield _result_out(part, minted)
        else:
            yield dict(part.data)


def _result_out(result: ToolResult, minted: frozenset[str]) -> Row:
    if result.origin is None:
        response: Row = {"name": result.name or "", "response": _response_out(result)}
        if result.call not in minted:
            response["id"] = result.call
        return {"functionResponse": response}
    out = dict(result.origin)
    key, value = _get(out, _RESPONSE_KEYS) or (_RESPONSE_KEYS[0], {})
    response = dict(value)
    text, error = _response_text(response.get("response"))
    status = "error" if error else "success"
    if result.content != (Text(text),) or result.status != status:
        response["response"] = _response_out(result)
    if result.name is not None:
        put(response, "name", result.name)
    if response.get("id") is not None:
        put(response, "id", result.call)
    out[key] = response
    return out
