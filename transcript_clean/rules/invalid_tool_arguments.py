"""invalid_tool_arguments (R2): a tool call whose arguments are not a JSON object.

`repair` answers the turn as the live loop would have: the invalid call gets
`invalid_arguments_feedback`, every valid peer `not_executed` (`invalid_call_feedback`, once per
invalid call). The call itself stays as the model wrote it, answered: a repaired row still has it.

A repair never writes over a real result: when the invalid call's result in the row is not an
error (the harness ran it anyway, and the turns after it read its output), the row cannot be
repaired and is rejected. A result R2 itself wrote (its feedback, which a format without an
error flag reads back as a success) counts as an error. A call to a declared raw-input tool
(`code_interpreter`, a custom tool) takes arguments that are not JSON by design: it is never
invalid.

Over a batch's columns (`arrow_rejects`), the rows the per-row path rejects for R2 are told
from the calls' and results' columns, in its words.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa

from transcript_clean.columnar.arrays import Counts, Mask, count, first_flagged, indices, is_text
from transcript_clean.model import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    is_json,
)
from transcript_clean.rules.base import (
    Rule,
    Unrepairable,
    Violation,
    Walk,
    answer_window,
    put_results,
    raw_input_names,
)
from transcript_clean.transcript import (
    invalid_arguments_feedback,
    not_executed,
    tool_result_message,
)

if TYPE_CHECKING:
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.walk import ConversationsWalk
    from transcript_clean.rules.base import RuleConfig
    from transcript_clean.tools import Declared

CODE: Final = "invalid_tool_arguments"


def has_invalid_arguments(call: ToolCall) -> bool:
    """Whether the call's arguments are not a JSON object: they did not parse, are not `{}`, or
    hold what strict JSON cannot (NaN, an infinite number, a lone surrogate)."""
    if not isinstance(call.arguments, dict):
        return True
    # Arguments parsed from text were parsed as strict JSON already (`parse_arguments`).
    return call.raw_arguments is None and not is_json(call.arguments)


def raw_arguments(call: ToolCall) -> str:
    """The arguments as the model wrote them."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def message(index: int, call_id: str, name: str, raw: str) -> str:
    shown = raw if len(raw) <= 60 else raw[:60] + "…"
    return (
        f"message {index}: tool call {call_id!r} to {name!r} has arguments that are not a JSON "
        f"object: {shown!r}"
    )


def real_result(index: int, call: ToolCall, at: int) -> str:
    """Why a turn whose invalid call has a real result cannot be repaired."""
    return (
        f"message {index}: tool call {call.id!r} to {call.name!r} has arguments that are not a "
        f"JSON object, but a real result in message {at}: rewriting it would contradict the "
        "turns after it"
    )


def find(walk: Walk) -> Iterator[Violation]:
    raw = raw_input_names(walk.tools)
    for index, msg in enumerate(walk.messages):
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if call.name not in raw and has_invalid_arguments(call):
                    words = message(index, call.id, call.name, raw_arguments(call))
                    yield Violation(CODE, index, call.id, words)


def answer_invalid_calls(
    messages: Sequence[Message], raw: frozenset[str] = frozenset()
) -> list[Message]:
    """R2: a turn with a call whose arguments are not a JSON object is answered as the live loop
    would have answered it: the invalid call gets `invalid_arguments_feedback`, every valid peer
    `not_executed` (`invalid_call_feedback`, once per invalid call). Calls to the tools named in
    `raw` (raw-input tools) are valid whatever their arguments. `Unrepairable` when an invalid
    call's result in the row is a real one."""

    def invalid(call: ToolCall) -> bool:
        return call.name not in raw and has_invalid_arguments(call)

    out = list(messages)
    index = 0
    while index < len(out):
        msg = out[index]
        if isinstance(msg, AssistantMessage) and any(invalid(c) for c in msg.tool_calls):
            results: list[ToolResult] = []
            seen: set[str] = set()
            for call in msg.tool_calls:
                if call.id in seen:
                    continue
                seen.add(call.id)
                if invalid(call):
                    feedback = invalid_arguments_feedback(call.name, raw_arguments(call))
                    _refuse_real_result(out, index, call, feedback)
                    results.append(tool_result_message(call, feedback))
                else:
                    results.append(not_executed(call))
            put_results(out, index, results, replacing=True)
        index += 1
    return out


def _refuse_real_result(messages: Sequence[Message], index: int, call: ToolCall, text: str) -> None:
    """`Unrepairable` when the call's result in the user message answering its turn is a real
    one: not an error, and not the feedback R2 writes (which a format without an error flag
    reads back as a success)."""
    at = answer_window(messages, index)
    if at is None:
        return
    answering = messages[at]
    assert isinstance(answering, UserMessage)
    for part in answering.content:
        if isinstance(part, ToolResult) and part.call == call.id:
            if part.status != "error" and part.content != (Text(text),):
                raise Unrepairable(CODE, real_result(index, call, at))
            return


def invalid_calls(conversations: Conversations, raw_input: Mask | None = None) -> Mask:
    """`find` over a batch's calls: per call, whether its arguments are not a JSON object
    (`has_invalid_arguments`, which the view's `call_object` tells) and it calls no raw-input
    tool (`raw_input`: per call, whether its row declares its tool as one)."""
    invalid: Mask = ~conversations.call_object
    if raw_input is not None:
        invalid &= ~raw_input
    return invalid


def shown_arguments(arguments: pa.Array) -> list[str | None]:
    """`raw_arguments` of calls whose arguments are not a JSON object, from their column (a
    view's `call_arguments`), None where it cannot be told. A flattener gives the text the
    decoder keeps (`ToolCall.raw_arguments`), or, where the decoder holds a JSON value and no
    text, that value written as JSON; the words are told only where both readings give the
    same: text that no JSON parser reads (a value written as JSON would be read back), or text
    that `json.dumps` writes as it is. Arguments held as a struct are not told."""
    if not is_text(arguments.type):
        return [None] * len(arguments)
    out: list[str | None] = []
    for text in arguments.to_pylist():
        if text is None:
            out.append(None)
            continue
        try:
            value = json.loads(text)
        except ValueError:
            out.append(text)
            continue
        except RecursionError:
            out.append(None)
            continue
        try:
            same = json.dumps(value, ensure_ascii=False) == text
        except (ValueError, RecursionError):
            same = False
        out.append(text if same else None)
    return out


def arrow_rejects(
    conversations: Conversations,
    walk: ConversationsWalk,
    rows: Mask,
    raw_input: Mask | None = None,
    *,
    repairing: bool,
) -> tuple[Mask, Counts, list[str]]:
    """The rows of `rows` (rows whose only code is R2) that the per-row path rejects for R2,
    told from a batch's columns: the rows, R2's occurrences in each (its invalid calls) and the
    rows' words, in order. Where the config rejects R2, every such row, named by its first
    invalid call (`message`); where it repairs R2 (`repairing`), the rows whose repair meets a
    real result (`answer_invalid_calls`), named by the first invalid call in order whose result
    is neither an error nor R2's own feedback (`real_result`); the others are repaired, which
    is the per-row path's. A row whose words or result cannot be told from the columns
    (arguments held as a struct, a result's text or error flag the flattener does not give)
    is left out, for the per-row path. `raw_input` as for `invalid_calls`."""
    c = conversations
    call_row = c.message_row[c.call_message]
    invalid = invalid_calls(c, raw_input) & rows[call_row]
    occurrences = count(invalid, call_row, c.rows)
    chosen = np.zeros(c.rows, dtype=bool)
    if not invalid.any() or (repairing and (c.result_text is None or c.result_error is None)):
        return chosen, occurrences, []
    if repairing:
        # Every invalid call in order, each pending id once, as the repair looks at them.
        asked = np.flatnonzero(invalid & ~walk.duplicate)
    else:
        first = first_flagged(invalid, call_row, c.rows)
        asked = first[first < len(invalid)]
    index = walk.message_index[c.call_message[asked]].tolist()
    ids = c.call_id.take(indices(asked)).to_pylist()
    names = c.call_name.take(indices(asked)).to_pylist()
    shown = shown_arguments(c.call_arguments.take(indices(asked)))
    words: dict[int, str] = {}
    if not repairing:
        for k, row in enumerate(call_row[asked].tolist()):
            if shown[k] is not None:
                words[row] = message(index[k], str(ids[k]), str(names[k]), str(shown[k]))
    else:
        words = _real_results(c, walk, asked, call_row, index, ids, names, shown)
    chosen[list(words)] = True
    return chosen, np.where(chosen, occurrences, 0), [words[r] for r in sorted(words)]


def _real_results(
    c: Conversations,
    walk: ConversationsWalk,
    asked: Counts,
    call_row: Counts,
    index: list[int],
    ids: list[object],
    names: list[object],
    shown: list[str | None],
) -> dict[int, str]:
    """`arrow_rejects` where the config repairs R2: per row rejected, its words. The invalid
    calls `asked` (in order, with their message `index`, id, name and `shown` arguments) are
    looked at as `_refuse_real_result` does: the first result answering each (the walk's
    `answer`), real when it is no error and says other than R2's feedback. A row is decided by
    its first call whose result is real (rejected) or cannot be told (left out)."""
    assert c.result_text is not None and c.result_error is not None
    answer = walk.answer[asked]
    has = answer >= 0
    at = answer[has]
    texts: list[str | None] = [None] * len(asked)
    for k, text in zip(
        np.flatnonzero(has).tolist(), c.result_text().take(indices(at)).to_pylist(), strict=True
    ):
        texts[k] = text
    error = np.zeros(len(asked), dtype=bool)
    error[has] = c.result_error[at]
    blank = np.zeros(len(asked), dtype=bool)
    blank[has] = c.result_blank[at]
    answer_index = np.zeros(len(asked), dtype=np.int64)
    answer_index[has] = walk.message_index[c.result_message[at]]
    words: dict[int, str] = {}
    decided: set[int] = set()
    for k, row in enumerate(call_row[asked].tolist()):
        if row in decided or not has[k] or error[k]:
            continue  # no result in its answer, or an error: the repair answers it
        name, raw, text = str(names[k]), shown[k], texts[k]
        if blank[k]:
            real = True  # R2's feedback is never blank
        elif text is None or raw is None:
            decided.add(row)  # what the result says, or R2's feedback, is not told here
            continue
        else:
            real = text != invalid_arguments_feedback(name, raw)
        if real:
            call = ToolCall(str(ids[k]), name, None)
            words[row] = real_result(index[k], call, int(answer_index[k]))
            decided.add(row)
    return words


def _repair(messages: list[Message], config: RuleConfig) -> list[Message]:
    return answer_invalid_calls(messages)


def _repair_declared(
    messages: list[Message], config: RuleConfig, tools: Declared | None
) -> list[Message]:
    return answer_invalid_calls(messages, raw_input_names(tools))


RULE = Rule(
    CODE,
    order=2,
    summary=(
        "a call's arguments are not a JSON object (never a raw-input tool's); a call with a "
        "real result is rejected, never rewritten"
    ),
    actions_help=(
        "R2: a tool call whose arguments are not a JSON object (never a call to a declared "
        "raw-input tool, such as code_interpreter). `repair` answers the turn as the live loop "
        "would have: the invalid call gets feedback asking for a JSON object, its peers "
        '"not executed"; a row whose invalid call has a real (non-error) result is rejected '
        "instead, since rewriting it would contradict the turns after it."
    ),
    allowed=frozenset({"repair", "reject", "keep"}),
    default="repair",
    find=find,
    repair=_repair,
    repair_declared=_repair_declared,
    survives_repair=True,
    columnar=attrgetter("rows_invalid_arguments"),
)
