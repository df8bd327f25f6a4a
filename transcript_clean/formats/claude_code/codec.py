"""Claude Code sessions: a conversation as the events of one thread of a session file
(`sources/sessions.py` groups the lines into rows), in column `events`.

    {"sessionId": "s1", "thread": "u1", "sidechain": false, "lines": [2, 3, 4, 5],
     "events": [
        {"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s1",
         "message": {"role": "user", "content": "List the files."}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s1",
         "message": {"id": "msg_1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": "s1",
         "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
         "toolUseResult": {"stdout": "a.py"}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": "s1",
         "message": {"id": "msg_2", "role": "assistant", "content": [
            {"type": "text", "text": "One file: a.py."}]}}]}

Each `user` and `assistant` event's `message` is read as Anthropic's (text, `tool_use`,
`tool_result`, `thinking` blocks: `formats/anthropic`). Claude Code writes one line per content
block of a streamed answer, all with the same `message.id`: consecutive assistant events with
one id are one assistant message. Other events (`system`, `attachment`, progress) hold no
message and are passed over; they stay in the row as they came.

Written back (a repaired row), each message is one event: the first event it was read from,
with its `message.content` rewritten, so a message read from several lines becomes one line;
a message made by a repair (R5's result) is a new `user` event with no `uuid`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from transcript_clean.formats.anthropic.codec import (
    _assistant_parts,
    _blocks_out,
    _user_parts,
)
from transcript_clean.formats.base import (
    Decoded,
    Format,
    Row,
    expect_list,
    expect_object,
    join_texts,
    malformed,
    without_origins,
)
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Message,
    SystemMessage,
    Text,
    ToolCall,
    UserMessage,
    UserPart,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.arrays import Counts, Mask
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits, Merges

_MESSAGE_EVENTS = ("user", "assistant")


class ClaudeCodeFormat(Format):
    """The events of one Claude Code conversation (`events`): user / assistant messages in
    Anthropic's shape, other events passed over."""

    name = "claude-code"
    default_column = "events"
    joins_text = False
    tools_columns = ()
    agent_trace = True

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        messages: list[Message] = []
        answers: tuple[ToolCall, ...] = ()
        last_id: str | None = None
        for i, item in enumerate(expect_list(row[column], column)):
            path = f"{column}[{i}]"
            event = expect_object(item, path)
            if event.get("type") not in _MESSAGE_EVENTS or "message" not in event:
                continue
            message = expect_object(event["message"], f"{path}.message")
            content = message.get("content")
            if content is None:
                raise malformed(f"{path}.message", 'missing "content"')
            if event["type"] == "user":
                names = {c.id: c.name for c in answers}
                parts = _user_parts(content, f"{path}.message.content", names)
                messages.append(UserMessage(parts, origin=event))
                answers, last_id = (), None
                continue
            said = _assistant_parts(content, f"{path}.message.content")
            id_ = message.get("id") if isinstance(message.get("id"), str) else None
            previous = messages[-1] if messages else None
            if id_ is not None and id_ == last_id and isinstance(previous, AssistantMessage):
                # another content block of the same streamed answer
                merged = AssistantMessage((*previous.content, *said), origin=previous.origin)
                messages[-1] = merged
            else:
                messages.append(AssistantMessage(said, origin=event))
            answers = messages[-1].tool_calls  # type: ignore[union-attr]
            last_id = id_
        return Decoded(messages, dict(row), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """The `events` column flattened (`claude_code.flatten`): each message event's
        `message` read by Anthropic's flattener, a streamed answer's events one message."""
        from transcript_clean.formats.claude_code.flatten import flatten_claude_code

        return flatten_claude_code(column)

    writes_results = True

    def result_holders(
        self, column: pa.Array, conversations: Conversations, messages: Counts
    ) -> Mask | None:
        from transcript_clean.formats.claude_code.flatten import result_holders

        return result_holders(column, conversations, messages)

    def merges_join_texts(self, column: pa.Array) -> bool | None:
        """R4's merges append blocks: the joined message's blocks go to the first event of the
        message it is joined into. Where `message.content` is text (joined with blank lines,
        as the encoder writes it) they are the per-row path's."""
        from transcript_clean.formats.claude_code.flatten import content_blocks

        return False if content_blocks(column) else None

    def unmerged(
        self, column: pa.Array, conversations: Conversations, merges: Merges
    ) -> Mask | None:
        from transcript_clean.formats.claude_code.flatten import unmerged

        return unmerged(column, conversations, merges)

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """Messages dropped (R1, R5's cut), merged (R4) and R5's error results written as
        `encode` writes them (`claude_code.flatten.write_events`)."""
        from transcript_clean.formats.claude_code.flatten import write_events

        return write_events(column, edits)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        row[self.column] = _placed(_events(row.get(self.column)), [_event_out(m) for m in messages])
        return row


def _events(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _holds_message(event: Any) -> bool:
    return (
        isinstance(event, Mapping) and event.get("type") in _MESSAGE_EVENTS and "message" in event
    )


def _placed(original: list[Any], written: list[Row]) -> list[Any]:
    """`written` (the message events), each followed by the events holding no message that
    followed it in `original` (by its uuid); those before any message first, and those after
    a message no longer written (cut by a repair, merged into another) last."""
    after: dict[Any, list[Any]] = {}
    previous = None
    for event in original:
        if _holds_message(event):
            previous = event.get("uuid")
        else:
            after.setdefault(previous, []).append(event)
    out = list(after.pop(None, []))
    for event in written:
        out.append(event)
        out.extend(after.pop(event.get("uuid"), []))
    for rest in after.values():
        out.extend(rest)
    return out


def _event_out(message: Message) -> Row:
    if isinstance(message, SystemMessage):  # a session holds none; a conversion may bring one
        return {"type": "user", "message": {"role": "user", "content": message.content}}
    role = "user" if isinstance(message, UserMessage) else "assistant"
    parts: Sequence[UserPart | AssistantPart] = message.content
    origin = message.origin
    out: Row = dict(origin) if origin is not None else {"type": role}
    inner = out.get("message")
    body: Row = dict(inner) if isinstance(inner, Mapping) else {"role": role}
    was = body.get("content")
    if isinstance(was, str) and all(isinstance(p, Text) for p in parts):
        body["content"] = join_texts(p.text for p in parts if isinstance(p, Text))
    else:
        body["content"] = list(_blocks_out(parts, was))
    out["message"] = body
    return out
