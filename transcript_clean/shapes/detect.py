"""Which dataset type rows are (`auto`), from the column names and the first rows' values.

The columns decide the type (TRL's and the providers' names: `prompt`, `completion`, `chosen`,
`rejected`, `label`, `input` + `preferred_output`); the first rows must hold conversations there
(lists of message objects, or one message object for a candidate) or the type does not apply.
The parts' format is then detected on the prompt followed by the first candidate.

One conversation column none of whose first rows holds an assistant turn is a prompt set (RL
fine-tuning: OpenAI's reinforcement fine-tuning files end each `messages` on a user turn and add
grader fields such as `reference_answer`): it reads as prompt-only rows (`prompt_set`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from transcript_clean.errors import FormatError
from transcript_clean.formats.base import MISSING, DecodeError, Format, kind_of
from transcript_clean.formats.registry import get_format
from transcript_clean.formats.text.hh import looks_like_hh
from transcript_clean.model import AssistantMessage
from transcript_clean.shapes import KINDS, Shape, ShapedFormat, make_shape
from transcript_clean.shapes.clean import get_path

__all__ = ["detect_format", "detect_shape", "prompt_set", "shaped_format", "types_tried"]

# Columns that hold a whole conversation in the one-column case, in the order they are tried.
_CONVERSATION_COLUMNS = ("messages", "conversations", "conversation", "chat", "dialog")

_PART = "__conversation__"  # the column the parts' format is detected on


def detect_format(
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    *,
    column: str | None = None,
    shaped: bool = True,
    source: str | None = None,
) -> Format:
    """The format (with its conversation column set) of a dataset with these columns, judged by
    its first rows; `column`: of the conversations in that column. Raises `FormatError` naming
    `source` (the file or dataset the rows come from), the columns and keys seen and the
    formats tried.

    Without `column`, and with `shaped`, rows of a dataset type (prompt and candidates) read as
    one (a `ShapedFormat`), and a prompt set as prompt-only rows; otherwise the conversation
    format (`formats.detect.detect_conversation_format`).
    """
    # Imported here: detection reads several codecs' names, which a named format never needs.
    from transcript_clean.formats.detect import (
        SAMPLE_ROWS,
        detect_conversation_format,
        json_decoded,
    )

    if column is not None or not shaped:
        return detect_conversation_format(columns, rows, column=column, source=source)
    sample = [json_decoded(row) for row in rows[:SAMPLE_ROWS]]
    shape = detect_shape(columns, sample)
    if shape is not None:
        return shaped_format(shape, columns, sample)
    try:
        found = detect_conversation_format(columns, rows, source=source)
    except FormatError as err:
        tried = types_tried(columns, sample)
        if not tried:
            raise
        *lines, advice = str(err).splitlines()
        said = "".join(f"\n    {t}" for t in tried)
        raise FormatError("\n".join([*lines, f"  dataset types tried:{said}", advice])) from err
    return prompt_set(found, columns, sample) or found


def _held(rows: Sequence[Mapping[str, Any]], path: str) -> str:
    """What the first row with a value at `path` holds there, in words."""
    for k, row in enumerate(rows):
        value = get_path(row, path)
        if value is MISSING or value is None:
            continue
        if isinstance(value, list) and all(isinstance(m, Mapping) for m in value):
            what = "a list of messages"
        elif isinstance(value, str):
            what = "a text" + ("" if looks_like_hh(value) else " with no Human: turn")
        else:
            what = kind_of(value)
        return f"row {k}: `{path}` holds {what}"
    return f"`{path}` holds nothing in the first {len(rows)} rows"


def types_tried(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """For detection's error: each dataset type whose usual columns the rows have, and what
    the first rows hold there (none of them fitted)."""
    out = []
    for kind in KINDS.values():
        paths = ((kind.prompt,) if kind.prompt else ()) + kind.candidates
        if len(paths) < 2 or not all(p.split(".", 1)[0] in columns for p in paths):
            continue
        out.append(f"{kind.name}: " + "; ".join(_held(rows, p) for p in paths))
    return out


def _holds_messages(rows: Sequence[Mapping[str, Any]], path: str, *, one: bool = False) -> bool:
    """Whether the rows hold messages at `path`: a list of objects (or, with `one`, an object
    with a role or a ShareGPT tag) in the first row that has a value there."""
    for row in rows:
        value = get_path(row, path)
        if value is MISSING or value is None:
            continue
        if one and isinstance(value, Mapping):
            return "role" in value or "from" in value
        return isinstance(value, list) and all(isinstance(m, Mapping) for m in value)
    return False


def _first(rows: Sequence[Mapping[str, Any]], path: str) -> Any:
    """The first value at `path` that is neither absent nor null (None if there is none)."""
    for row in rows:
        value = get_path(row, path)
        if value is not MISSING and value is not None:
            return value
    return None


def _texts(rows: Sequence[Mapping[str, Any]], *paths: str) -> bool:
    """Whether the rows hold plain strings at every path (TRL's standard rows)."""
    return all(isinstance(_first(rows, p), str) for p in paths)


def _transcripts(rows: Sequence[Mapping[str, Any]], *paths: str) -> bool:
    """Whether the rows hold texts of `Human:` / `Assistant:` turns at every path (hh-rlhf)."""
    return all(looks_like_hh(_first(rows, p)) for p in paths)


def _one_message(rows: Sequence[Mapping[str, Any]], column: str) -> bool:
    """Whether the first value in `column` is one message object rather than a list."""
    value = next((row.get(column) for row in rows if row.get(column) is not None), None)
    return isinstance(value, Mapping)


def _labels(rows: Sequence[Mapping[str, Any]], column: str) -> bool:
    values = [row.get(column) for row in rows]
    return bool(values) and all(v is None or isinstance(v, bool) for v in values)


def detect_shape(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Shape | None:
    """The dataset type of rows with these columns, or None for one conversation column."""
    names = set(columns)

    def conversations(*paths: str) -> bool:
        return all(_holds_messages(rows, p, one=p in ("chosen", "rejected")) for p in paths)

    if {"input", "preferred_output"} <= names and conversations("input.messages"):
        candidates = [c for c in ("preferred_output", "non_preferred_output") if c in names]
        return make_shape("openai-preference", columns, candidates=candidates)
    if {"chosen", "rejected"} <= names and _texts(rows, "chosen", "rejected"):
        # Strings: TRL's standard preference rows after a prompt, hh-rlhf's whole transcripts
        if "prompt" in names and (conversations("prompt") or _texts(rows, "prompt")):
            return make_shape("preference", columns)
        if _transcripts(rows, "chosen", "rejected"):
            return make_shape("implicit-preference", columns)
        return None
    if {"chosen", "rejected"} <= names and conversations("chosen", "rejected"):
        if "prompt" in names and conversations("prompt"):
            return make_shape("preference", columns)
        # LLaMA-Factory's ranking rows hold one turn per candidate after a conversation; whole
        # conversations as candidates are the implicit-prompt form, whatever else the row holds
        # (UltraFeedback's `messages` repeats `chosen`).
        prompt = next((c for c in _CONVERSATION_COLUMNS if c in names), None)
        if prompt is not None and conversations(prompt) and _one_message(rows, "chosen"):
            return make_shape("ranking", columns, prompt=prompt)
        return make_shape("implicit-preference", columns)
    if "prompt" in names and _texts(rows, "prompt"):
        # TRL's standard rows: a prompt and its completion are one conversation (the
        # `completion` format), with a label unpaired preference rows; a prompt alone (beside
        # columns that are no conversation, such as an answer) is a prompt set.
        if "completion" in names and _texts(rows, "completion"):
            labelled = "label" in names and _labels(rows, "label")
            return make_shape("unpaired", columns) if labelled else None
        others = [c for c in columns if c != "prompt" and conversations(c)]
        return None if others or "completion" in names else make_shape("prompt", columns)
    if "prompt" in names and conversations("prompt"):
        if "completion" in names and conversations("completion"):
            kind = "unpaired" if "label" in names and _labels(rows, "label") else None
            return make_shape(kind or "prompt-completion", columns)
        others = [c for c in columns if c != "prompt" and conversations(c)]
        if not others:
            return make_shape("prompt", columns)
        return None  # several conversation columns: the caller says so
    if "label" in names and _labels(rows, "label"):
        column = next((c for c in _CONVERSATION_COLUMNS if c in names and conversations(c)), None)
        if column is not None:
            return make_shape("unpaired", columns, candidates=[column], label="label")
    return None


def shaped_format(
    shape: Shape, columns: Sequence[str], rows: Sequence[Mapping[str, Any]], format: str = "auto"
) -> ShapedFormat:
    """`shape` read in `format` (detected on the prompt and first candidate when `auto`). Where
    the first row holds its parts as plain strings, they are read as texts (`Shape.texts`)."""
    first = rows[0] if rows else {}
    texts = any(isinstance(get_path(first, p), str) for p in shape.paths)
    if texts:
        shape = dataclasses.replace(shape, texts=True)
        if format not in ("auto", "openai", "hh"):
            raise FormatError(
                f"reading {shape.describe()}: the parts are plain strings, not {format} "
                "messages (name no format, or --format hh for texts of Human: / Assistant: turns)"
            )
        format = "openai" if format == "hh" else format  # texts are read as OpenAI messages
    if format != "auto":
        return _explained(ShapedFormat(get_format(format), shape))
    probe = ShapedFormat(get_format("openai", column=_PART), shape)
    from transcript_clean.formats.detect import detect_conversation_format
    from transcript_clean.shapes.clean import conversation_row

    sample = [conversation_row(row, probe, 0 if shape.candidates else None) for row in rows]
    others = [c for c in columns if c not in shape.columns and c != _PART]
    try:
        found = detect_conversation_format([_PART, *others], sample, column=_PART)
    except FormatError as err:
        # The probe column is ours: the user knows the parts by their own columns.
        joined = "the " + " + ".join(f"`{p}`" for p in shape.first_conversation)
        said = str(err).replace(f"column {_PART!r}", joined).replace(_PART, joined)
        raise FormatError(f"reading {shape.describe()}:\n{said}") from err
    inner: Format = copy.copy(found)
    inner.column = inner.default_column
    return _explained(ShapedFormat(inner, shape))


def _explained(shaped: ShapedFormat) -> ShapedFormat:
    """`shaped`, saying how it reads parts held as texts."""
    if shaped.shape.texts:
        shape = shaped.shape
        if shape.prompt is None:
            shaped.why = "each a text of Human: / Assistant: turns"
        elif not shape.candidates:
            shaped.why = "a string: the prompt a user turn"
        else:
            shaped.why = "strings: the prompt a user turn, each completion an assistant turn"
    return shaped


def prompt_set(
    fmt: Format, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> ShapedFormat | None:
    """Rows of `fmt`'s one conversation column read as prompt-only rows, when no row of the
    sample `rows` that decodes holds an assistant message (and one does decode); else None.
    Read as conversations, every such row would be rejected as `no_assistant_turn`."""
    decoded = 0
    for row in rows:
        try:
            messages = fmt.decode(row).messages
        except DecodeError:
            continue  # the cleaner rejects it, whatever the type
        if any(isinstance(m, AssistantMessage) for m in messages):
            return None
        decoded += 1
    if not decoded:
        return None
    inner: Format = copy.copy(fmt)
    inner.column = inner.default_column
    shaped = ShapedFormat(inner, make_shape("prompt", columns, prompt=fmt.column))
    shaped.why = (
        f"no assistant turn in its first {len(rows)} rows: a prompt set; --type conversation "
        "reads conversations"
    )
    return shaped
