"""OpenHands trajectories: a conversation as the event stream an OpenHands agent saved (a
trajectory file's list of events, a resolver `output.jsonl` row's `history`), in column
`history`.

    {"history": [
        {"id": 0, "source": "user", "action": "message",
         "args": {"content": "Rename game.py to 2048.py"}},
        {"id": 3, "source": "agent", "action": "run",
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "toolu_1",
            "model_response": {"id": "chatcmpl-1", "choices": [{"message": {
                "content": "I'll rename it.", "role": "assistant",
                "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
                    "name": "execute_bash", "arguments": "{\\"command\\": \\"mv ...\\"}"}}]}}]}},
         "args": {"command": "mv game.py 2048.py", "thought": "I'll rename it."}},
        {"id": 4, "source": "agent", "observation": "run", "cause": 3, "content": "",
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "toolu_1"}},
        {"id": 5, "source": "agent", "action": "message", "args": {"content": "Done."}}]}

Read as OpenHands' agent loop put the events before the model (`ConversationMemory`):
- a `system` action is the system message (`args.content`), its `args.tools` the declared tools;
- a `message` action is the user's (`source: user`) or the assistant's message (`args.content`,
  its `args.image_urls` images);
- an action with `tool_call_metadata` is a call of the model's response: its `tool_call_id`,
  `function_name` and the arguments the response's `tool_calls` gave it; the actions of one
  response (one `model_response.id`) are one assistant message, which opens with the response's
  text (and its `reasoning_content`);
- an observation is the result of the call it answers: its `tool_call_metadata.tool_call_id`,
  else the call of the action its `cause` names; its `content` is the result's text (an `error`
  observation an error result); consecutive results are one user message;
- the agent's bookkeeping (`change_agent_state`, `recall` and `condensation` actions; `null`,
  `agent_state_changed`, `recall` observations, and `null` ones answering no call) holds no
  message and is passed over, kept in the row;
- any other event (an agent action with no `tool_call_metadata`, an observation that answers no
  call) has no place in a conversation: the row is `malformed_row`, naming it, never a silent
  loss.

Written back (a repaired row), each message's parts are written as the events they were read
from; a result made by a repair (R5's) is a new `error` observation after the call's action,
and every event holding no message stays after the event it followed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from transcript_clean.formats.base import (
    Decoded,
    Format,
    Row,
    expect_list,
    expect_object,
    join_texts,
    kind_of,
    malformed,
    parse_arguments,
    read_reasoning,
    required_str,
    without_origins,
)
from transcript_clean.formats.openhands.events import (
    PASSED_ACTIONS,
    PASSED_OBSERVATIONS,
    result_event,
)
from transcript_clean.model import (
    AssistantMessage,
    Media,
    Message,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.tools import Declared, read_declarations, read_row_declarations

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.arrays import Counts, Mask
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits, Merges


class OpenHandsFormat(Format):
    """The events of one OpenHands trajectory (`history`): actions and observations."""

    name = "openhands"
    default_column = "history"
    joins_text = False
    agent_trace = True
    reads_json_leaves = True  # (a JSON file's `args.outputs: {}` is one, in every `finish`)
    words = "OpenHands events: actions with tool_call_metadata as calls, observations as results"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        reader = _Reader()
        for i, item in enumerate(expect_list(row[column], column)):
            reader.event(expect_object(item, f"{column}[{i}]"), f"{column}[{i}]")
        return Decoded(reader.close(), dict(row), format=self.name)

    def declared_tools(self, row: Mapping[str, Any]) -> Declared | None:
        """A `tools` column, else the `system` action's `args.tools` (OpenAI's shape)."""
        declared = super().declared_tools(row)
        if declared is not None or self.tools_column is not None:
            return declared
        tools = self.declaration_entries(row)
        return read_declarations(tools, f"{self.column}[].args.tools") if tools else None

    def declaration_entries(self, row: Mapping[str, Any]) -> list[Any] | None:
        """The `system` action's `args.tools`, where the row has no `tools` column of its own."""
        if self.tools_column is not None or read_row_declarations(row, self.tools_columns):
            return None
        events = row.get(self.column)
        for event in events if isinstance(events, list) else ():
            if isinstance(event, Mapping) and event.get("action") == "system":
                args = event.get("args")
                tools = args.get("tools") if isinstance(args, Mapping) else None
                if isinstance(tools, list) and tools:
                    return tools
        return None

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """The events column flattened (`openhands.flatten`); the `system` action's tools read
        as declarations unless `--tools-column` names where they are."""
        from transcript_clean.formats.openhands.flatten import flatten_openhands

        return flatten_openhands(column, declarations=self.tools_column is None)

    writes_results = True

    def result_holders(
        self, column: pa.Array, conversations: Conversations, messages: Counts
    ) -> Mask | None:
        from transcript_clean.formats.openhands.flatten import result_holders

        return result_holders(column, conversations, messages)

    def merges_join_texts(self, column: pa.Array) -> bool | None:
        """R4's merges join texts: the message action others are joined into holds the joined
        text in `args.content` and `message` (`openhands.flatten.merges_written`)."""
        from transcript_clean.formats.openhands.flatten import merges_written

        return True if merges_written(column) else None

    def unmerged(
        self, column: pa.Array, conversations: Conversations, merges: Merges
    ) -> Mask | None:
        from transcript_clean.formats.openhands.flatten import unmerged

        return unmerged(column, conversations, merges)

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """Messages dropped (R1, R5's cut) and R5's error results written as `encode` writes
        them (`openhands.flatten.write_openhands`)."""
        if edits.conversations.item_message is None:
            return None
        from transcript_clean.formats.openhands.flatten import write_openhands

        return write_openhands(column, edits)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        original = row.get(self.column)
        events = original if isinstance(original, list) else []
        row[self.column] = _placed(events, _events_out(messages))
        return row


# ---------------------------------------------------------------------------------------------
# decode


class _Reader:
    __slots__ = ("_calls", "_id_of", "_parts", "_response", "_role", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._role: str | None = None  # "assistant" or "results": the message being gathered
        self._parts: list[Any] = []
        self._response: Any = None  # the model response the assistant message is read from
        self._calls: dict[str, ToolCall] = {}  # every call so far, by id
        self._id_of: dict[Any, str] = {}  # an action's event id -> its call's id

    def event(self, event: Mapping[str, Any], path: str) -> None:
        # (a key with a null value is none: Arrow gives every event every key of the column)
        for key in ("action", "observation"):
            if event.get(key) is not None and not isinstance(event[key], str):
                raise malformed(f"{path}.{key}", f"expected a string, got {kind_of(event[key])}")
        for key in ("id", "cause"):
            if event.get(key) is not None and not isinstance(event[key], int | str):
                raise malformed(f"{path}.{key}", f"expected a number, got {kind_of(event[key])}")
        if event.get("action") is not None:
            self._action(event, path)
        elif event.get("observation") is not None:
            self._observation(event, path)
        else:
            raise malformed(path, 'an event with neither "action" nor "observation"')

    def _action(self, event: Mapping[str, Any], path: str) -> None:
        action = event["action"]
        args = event.get("args") or {}
        if not isinstance(args, Mapping):
            raise malformed(f"{path}.args", f"expected an object, got {kind_of(args)}")
        metadata = event.get("tool_call_metadata")
        if metadata is not None:
            self._call(event, expect_object(metadata, f"{path}.tool_call_metadata"), path)
        elif action == "system":
            self._close()
            content = _first(args.get("content"), event.get("message"))
            if not isinstance(content, str):
                raise malformed(f"{path}.args.content", "expected a string")
            self.messages.append(SystemMessage(content, origin=event))
        elif action == "message":
            parts = _message_parts(event, args, path)
            self._close()
            if event.get("source") == "user":
                self.messages.append(UserMessage(tuple(parts), origin=event))
            else:
                self.messages.append(AssistantMessage(tuple(parts), origin=event))
        elif action not in PASSED_ACTIONS:
            raise malformed(
                path,
                f'a "{action}" action without tool_call_metadata: no call of the model, so it '
                "has no place in the conversation",
            )

    def _call(self, event: Mapping[str, Any], metadata: Mapping[str, Any], path: str) -> None:
        meta_path = f"{path}.tool_call_metadata"
        call_id = required_str(metadata, "tool_call_id", meta_path)
        name = required_str(metadata, "function_name", meta_path)
        response = metadata.get("model_response")
        message = _response_message(response, meta_path)
        found = next(
            (
                c
                for c in (message or {}).get("tool_calls") or ()
                if isinstance(c, Mapping) and c.get("id") == call_id
            ),
            None,
        )
        if found is None:
            raise malformed(meta_path, f'the model response holds no call "{call_id}"')
        function = expect_object(found.get("function"), f"{meta_path}.model_response...function")
        arguments, raw = parse_arguments(function.get("arguments"))
        response_id = response.get("id") if isinstance(response, Mapping) else None
        if self._role != "assistant" or response_id is None or response_id != self._response:
            self._close()
            self._role, self._response = "assistant", response_id
            if message is not None:
                self._parts.extend(read_reasoning(message, f"{meta_path}.model_response"))
                content = message.get("content")
                if isinstance(content, str) and content:
                    self._parts.append(Text(content, origin=event))
        call = ToolCall(call_id, name, arguments, raw, origin=event)
        self._parts.append(call)
        self._calls[call_id] = call
        if event.get("id") is not None:
            self._id_of[event["id"]] = call_id

    def _observation(self, event: Mapping[str, Any], path: str) -> None:
        observation = event["observation"]
        metadata = event.get("tool_call_metadata")
        call_id: str | None = None
        if metadata is not None:
            meta = expect_object(metadata, f"{path}.tool_call_metadata")
            call_id = required_str(meta, "tool_call_id", f"{path}.tool_call_metadata")
        elif event.get("cause") is not None:
            call_id = self._id_of.get(event["cause"])
        if call_id is None:
            if observation in PASSED_OBSERVATIONS:
                return
            raise malformed(
                path, f'a "{observation}" observation that answers no tool call has no place'
            )
        content = _first(event.get("content"), event.get("message"))
        if content is not None and not isinstance(content, str):
            raise malformed(f"{path}.content", f"expected a string, got {kind_of(content)}")
        call = self._calls.get(call_id)
        result = ToolResult(
            call_id,
            (Text(content or ""),),
            call.name if call is not None else None,
            "error" if observation == "error" else "success",
            origin=event,
        )
        if self._role != "results":
            self._close()
            self._role = "results"
        self._parts.append(result)

    def _close(self) -> None:
        if self._role == "assistant":
            self.messages.append(AssistantMessage(tuple(self._parts)))
        elif self._role == "results":
            self.messages.append(UserMessage(tuple(self._parts)))
        self._role, self._parts, self._response = None, [], None

    def close(self) -> list[Message]:
        self._close()
        return self.messages


def _first(value: Any, otherwise: Any) -> Any:
    return value if value is not None else otherwise


def _response_message(response: object, path: str) -> Mapping[str, Any] | None:
    """The assistant message of a model response (`choices[0].message`), if it has one."""
    if response is None:
        return None
    choices = expect_object(response, f"{path}.model_response").get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, Mapping) else None


def _message_parts(
    event: Mapping[str, Any], args: Mapping[str, Any], path: str
) -> list[Text | Media]:
    content = _first(args.get("content"), event.get("message"))
    if content is not None and not isinstance(content, str):
        raise malformed(f"{path}.args.content", f"expected a string, got {kind_of(content)}")
    parts: list[Text | Media] = [Text(content, origin=event)] if content else []
    images = args.get("image_urls")
    for k, url in enumerate(images if images is not None else ()):
        if not isinstance(url, str):
            raise malformed(f"{path}.args.image_urls[{k}]", "expected a string")
        parts.append(Media("image", {"image_url": url}))
    return parts


# ---------------------------------------------------------------------------------------------
# encode


def _events_out(messages: Sequence[Message]) -> list[tuple[Row, Any]]:
    """The events that hold the messages' parts, each once, in order, each with the source
    event it was written from (None for a new one)."""
    out: list[tuple[Row, Any]] = []
    seen: set[int] = set()
    actions: dict[str, Any] = {}  # each call's action event, by the call's id

    def add(event: Mapping[str, Any]) -> None:
        if id(event) not in seen:
            seen.add(id(event))
            out.append((dict(event), event))

    for message in messages:
        if isinstance(message, SystemMessage):
            if message.origin is not None and _system_text(message.origin) == message.content:
                add(message.origin)
            else:
                event = {
                    "source": "agent",
                    "action": "system",
                    "args": {"content": message.content},
                }
                out.append((event, message.origin))
            continue
        role = "user" if isinstance(message, UserMessage) else "agent"
        origin = message.origin
        if origin is not None and _message_parts_of(origin) == list(message.content):
            add(origin)
            continue
        if all(isinstance(p, Text | Media) for p in message.content):
            texts: list[Text | Media] = [p for p in message.content if isinstance(p, Text | Media)]
            out.append((_message_event(role, texts, origin), origin))
            continue
        parts: Sequence[Any] = message.content
        if isinstance(message, UserMessage):  # results first: right after the calls' actions
            parts = sorted(parts, key=lambda p: not isinstance(p, ToolResult))
        for part in parts:
            if isinstance(part, ToolCall):
                if part.origin is not None:
                    add(part.origin)
                    actions[part.id] = part.origin
                else:
                    out.append((_call_event(part), None))
            elif isinstance(part, ToolResult):
                if part.origin is not None and _same_result(part):
                    add(part.origin)
                else:
                    out.append((result_event(part, actions.get(part.call)), part.origin))
            elif isinstance(part, Text) and part.origin is not None:
                add(part.origin)  # the response's text (in its first call's event), a message's
            elif isinstance(part, Text | Media):
                out.append((_message_event(role, [part], None), None))
    return out


def _system_text(event: Mapping[str, Any]) -> Any:
    args = event.get("args")
    return args.get("content") if isinstance(args, Mapping) else None


def _message_parts_of(event: Mapping[str, Any]) -> list[Any] | None:
    try:
        args = event.get("args") or {}
        return list(_message_parts(event, args, "event"))
    except Exception:
        return None


def _message_event(role: str, parts: Sequence[Text | Media], origin: Any) -> Row:
    out: Row = dict(origin) if origin is not None else {}
    out.setdefault("source", role)
    out["action"] = "message"
    args = dict(out.get("args") or {})
    args["content"] = join_texts(p.text for p in parts if isinstance(p, Text))
    images = [p.data.get("image_url") for p in parts if isinstance(p, Media)]
    if images or args.get("image_urls") is not None:
        args["image_urls"] = images or None
    out["args"] = args
    if "message" in out:
        out["message"] = args["content"]
    return out


def _call_event(call: ToolCall) -> Row:
    arguments = call.raw_arguments
    if arguments is None:
        arguments = json.dumps(call.arguments, ensure_ascii=False)
    function = {"name": call.name, "arguments": arguments}
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": function}
    ]}  # fmt: skip
    return {
        "source": "agent",
        "action": call.name,
        "tool_call_metadata": {
            "function_name": call.name,
            "tool_call_id": call.id,
            "model_response": {"choices": [{"message": message}]},
        },
        "args": {},
    }


def _same_result(result: ToolResult) -> bool:
    origin = result.origin or {}
    content = _first(origin.get("content"), origin.get("message"))
    status = "error" if origin.get("observation") == "error" else "success"
    return result.content == (Text(content or ""),) and result.status == status


def _passed_over(events: list[Any]) -> list[bool]:
    """Per event, whether the decoder passed it over (the agent's bookkeeping)."""
    calls = {
        e.get("id")
        for e in events
        if isinstance(e, Mapping)
        and e.get("action") is not None
        and e.get("tool_call_metadata") is not None
        and isinstance(e.get("id"), int | str)
    }
    out = []
    for event in events:
        if not isinstance(event, Mapping) or event.get("tool_call_metadata") is not None:
            out.append(False)
        elif event.get("action") is not None:
            out.append(event["action"] in PASSED_ACTIONS)
        else:
            cause = event.get("cause")
            answers = isinstance(cause, int | str) and cause in calls
            out.append(not answers and event.get("observation") in PASSED_OBSERVATIONS)
    return out


def _placed(original: list[Any], written: list[tuple[Row, Any]]) -> list[Any]:
    """The written events, each followed by the events holding no message that followed its
    source event in `original`; those before any message first, and those after an event no
    longer written last."""
    after: dict[int, list[Any]] = {}
    previous = -1
    for k, (event, passed) in enumerate(zip(original, _passed_over(original), strict=True)):
        if passed:
            after.setdefault(previous, []).append(event)
        else:
            previous = k
    place = {id(e): k for k, e in enumerate(original)}
    out = list(after.pop(-1, []))
    for event, source in written:
        out.append(event)
        if source is not None and id(source) in place:
            out.extend(after.pop(place[id(source)], []))
    for rest in after.values():
        out.extend(rest)
    return out
