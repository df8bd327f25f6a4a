"""`explain`: one row's canonical transcript, its violations and what each repair did."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

import pyarrow as pa

from transcript_clean.errors import SourceError
from transcript_clean.formats.base import Format, Row
from transcript_clean.markdown import printable
from transcript_clean.model import (
    AssistantMessage,
    Encrypted,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
)
from transcript_clean.pipeline import clean_stored_row, not_utf8, stored_as_json
from transcript_clean.policy import Config, for_format, interrupted_words
from transcript_clean.rows import RepairStep, RowResult, rejected_row
from transcript_clean.rules import MALFORMED_ROW, UNANSWERED_TOOL_CALL
from transcript_clean.shapes import ShapedFormat
from transcript_clean.sources import LINE_ERROR, RAW_LINE, Source
from transcript_clean.sources.jsontypes import loads
from transcript_clean.utf8 import invalid_text, python_rows

__all__ = [
    "Explanation",
    "explain_row",
    "render_explanation",
    "render_message",
    "render_transcript",
]

SHORT = 80


@dataclass(slots=True)
class Explanation:
    source: str
    row_number: int
    format: str
    row: Row
    result: RowResult
    transcripts: list[tuple[str, list[Message]]] = field(default_factory=list)
    """A dataset type's row: each conversation checked (the prompt and each candidate, as far
    as the cleaner went), by its title; empty: the one transcript of `result`."""
    rendered: list[str] = field(default_factory=list)
    """With a chat template: the transcript as written, rendered (`templates.view`)."""
    interrupted: str = ""
    """How R5 repairs an unanswered call in this run, in words (`policy.interrupted_words`)."""


def read_row(source: Source, number: int) -> tuple[Row, str | None]:
    """Row `number` (from 0, across the source's parts in order) as Python values, and where
    its first text that is not UTF-8 is, if any (the row then holds it mended, as rejects do)."""
    if number < 0:
        raise SourceError(f"{source.name}: row numbers start at 0, got {number}")
    offset = 0
    for part in source.parts():
        if part.num_rows is not None and number >= offset + part.num_rows:
            offset += part.num_rows
            continue
        for batch in source.read(part, number - offset, number - offset + 1, 1):
            if batch.num_rows:
                table = pa.Table.from_batches([batch])
                return python_rows(table)[0], invalid_text(table).get(0)
        break
    raise SourceError(f"{source.name}: there is no row {number} (it has {offset} rows)")


def explain_row(source: Source, number: int, fmt: Format, config: Config) -> Explanation:
    config = for_format(config, fmt)
    how = interrupted_words(config.interrupted_call, fmt)
    row, not_utf8_at = read_row(source, number)
    # A JSON Lines row is read as the cleaner reads it: from its line, or rejected with why
    # its line is no row.
    line_error, raw = row.pop(LINE_ERROR, None), row.pop(RAW_LINE, None)
    if line_error is not None:
        result = rejected_row(MALFORMED_ROW, line_error)
    elif not_utf8_at is not None:
        result = not_utf8(row, fmt, not_utf8_at)
    else:
        as_json = stored_as_json(source.schema, fmt)
        row = row if raw is None else loads(raw)
        result = clean_stored_row(row, fmt, config, as_json=as_json, trace=True)
    # A dataset type's row says its type and parts (`sharegpt ranking rows: prompt ...`), and
    # shows each candidate after the prompt, as the cleaner checked them: a violation listed
    # may be in any of them.
    if not isinstance(fmt, ShapedFormat):
        rendered = _rendered(row, fmt, config, result)
        return Explanation(
            source.name, number, fmt.name, row, result, rendered=rendered, interrupted=how
        )
    return Explanation(
        source.name, number, fmt.describe(), row, result, _transcripts(fmt, result), interrupted=how
    )


def _rendered(row: Row, fmt: Format, config: Config, result: RowResult) -> list[str]:
    """The transcript as written (or as it was when rejected) rendered with the chat template,
    its trained spans marked; nothing without a template or a transcript."""
    if config.chat_template is None or result.messages is None or result.decoded is None:
        return []
    from transcript_clean.rows import declarations
    from transcript_clean.templates import check_transcript, load_template
    from transcript_clean.templates.view import render_view

    template = load_template(config.chat_template, config.tokenizer)
    arguments_as: Any = config.arguments_as
    checked = check_transcript(template, result.messages, declarations(row, fmt), arguments_as)
    return render_view(checked)


def _transcripts(fmt: ShapedFormat, result: RowResult) -> list[tuple[str, list[Message]]]:
    """The titled transcripts of a dataset type's row: prompt + each candidate checked (the
    prompt alone only when no candidate was: it is in each of theirs)."""
    prompt = fmt.shape.prompt
    checked = [(name, decoded.messages) for name, decoded in result.parts if name != prompt]
    if not checked or len(fmt.shape.paths) == 1:
        return []  # one conversation: shown as any row's
    what = "the prompt and `{}`" if prompt else "`{}`"
    return [(f"Canonical transcript ({what.format(name)})", msgs) for name, msgs in checked]


SHORT_LINES = 4
"""A text shows at most this many of its lines (and `SHORT` characters)."""


def _short(text: str, limit: int = SHORT) -> str:
    """`text` on one line (newlines as `\\n`), cut at `limit` characters."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut(text: str, limit: int = SHORT, lines: bool = False) -> str:
    """`text` cut at `limit` characters (and, as `lines`, `SHORT_LINES` lines)."""
    if lines and text.count("\n") >= SHORT_LINES:
        text = "\n".join(text.split("\n")[:SHORT_LINES]) + "…"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted(text: str, limit: int = SHORT, lines: bool = False) -> str:
    """`text` cut, in double quotes, escaped as JSON escapes it; as `lines`, its newlines stay
    line breaks, else they read `\\n` (once: escaped twice they would read as a backslash and
    an n)."""
    if not lines:
        return json.dumps(_cut(text, limit), ensure_ascii=False)
    cut = _cut(text, limit, lines=True).split("\n")
    return '"' + "\n".join(json.dumps(line, ensure_ascii=False)[1:-1] for line in cut) + '"'


def _part(part: Any, lines: bool) -> str:
    if isinstance(part, Text):
        return _quoted(part.text, lines=lines)
    if isinstance(part, ToolCall):
        args = part.raw_arguments if part.raw_arguments is not None else json.dumps(part.arguments)
        return f"call {part.id} {part.name}({_short(args, 60)})"
    if isinstance(part, ToolResult):
        text = " ".join(p.text for p in part.content if isinstance(p, Text))
        flag = " error" if part.status == "error" else ""
        return f"result{flag} {part.call}: {_quoted(text, 60, lines)}"
    if isinstance(part, Reasoning):
        pieces = [
            "encrypted"
            if isinstance(p, Encrypted)
            else (_cut(p.text, 40, lines=True) if lines else _short(p.text, 40))
            for p in part.content
        ]
        return f"reasoning({', '.join(pieces)})"
    if isinstance(part, Media):
        return f"<{part.kind}>"
    return repr(part)


def render_message(message: Message, lines: bool = False) -> str:
    """One message on one line: its role, then its parts. As `lines`, a text's line breaks are
    kept, its further lines starting under its first (what `explain` shows)."""
    if isinstance(message, SystemMessage):
        return _joined("system     ", [_quoted(message.content, lines=lines)])
    role = "assistant " if isinstance(message, AssistantMessage) else "user      "
    return _joined(f"{role} ", [_part(p, lines) for p in message.content] or ["(no parts)"])


def _joined(head: str, pieces: list[str], sep: str = " | ") -> str:
    """`head` and `pieces` on a line, each piece's further lines indented to start under the
    first character after its opening quote."""
    out, column = head, len(head)
    for k, piece in enumerate(pieces):
        if k:
            out, column = out + sep, column + len(sep)
        first, *rest = piece.split("\n")
        out += first
        if not rest:
            column += len(first)
            continue
        pad = " " * (column + first.find('"') + 1)
        out += "".join(f"\n{pad}{line}" for line in rest)
        column = len(pad) + len(rest[-1])
    return out


def _indented(head: str, text: str) -> str:
    """`head` before `text`, its further lines indented as far."""
    return head + text.replace("\n", "\n" + " " * len(head))


def render_transcript(messages: Sequence[Message], indent: str = "  ", lines: bool = False) -> str:
    """A message a line, with its index; as `lines`, a text's line breaks kept
    (`render_message`)."""
    return "\n".join(
        _indented(f"{indent}[{i}] ", render_message(m, lines)) for i, m in enumerate(messages)
    )


def render_change(step: RepairStep) -> list[str]:
    """The messages a repair removed (-) and added (+), with their indexes before and after."""
    before = [render_message(m, lines=True) for m in step.before]
    after = [render_message(m, lines=True) for m in step.after]
    lines = []
    matcher = SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lines += [_indented(f"  - [{i}] ", before[i]) for i in range(i1, i2)]
        lines += [_indented(f"  + [{j}] ", after[j]) for j in range(j1, j2)]
    return lines


def render_explanation(exp: Explanation) -> str:
    result = exp.result
    lines = [f"{exp.source} row {exp.row_number} (format {exp.format})", ""]
    if result.decoded is None:
        lines += ["The row cannot be decoded:", f"  {result.reject_message}", ""]
    else:
        shown = exp.transcripts or [("Canonical transcript", result.decoded.messages)]
        for title, messages in shown:
            lines += [f"{title}:", render_transcript(messages, lines=True), ""]
    if result.violations:
        lines.append("Violations:")
        for v in result.violations:
            action = result.actions.get(v.code, "")
            lines.append(f"  {v.code:<24} {action:<9} {v.message}")
        lines.append("")
    else:
        lines += ["No violations.", ""]
    for step in result.steps:
        lines.append(f"Repair {step.code} (- before, + after):")
        if step.code == UNANSWERED_TOOL_CALL and exp.interrupted:
            lines += textwrap.wrap(
                exp.interrupted, 99, initial_indent="  how: ", subsequent_indent=" " * 7
            )
        lines += [*render_change(step), ""]
    if exp.rendered:
        lines += [*exp.rendered, ""]
    outcome = {
        "unchanged": "kept unchanged",
        "repaired": "kept, repaired",
        "rejected": f"rejected: {result.reject_message}",
    }[result.status]
    lines.append(f"Outcome: {outcome}")
    return printable("\n".join(lines))
