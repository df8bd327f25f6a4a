"""`--to FORMAT`: kept rows written in another conversation format, their declared tools in its
tools column, so that an agent trace becomes a training row in one step.

    >>> fmt = converting(get_format("anthropic"), "openai")
    >>> row = {"system": "Be brief.", "messages": [{"role": "user", "content": "Hi"},
    ...        {"role": "assistant", "content": "Hello."}]}
    >>> clean_row(row, fmt).row["messages"][0]
    {'role': 'system', 'content': 'Be brief.'}

A row is decoded with its own format, cleaned as any row is (`rows.clean_row`), and then
encoded with the target's encoder from its transcript alone (`without_origins`: the source's
objects are of another shape). The columns the source format reads (the conversation, `system`,
the declarations) are replaced by the target's; every other column stays as it was.

Nothing is lost silently: the written row is read back with the target's decoder and compared
with the transcript, part by part (`_parts`); a part that does not come back (reasoning into
ShareGPT, an image into a format of text) rejects the row as `lossy_conversion`. What the
comparison leaves aside, because a training row does not need it: call ids (ShareGPT mints
them from positions), the tool name a result carries, a result's error flag (OpenAI's and
ShareGPT's results have none: their text says what failed), Anthropic's thinking signatures,
where a user turn's results stand among its texts (OpenAI writes them first), and how texts
are split into parts (a format whose content is one string joins them with a blank line,
SPEC R4).

Every row takes the per-row path: rows the fast path settles are Arrow data in the input's
format, and each must become the target's. The written rows have a schema of their own
(`written_schema`): the input's other columns, then the target's conversation column and
`tools`, typed `json_` (Parquet's JSON type, which `datasets` decodes), since a conversation's
shape varies from row to row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa

from transcript_clean.errors import FormatError
from transcript_clean.formats.base import (
    Decoded,
    DecodeError,
    Format,
    Row,
    join_texts,
    without_origins,
)
from transcript_clean.formats.registry import get_format
from transcript_clean.model import (
    AssistantMessage,
    Encrypted,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
)
from transcript_clean.policy import Config
from transcript_clean.rows import RowResult, clean_row, mark_rejected
from transcript_clean.rules import Violation
from transcript_clean.rules._template import written_arguments
from transcript_clean.rules.lossy_conversion import CODE as LOSSY_CONVERSION
from transcript_clean.shapes import KINDS, ShapedFormat
from transcript_clean.sources import hidden_columns
from transcript_clean.sources.jsontypes import JSON

__all__ = [
    "TARGETS",
    "TOOLS_COLUMN",
    "ConvertingFormat",
    "ConvertingShapedFormat",
    "converting",
    "lossy",
    "tools_for",
]

TARGETS: Final = ("openai", "sharegpt", "anthropic", "rig")
"""The formats `--to` writes: those of training rows (a trace format is read, not written)."""

TOOLS_COLUMN: Final = "tools"
"""Where a written row's declared tools go, in every target format."""


class ConvertingFormat(Format):
    """`source`'s rows, cleaned, written in `target`'s format. Decodes as `source`; its `clean`
    is `rows.clean_row` with `source`, then the kept row written as `target`."""

    name = "convert"
    default_column = "messages"

    def __init__(self, source: Format, target: Format) -> None:
        super().__init__(source.column)
        self.source = source
        self.target = target
        self.tools_column = source.tools_column
        self.plain_text = source.plain_text
        self.agent_trace = source.agent_trace

    @property
    def declaring_columns(self) -> tuple[str, ...]:
        return self.source.declaring_columns

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        return self.source.decode(row)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        return self.source.encode(decoded, messages)

    def declared_tools(self, row: Mapping[str, Any]) -> Any:
        return self.source.declared_tools(row)

    def message_count(self, row: Mapping[str, Any]) -> int:
        return self.source.message_count(row)

    @property
    def replaced_columns(self) -> tuple[str, ...]:
        """The input columns a written row leaves out: those the source format reads."""
        own = (self.source.column, *self.source.side_columns, *self.source.declaring_columns)
        return tuple(dict.fromkeys(own))

    @property
    def part_names(self) -> tuple[str, ...]:
        """The written columns that hold messages: the target's conversation column."""
        return (self.target.column,)

    def written_columns(self) -> tuple[str, ...]:
        """The columns the target writes, in order."""
        return (*self.target.side_columns, *self.part_names, TOOLS_COLUMN)

    def written_schema(self, schema: pa.Schema) -> pa.Schema:
        """The schema of the rows written from rows of `schema`."""
        leave = {*self.replaced_columns, *self.written_columns(), *hidden_columns(schema)}
        fields = [f for f in schema if f.name not in leave]
        fields += [
            pa.field(name, pa.string() if name == "system" else JSON)
            for name in self.written_columns()
        ]
        return pa.schema(fields)

    def clean(self, row: Row, config: Config, *, trace: bool = False) -> RowResult | None:
        result = clean_row(row, self.source, config, trace=trace)
        if result.status == "rejected":
            return result
        target = self.target
        form = written_arguments(config)
        if form is not None:
            target = target.with_arguments(form) or target
        try:
            written, loss = self.written_result(result, row, target)
        except Exception as err:  # an encoder's bug must cost one row, not the run
            written, loss = None, f"cannot be written as {self.target.name}: {err}"
        if loss is not None or written is None:
            return lossy(result, loss or f"cannot be written as {self.target.name}")
        result.row = written
        result.messages_out = sum(
            len(value)
            for value in (written.get(name) for name in self.part_names)
            if isinstance(value, list)
        )
        return result

    def written_result(
        self, result: RowResult, row: Row, target: Format
    ) -> tuple[Row | None, str | None]:
        """The kept row of `result` (cleaned from `row`) written in `target`, or what it would
        lose."""
        assert result.decoded is not None and result.messages is not None
        return self.written(result.decoded, result.messages, row, target)

    def written(
        self,
        decoded: Decoded,
        messages: Sequence[Message],
        row: Mapping[str, Any],
        target: Format | None = None,
    ) -> tuple[Row | None, str | None]:
        """The row written in the target format (`target`: the same, writing calls' arguments
        in the form `--arguments-as` asks), or what it would lose."""
        target = target or self.target
        rest = {k: v for k, v in row.items() if k not in self.replaced_columns}
        fresh = Decoded(list(messages), rest, format=None)
        out = target.encode(fresh, messages)
        problem = self._declare(out, row, self.source)
        if problem is not None:
            return None, problem
        try:
            back = self.target.decode(out).messages
        except DecodeError as err:
            return None, f"written as {self.target.name}, the row does not read back: {err}"
        loss = _first_loss(messages, back)
        if loss is not None:
            return None, f"{loss} has no place in {self.target.name}"
        return out, None

    def _declare(self, out: Row, row: Mapping[str, Any], source: Format) -> str | None:
        """Puts the declarations `source` reads in `row` into `out`'s tools column, in the
        target's shape, and every written column not set yet as None; or says why they cannot
        be written."""
        entries = source.declaration_entries(row)
        if entries is None:
            entries = _entries(row, source.declaring_columns)
        tools, problem = tools_for(self.target.name, entries)
        if problem is not None:
            return problem
        out[TOOLS_COLUMN] = tools
        for name in self.written_columns():
            out.setdefault(name, None)
        return None

    def __repr__(self) -> str:
        return f"ConvertingFormat({self.source!r} -> {self.target.name})"


class ConvertingShapedFormat(ConvertingFormat):
    """Rows of a dataset type (`shapes.ShapedFormat`), cleaned, written in `target`'s format in
    TRL's layout of that type: `prompt` and the candidates (`chosen` / `rejected`, or
    `completion`), each a list of the target's messages, the declared tools in `tools`, the
    label and every other column as they were. A part whose column holds a string (TRL's
    standard rows) is written as messages: that is the conversion a trainer wants of them.

    Each candidate is encoded after the prompt, as one conversation (a result in the candidate
    may answer a call in the prompt), and cut where the prompt's own encoding ends; a candidate
    whose encoding would change the prompt, or a part that does not read back, rejects the row
    as `lossy_conversion`."""

    def __init__(self, source: ShapedFormat, target: Format) -> None:
        super().__init__(source, target)
        shape = source.shape
        names = _TRL_NAMES.get(shape.kind, KINDS[shape.kind].candidates)
        if shape.prompt is None and shape.kind == "unpaired":
            names = ()  # KTO rows of one conversation: no TRL name fits a whole conversation
        own = tuple(path.rsplit(".", 1)[-1] for path in shape.candidates)
        self._parts = (("prompt",) if shape.prompt is not None else ()) + (
            names if len(names) == len(own) else own
        )

    @property
    def shaped(self) -> ShapedFormat:
        """The source, a dataset type's format."""
        assert isinstance(self.source, ShapedFormat)
        return self.source

    @property
    def part_names(self) -> tuple[str, ...]:
        """The written columns of the prompt (if any) and of each candidate, in order."""
        return self._parts

    @property
    def replaced_columns(self) -> tuple[str, ...]:
        inner = self.shaped.inner
        own = (*self.shaped.shape.columns, *inner.side_columns, *inner.declaring_columns)
        return tuple(dict.fromkeys(own))

    def written_result(
        self, result: RowResult, row: Row, target: Format
    ) -> tuple[Row | None, str | None]:
        try:
            return self.written_parts(result.row if result.row is not None else row, target)
        except DecodeError as err:  # the cleaned parts no longer read as one conversation
            return None, f"cannot be read for {self.target.name}: {err}"

    def written_parts(self, row: Row, target: Format) -> tuple[Row | None, str | None]:
        """The row's parts written in `target`'s format (class doc), or what they would lose."""
        from transcript_clean.shapes.clean import conversation_row

        shaped, shape = self.shaped, self.shaped.shape
        inner = shaped.inner
        prompt: list[Message] = []
        if shape.prompt is not None:
            prompt = list(inner.decode(conversation_row(row, shaped, None, strict=True)).messages)
        wholes = [
            list(inner.decode(conversation_row(row, shaped, k, strict=True)).messages)
            for k in range(len(shape.candidates))
        ]
        bare = without_origins(prompt)
        for k, whole in enumerate(wholes):
            if without_origins(whole[: len(prompt)]) != bare:
                return None, f"{shape.candidates[k]}: the prompt does not read the same before it"

        def encoded(messages: list[Message]) -> Row:
            return target.encode(Decoded(list(messages), {}, format=None), messages)

        out: Row = {k: v for k, v in row.items() if k not in self.replaced_columns}
        side: dict[str, Any] | None = None
        written_prompt: list[Any] = []
        if shape.prompt is not None:
            first = encoded(prompt)
            written_prompt = list(first[target.column] or [])
            side = {name: first.get(name) for name in target.side_columns}
            out[self.part_names[0]] = written_prompt
        names = self.part_names[len(self.part_names) - len(wholes) :]
        for k, whole in enumerate(wholes):
            both = encoded(whole)
            messages = list(both[target.column] or [])
            here = {name: both.get(name) for name in target.side_columns}
            if messages[: len(written_prompt)] != written_prompt or (
                side is not None and here != side
            ):
                return None, f"{shape.candidates[k]}: written after the prompt, it changes it"
            side = here if side is None else side
            back = self.target.decode({**here, self.target.column: messages}).messages
            loss = _first_loss(whole, back)
            if loss is not None:
                return None, f"{shape.candidates[k]}: {loss} has no place in {self.target.name}"
            out[names[k]] = messages[len(written_prompt) :]
        if not wholes:  # a prompt-only row: the prompt is the conversation read back
            alone = self.target.decode({**(side or {}), self.target.column: written_prompt})
            loss = _first_loss(prompt, alone.messages)
            if loss is not None:
                return None, f"{loss} has no place in {self.target.name}"
        out.update(side or {})
        problem = self._declare(out, conversation_row(row, shaped, 0 if wholes else None), inner)
        return (None, problem) if problem is not None else (out, None)

    def __repr__(self) -> str:
        return f"ConvertingShapedFormat({self.shaped!r} -> {self.target.name})"


_TRL_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    "openai-preference": KINDS["preference"].candidates,
}
"""TRL's names for the candidates of a type whose usual columns are not TRL's (`prompt` is
every type's prompt); every other type's candidates keep its usual names (`shapes.KINDS`)."""


def converting(source: Format, to: str) -> ConvertingFormat:
    """`source`'s rows written as the format named `to`; a dataset type's, in TRL's layout of
    it (`ConvertingShapedFormat`)."""
    if to not in TARGETS:
        raise FormatError(f"--to is one of {', '.join(TARGETS)}, not {to!r}")
    if isinstance(source, ShapedFormat):
        return ConvertingShapedFormat(source, get_format(to))
    return ConvertingFormat(source, get_format(to))


def lossy(result: RowResult, message: str) -> RowResult:
    """Reject a kept row that the target cannot hold (`lossy_conversion`)."""
    result.violations.append(Violation(LOSSY_CONVERSION, None, None, message))
    result.actions[LOSSY_CONVERSION] = "rejected"
    result.actions = mark_rejected(result.actions, [LOSSY_CONVERSION])
    result.status = "rejected"
    result.row = None
    result.messages_out = 0
    result.reject_message = message
    return result


# ---------------------------------------------------------------------------------------------
# declared tools


def _entries(row: Mapping[str, Any], columns: Sequence[str]) -> list[Any]:
    """The declarations the row holds, as a list of entries (JSON text parsed)."""
    for column in columns:
        value = row.get(column)
        if isinstance(value, str) and value.strip():
            try:
                value = json.loads(value)
            except ValueError:
                return [value]
        if isinstance(value, Mapping):
            return [value]
        if isinstance(value, list) and value:
            return value
    return []


def _spec(entry: Any) -> tuple[str, str | None, Any] | None:
    """(name, description, parameters) of one declaration in any provider's shape."""
    if not isinstance(entry, Mapping):
        return None
    inner = entry.get("function")
    if isinstance(inner, Mapping):
        entry = inner
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return None
    description = entry.get("description")
    parameters = entry.get("parameters", entry.get("input_schema"))
    return name, description if isinstance(description, str) else None, parameters


def tools_for(target: str, entries: list[Any]) -> tuple[Any, str | None]:
    """The declarations in `target`'s shape (None when there are none), or why they cannot be:
    OpenAI's `{type: function, function: {name, description, parameters}}` (what TRL reads),
    Anthropic's `{name, description, input_schema}`, rig's `{name, description, parameters}`,
    and for ShareGPT that list as JSON text (LLaMA-Factory's `tools`)."""
    if not entries:
        return None, None
    out = []
    for k, entry in enumerate(entries):
        spec = _spec(entry)
        if spec is None:
            return None, f"tools[{k}]: a declaration with no name has no place in {target}"
        name, description, parameters = spec
        plain: dict[str, Any] = {"name": name}
        if description is not None:
            plain["description"] = description
        if parameters is not None:
            plain["input_schema" if target == "anthropic" else "parameters"] = parameters
        out.append({"type": "function", "function": plain} if target == "openai" else plain)
    if target == "sharegpt":
        return json.dumps(out, ensure_ascii=False), None
    return out, None


# ---------------------------------------------------------------------------------------------
# what a conversion loses


def _parts(messages: Sequence[Message]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The transcript as the comparison sees it: runs of messages of one role, each a list of
    parts, adjacent texts joined (how texts are split is the format's, not the content's)."""
    runs: list[tuple[str, list[tuple[Any, ...]]]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            role, parts = "system", [("text", message.content)]
        else:
            role = "assistant" if isinstance(message, AssistantMessage) else "user"
            parts = [_part(p) for p in message.content]
        if runs and runs[-1][0] == role:
            runs[-1][1].extend(parts)
        else:
            runs.append((role, parts))
    for role, parts in runs:
        if role == "user":  # results answer calls; a format may write them before the texts
            parts.sort(key=lambda p: p[0] != "a tool result")
        joined: list[tuple[Any, ...]] = []
        for part in parts:
            if part[0] == "text" and joined and joined[-1][0] == "text":
                joined[-1] = ("text", join_texts([joined[-1][1], part[1]]))
            else:
                joined.append(part)
        parts[:] = [p for p in joined if p != ("text", "")]
    return runs


def _part(part: Any) -> tuple[Any, ...]:
    if isinstance(part, Text):
        return ("text", part.text)
    if isinstance(part, ToolCall):
        arguments = part.arguments if part.arguments is not None else part.raw_arguments
        return ("a tool call", part.name, json.dumps(arguments, sort_keys=True))
    if isinstance(part, ToolResult):
        texts = join_texts(p.text for p in part.content if isinstance(p, Text))
        media = tuple(p.kind for p in part.content if isinstance(p, Media))
        return ("a tool result", texts, media)
    if isinstance(part, Reasoning):
        texts = join_texts(p.text for p in part.content if isinstance(p, ReasoningText))
        sealed = tuple(p.data for p in part.content if isinstance(p, Encrypted))
        return ("reasoning", texts, sealed)
    if isinstance(part, Media):
        article = "an" if part.kind[:1] in "aeiou" else "a"
        return (f"{article} {part.kind} part", dict(part.data))
    return (type(part).__name__,)


def _first_loss(before: Sequence[Message], after: Sequence[Message]) -> str | None:
    """What of `before` does not come back in `after` (the first such part, in words); None
    when all of it does."""
    was, now = _parts(before), _parts(after)
    for k, (role, parts) in enumerate(was):
        other = now[k][1] if k < len(now) and now[k][0] == role else []
        for j, part in enumerate(parts):
            if j >= len(other) or other[j] != part:
                what = "a text" if part[0] == "text" else part[0]
                turn = {"system": "the system prompt", "user": "a user turn"}.get(role)
                return f"{what} in {turn or 'an assistant turn'}"
    if len(now) != len(was):
        return "the order of the turns"
    return None
