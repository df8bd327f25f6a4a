"""Cleaning one row of a dataset type (`ShapedFormat`): the prompt once, then each candidate.

The prompt is cleaned first as a prompt-only conversation: it needs no assistant turn, and calls
pending at its end are its normal end (the candidates answer them). A repair there is made once
and every candidate is then checked after the repaired prompt, as prompt + candidate, with the
config as it is. A candidate's repair must leave the prompt as it was (it starts the repaired
conversation); one that would reach into the prompt makes the row a reject that says so. The row
is kept only when every part is; a code's message names the column it comes from
(`chosen: message 3: ...`, the index counting from the prompt's first message).

A part held as a plain string (TRL's standard rows, hh-rlhf's pairs) is read as OpenAI
messages (`part_messages`): a prompt's text is a user turn, a completion's an assistant turn,
and a whole conversation (a type with no prompt) a transcript of `Human:` / `Assistant:` turns.
A repaired string part is written back as a string, or the row is rejected saying why not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from transcript_clean.formats.base import MISSING, DecodeError, Row, join_texts
from transcript_clean.formats.text.hh import parse_hh, render_hh
from transcript_clean.policy import Config
from transcript_clean.rows import RowResult, Violation, clean_row, mark_rejected, rejected_row
from transcript_clean.rules import MALFORMED_ROW
from transcript_clean.shapes.shape import PROMPT_CODES, prompt_config

if TYPE_CHECKING:
    from transcript_clean.formats.base import Format
    from transcript_clean.shapes.shape import Shape


class Shaped(Protocol):
    """What cleaning a row of a dataset type reads of its format (`shapes.ShapedFormat`): the
    shape, and the conversation format of its parts."""

    shape: Shape
    inner: Format


__all__ = ["clean_shaped_row", "conversation_row", "part_messages"]

_ACTION_RANK = {"rejected": 3, "repaired": 2, "dropped": 1, "kept": 0, "present": 0}


def get_path(row: Mapping[str, Any], path: str) -> Any:
    """`row["input"]["messages"]` for `input.messages`; MISSING where a step is absent. A
    column stored as JSON text is read as its JSON."""
    value: Any = row
    for step in path.split("."):
        if isinstance(value, str):
            value = _parsed(value)
        if not isinstance(value, Mapping) or step not in value:
            return MISSING
        value = value[step]
    return _parsed(value) if isinstance(value, str) else value


def _parsed(text: str) -> Any:
    """A column stored as JSON text, read as its list or object; any other text is itself."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text  # the decoder says what is wrong with it
    return value if isinstance(value, list | Mapping) else text


def set_path(row: Row, path: str, value: Any) -> None:
    """Writes `value` at `path`, copying the objects on the way; a column stored as JSON text
    stays JSON text."""
    head, _, rest = path.partition(".")
    old = row.get(head)
    as_text = isinstance(old, str)
    if rest:
        inner = dict(_parsed(old) if isinstance(old, str) else old or {})
        set_path(inner, rest, value)
        value = inner
    row[head] = json.dumps(value, ensure_ascii=False) if as_text else value


def _messages(value: Any) -> list[Any] | Any:
    """A candidate as a list of messages: one message object is a list of one."""
    return [value] if isinstance(value, Mapping) else value


def part_messages(value: Any, shape: Shape, path: str) -> list[Any] | Any:
    """The part at `path` as a list of messages: one message object is a list of one; a text
    is OpenAI messages (module doc) where the shape's parts are texts. Raises `DecodeError`
    for a whole conversation's text that is no transcript of turns; any other value is left
    for the decoder to judge."""
    if not isinstance(value, str) or not shape.texts:
        return _messages(value)
    start = value.lstrip()
    if start.startswith("[") and start[1:].lstrip().startswith("{"):
        raise DecodeError(MALFORMED_ROW, path, "not valid JSON (a list of messages, cut short?)")
    if path == shape.prompt:
        return [{"role": "user", "content": value}]
    if shape.prompt is not None:
        return [{"role": "assistant", "content": value}]
    try:
        turns = parse_hh(value)
    except ValueError as err:
        raise DecodeError(MALFORMED_ROW, path, str(err)) from None
    return [{"role": role, "content": said} for role, said in turns]


def _as_text(messages: list[Any], shape: Shape, path: str, was: str) -> str | None:
    """Messages written by the OpenAI encoder as the text a string part holds (the inverse of
    `part_messages`), or None where a text cannot hold them."""
    turns = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            return None
        if any(v is not None for k, v in message.items() if k not in ("role", "content")):
            return None  # reasoning, calls: more than a text
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
                return None
            content = join_texts(str(p.get("text", "")) for p in content)
        if not isinstance(content, str):
            return None
        turns.append((message["role"], content))
    if shape.prompt is None and path != shape.prompt:  # a whole conversation: a transcript
        return render_hh(turns, lead=was[: len(was) - len(was.lstrip())]) if turns else None
    role = "user" if path == shape.prompt else "assistant"
    return turns[0][1] if len(turns) == 1 and turns[0][0] == role else None


def conversation_row(
    row: Mapping[str, Any], fmt: Shaped, candidate: int | None, *, strict: bool = False
) -> Row:
    """The row as its inner format reads one conversation: the prompt, followed by candidate
    number `candidate` (None: the prompt alone), in the inner format's column; the prompt's
    sibling `tools` (OpenAI's `input.tools`) beside it. A text that no messages can be read
    from is left as it is (the inner decoder rejects it), or with `strict` raises
    `DecodeError` saying why (`part_messages`)."""
    shape, column = fmt.shape, fmt.inner.column
    out = dict(row)

    def read(path: str) -> Any:
        value = get_path(row, path)
        try:
            return part_messages(value, shape, path)
        except DecodeError:
            if strict:
                raise
            return value

    prompt = read(shape.prompt) if shape.prompt else []
    if candidate is None:
        out[column] = prompt
    else:
        part = read(shape.candidates[candidate])
        both = isinstance(prompt, list) and isinstance(part, list)
        out[column] = prompt + part if both else (part if isinstance(prompt, list) else prompt)
    if shape.prompt and "." in shape.prompt:
        tools = get_path(row, shape.prompt.rsplit(".", 1)[0] + ".tools")
        if tools is not MISSING:
            out["tools"] = tools
    return out


def clean_shaped_row(row: Row, fmt: Shaped, config: Config, *, trace: bool = False) -> RowResult:
    """Clean one row of a dataset type (module doc). Never raises for bad data."""
    shape, inner = fmt.shape, fmt.inner
    counts = _counts(row, fmt)
    messages_in = sum(counts.values())
    for path in (*([shape.prompt] if shape.prompt else []), *shape.candidates):
        value = get_path(row, path)
        try:
            read = part_messages(value, shape, path)
        except DecodeError as err:
            return rejected_row(MALFORMED_ROW, str(err), messages_in)
        if not isinstance(read, list):
            what = (
                "missing" if value is MISSING else f"expected a list of messages, got {value!r:.40}"
            )
            return rejected_row(MALFORMED_ROW, f"{path}: {what}", messages_in)

    parts: list[tuple[str, RowResult]] = []
    prompt: list[Any] = []
    out = dict(row)
    if shape.prompt is not None:
        result = clean_row(
            conversation_row(row, fmt, None), inner, prompt_config(config), trace=trace
        )
        _forget(result, PROMPT_CODES)
        parts.append((shape.prompt, result))
        if result.status == "rejected":
            return _combined(parts, fmt, messages_in, out, trace)
        was = get_path(row, shape.prompt)
        read = part_messages(was, shape, shape.prompt)
        prompt = result.row[inner.column] if result.row is not None else read
        if result.status == "repaired":
            if not isinstance(was, str):
                set_path(out, shape.prompt, prompt)
            elif (text := _as_text(prompt, shape, shape.prompt, was)) is not None:
                out[shape.prompt] = text
            else:
                return _combined(
                    [(shape.prompt, _refused(result, "its repair leaves more than its text"))],
                    fmt,
                    messages_in,
                    out,
                    trace,
                )

    for k, name in enumerate(shape.candidates):
        value = get_path(row, name)
        candidate = part_messages(value, shape, name)
        whole = {**conversation_row(row, fmt, k), inner.column: prompt + candidate}
        result = clean_row(whole, inner, config, trace=trace)
        parts.append((name, result))
        if result.status == "rejected":
            break
        if result.status != "repaired":
            continue
        assert result.row is not None
        written = result.row[inner.column]
        problem = None
        if written[: len(prompt)] != prompt:
            problem = "its repair would change the prompt, which every candidate shares"
        tail = written[len(prompt) :]
        if problem is None and isinstance(value, Mapping) and len(tail) != 1:
            problem = f"its repair leaves {len(tail)} messages where the column holds one"
        text = _as_text(tail, shape, name, value) if isinstance(value, str) else None
        if problem is None and isinstance(value, str) and text is None:
            problem = f"its repair leaves {len(tail)} messages that its text cannot hold"
        if problem is not None:
            _refused(result, problem)
            break
        if text is not None:
            out[name] = text
        else:
            set_path(out, name, tail[0] if isinstance(value, Mapping) else tail)
    return _combined(parts, fmt, messages_in, out, trace)


def _refused(result: RowResult, problem: str) -> RowResult:
    """A part's repair that its column cannot take: the row is rejected, the repairs made
    deciding it."""
    result.status = "rejected"
    changed = [c for c, a in result.actions.items() if a in ("repaired", "dropped")]
    result.actions = mark_rejected(result.actions, changed)
    result.reject_message = problem
    return result


def _counts(row: Mapping[str, Any], fmt: Shaped) -> dict[str, int]:
    shape = fmt.shape
    paths = ([shape.prompt] if shape.prompt else []) + list(shape.candidates)
    out = {}
    for path in paths:
        try:
            value = part_messages(get_path(row, path), shape, path)
        except DecodeError:
            value = None
        out[path] = len(value) if isinstance(value, list) else 0
    return out


def _forget(result: RowResult, codes: tuple[str, ...]) -> None:
    """Drops from a prompt's result the codes a prompt has by design."""
    result.violations = [v for v in result.violations if v.code not in codes]
    for code in codes:
        result.actions.pop(code, None)


def _add_rendered(combined: RowResult, part: RowResult) -> None:
    """A candidate's render (`--chat-template`) counted in its row's: a row is rendered when
    a candidate is, its tokens and trained tokens those of its candidates together (a trainer
    of preferences renders each one)."""
    combined.templated = combined.templated or part.templated
    if part.rendered is None:
        return
    tokens, trained = part.rendered
    if combined.rendered is not None:
        before, had = combined.rendered
        tokens += before
        trained = None if trained is None or had is None else trained + had
    combined.rendered = tokens, trained


def _combined(
    parts: list[tuple[str, RowResult]],
    fmt: Shaped,
    messages_in: int,
    out: Row,
    trace: bool = False,
) -> RowResult:
    """One row's result from its parts': codes named by column, the first reject's message;
    its transcript the prompt with the first candidate, and, traced, every part's (`explain`)."""
    combined = RowResult("unchanged", messages_in=messages_in, messages_out=messages_in)
    first = fmt.shape.candidates[0] if fmt.shape.candidates else fmt.shape.prompt
    for name, result in parts:
        if trace and result.decoded is not None:
            combined.parts.append((name, result.decoded))
        combined.violations += [
            Violation(v.code, v.index, v.call_id, f"{name}: {v.message}") for v in result.violations
        ]
        for code, action in result.actions.items():
            was = combined.actions.get(code)
            if was is None or _ACTION_RANK[action] > _ACTION_RANK[was]:
                combined.actions[code] = action
        combined.steps += result.steps
        _add_rendered(combined, result)
        if result.decoded is not None and (combined.decoded is None or name == first):
            combined.decoded, combined.messages = result.decoded, result.messages
        if result.status == "rejected":
            combined.status = "rejected"
            deciding = [c for c, a in result.actions.items() if a == "rejected"]
            combined.actions = mark_rejected(combined.actions, deciding)
            combined.reject_message = f"{name}: {result.reject_message}"
            combined.messages_out = 0
            return combined
        if result.status == "repaired":
            combined.status = "repaired"
    if combined.status == "repaired":
        combined.row = out
        combined.messages_out = sum(_counts(out, fmt).values())
    return combined
