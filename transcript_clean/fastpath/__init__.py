"""The Arrow-native fast path: which rows are settled per batch, not per row.

A format's flattener (`formats/<name>/flatten.py`) reads a batch's conversation column into the
columnar view, `Conversations`, which the fast path reads as a `ConversationsView`: the rows it
reads as the decoder would, and per code, the rows each rule's columnar check (`Rule.columnar`)
says may have it. `fast_verdicts` combines them:

- a row is **clean** (kept unchanged, no code) only when the view reads it and every enabled
  rule's check has cleared it; a rule with no check for this format clears no row, so a new rule
  sends every row down the per-row path until it brings one;
- a row whose only possible code is `trailing_tool_call` is kept as it is where the config keeps
  those calls;
- a row whose only possible code is one the view can repair or reject (and the config repairs or
  rejects) is settled by the view, as the per-row path would; so is any row the view reads with
  empty assistant turns, which R1 sets aside before any other code is looked for. A repaired row
  is kept only when the view of its repaired conversation clears it of every code again.

Those rows never become Python objects; every other row takes the per-row path. The verdicts are
conservative by construction, so the two paths always agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.columnar.arrays import Mask, any_of, whole
from transcript_clean.fastpath.base import (
    ArrowRepair,
    ArrowView,
    FastReject,
    FastRepair,
    Verdicts,
)
from transcript_clean.fastpath.columnar import ConversationsView
from transcript_clean.fastpath.declared import tool_checks, tool_counts, with_inner_declarations
from transcript_clean.formats.base import Format
from transcript_clean.rules import (
    EMPTY_ASSISTANT_TURN,
    NO_ASSISTANT_TURN,
    TRAILING_TOOL_CALL,
    UNENCODABLE_ROW,
    Rule,
    get_rule,
    rules,
)
from transcript_clean.rules.base import RuleConfig
from transcript_clean.sources.jsontypes import has_json

__all__ = [
    "ArrowRepair",
    "ArrowView",
    "ConversationsView",
    "FastReject",
    "FastRepair",
    "Verdicts",
    "arrow_view",
    "clean_mask",
    "fast_verdicts",
    "possible_codes",
]


def clean_mask(fmt: Format, column: pa.Array | pa.ChunkedArray) -> Mask | None:
    """For each row, whether it is provably canonical with no code; None when this format or
    column shape has no fast path (then every row takes the per-row path)."""
    verdicts = fast_verdicts(fmt, column)
    return None if verdicts is None else verdicts.clean


def possible_codes(
    view: ArrowView, fmt: Format, enabled: Sequence[Rule] | None = None
) -> dict[str, Mask]:
    """Per enabled rule, the rows of the view that may have its code: the declared-tools checks
    for a rule that reads declared tools, else the view's own check, else the rule's columnar
    check over a flattened view, else every row. A code of decoding or encoding needs no check:
    a row the view reads decodes as the decoder reads it, and the fast path writes it in the
    input's own Arrow type, never through the encoder."""
    out: dict[str, Mask] = {}
    walk = view.walk if isinstance(view, ConversationsView) else None
    for rule in _default_rules() if enabled is None else enabled:
        if rule.reads_declared_tools:
            out[rule.code] = tool_checks(view)[rule.code]
        elif rule.code in view.checks:
            out[rule.code] = view.checks[rule.code]
        elif walk is not None and rule.columnar is not None:
            out[rule.code] = rule.columnar(walk)
        elif rule.stage in ("decode", "encode"):
            out[rule.code] = view.unread
        else:
            out[rule.code] = np.ones(view.rows, dtype=bool)
    return out


def arrow_view(
    fmt: Format,
    array: pa.Array,
    schema: pa.Schema | None = None,
    side: Mapping[str, pa.Array] | None = None,
) -> ArrowView | None:
    """The fast path's view of a batch's conversation column: the format's flattened
    `Conversations` (`side`: the batch's other columns it reads, `side_columns`); None when it
    has no flattener for this column."""
    conversations = fmt.flatten(array, schema, side)
    if conversations is None:
        return None
    return ConversationsView(conversations, fmt, array, schema, side)


def fast_verdicts(
    fmt: Format,
    column: pa.Array | pa.ChunkedArray,
    *,
    keep_trailing: bool = False,
    repair: Collection[str] = (),
    reject: Collection[str] = (),
    schema: pa.Schema | None = None,
    enabled: Sequence[Rule] | None = None,
    tools: Sequence[pa.Array | pa.ChunkedArray] = (),
    declared: tuple[npt.NDArray[np.int64], list[Any]] | None = None,
    side: Mapping[str, pa.Array] | None = None,
    config: RuleConfig | None = None,
) -> Verdicts | None:
    """The rows the fast path settles: always the clean ones; with `keep_trailing`, those whose
    only code is calls pending at the end (for a config that keeps them); those whose only
    code is one of `repair` (codes the config repairs as the view can) or `reject` (codes the
    config rejects), where the format's view settles them. `schema` is the batch's, when other
    columns matter to the format (the `system` column of ShareGPT and Anthropic); `enabled`,
    the rules the run looks for (by default, those of the default config); `tools`, the batch's
    columns of declared tools, and `declared` what `declared.declared_per_row` makes of them,
    where the caller has worked it out already (the columns of a dataset type's row share
    their declarations); `config`, the run's, for the repairs that read it. None when this
    format or column shape has no fast path."""
    array = whole(column)
    if has_json(array.type) and not fmt.reads_json_leaves:
        # A `pa.json_()` field holds values of more than one type: no view reads it as the
        # decoder would (an object's arguments would look like text that is not one), so
        # every row may have any code; unless the format's flattener refuses such fields
        # where it reads, itself.
        return None
    view = arrow_view(fmt, array, schema, side)
    if view is None:
        return None
    view.tools = tuple(whole(t) for t in tools)
    inner = view.conversations.declarations if isinstance(view, ConversationsView) else None
    if inner is not None:
        if declared is not None:  # a dataset type's, read from its columns alone
            return None
        declared = with_inner_declarations(view.tools, inner, view.rows)
        view.tools += (inner,)
    view.tool_declared = declared
    view.config = config
    enabled = list(_default_rules() if enabled is None else enabled)
    may = possible_codes(view, fmt, enabled)
    read = ~view.unread
    possible = _how_many(may.values(), view.rows)
    alone: Mask = read & (possible == 1)

    def only(code: str) -> Mask:
        return alone & may[code]

    nothing = np.zeros(view.rows, dtype=bool)
    trailing = only(TRAILING_TOOL_CALL) if keep_trailing and TRAILING_TOOL_CALL in may else nothing
    verdicts = Verdicts(
        clean=read & (possible == 0),
        trailing=trailing,
        trailing_calls=view.trailing_calls,
        repaired=nothing.copy(),
        tool_counts=tool_counts(view),
        view=view,
    )
    if isinstance(view, ConversationsView):
        verdicts.messages = fmt.settled_message_counts(view.conversations)
    # A code found while decoding is a row's only code: the decoder stops there.
    to_reject = {
        r.code: may[r.code] if r.stage == "decode" else only(r.code)
        for r in enabled
        if r.code in view.rejects and r.code in reject
    }
    if any(rows.any() for rows in to_reject.values()):
        verdicts.rejects += view.reject(to_reject)
    for rule in enabled:  # a code whose words never change, rejected here for any format
        if rule.message is not None and rule.code in reject and rule.code not in view.rejects:
            rows = only(rule.code) if rule.code in may else nothing
            if rows.any():
                words = [rule.message] * int(rows.sum())
                verdicts.rejects.append(FastReject(rule.code, rows, rows.astype(np.int64), words))
    if (
        isinstance(view, ConversationsView)
        and EMPTY_ASSISTANT_TURN in repair
        and EMPTY_ASSISTANT_TURN in may
        and EMPTY_ASSISTANT_TURN not in view.repairs
    ):
        # R1 where the format cannot drop an empty turn in Arrow: a row whose only other code
        # may be no assistant turn (after R1) is rejected here where the per-row path would
        # reject it for what the drop leaves (strings of alternating pairs).
        others = possible - may[EMPTY_ASSISTANT_TURN] - may.get(NO_ASSISTANT_TURN, nothing)
        verdicts.rejects += view.reject_unwritten(
            read & may[EMPTY_ASSISTANT_TURN] & (others == 0),
            reject_no_assistant=NO_ASSISTANT_TURN in reject,
            reject_unwritten=UNENCODABLE_ROW in reject,
        )
    rejected = any_of((r.rows for r in verdicts.rejects), view.rows)
    # Empty turns are set aside before any other code is looked for (R1), so a row the view
    # reads qualifies whatever else it may have: the view of the repaired row decides.
    to_repair = {
        r.code: read & may[r.code] if r.stage == "empty" else only(r.code)
        for r in enabled
        if r.code in view.repairs and r.code in view.checks and r.code in repair
    }
    # A code the view repairs together with R1 (R4) is repaired in R1's rows too.
    empty = any_of((m for c, m in to_repair.items() if get_rule(c).stage == "empty"), view.rows)
    for code in view.with_empty & to_repair.keys():
        to_repair[code] = to_repair[code] | (empty & may[code])
    to_repair = {code: rows & ~rejected for code, rows in to_repair.items()}
    to_repair = {code: rows for code, rows in to_repair.items() if rows.any()}
    if to_repair:
        _settle_repairs(view, fmt, enabled, to_repair, verdicts)
    return verdicts


def _settle_repairs(
    view: ArrowView,
    fmt: Format,
    enabled: list[Rule],
    to_repair: dict[str, Mask],
    verdicts: Verdicts,
) -> None:
    """Repair in Arrow the rows of `to_repair`, and keep those the view of their repaired
    conversations clears of every code but one the repair answers rather than removes."""
    fixed = view.repair(to_repair)
    verdicts.rejects += fixed.rejects
    if not len(fixed.subset):
        return
    again = view.again(fixed.column, fixed.subset)
    assert again is not None  # the repaired column has the input's type
    again.tools = tuple(t.take(pa.array(fixed.subset)) for t in view.tools)
    if view.tool_declared is not None:  # the rows' declarations, read once
        ids, distinct = view.tool_declared
        again.tool_declared = (ids[fixed.subset], distinct)
    may = possible_codes(again, fmt, enabled)
    read = ~again.unread
    accepted = np.zeros(view.rows, dtype=bool)
    for code, rows in to_repair.items():
        left = [m for c, m in may.items() if not (c == code and get_rule(c).survives_repair)]
        ok = read & ~any_of(left, again.rows)
        mine = np.zeros(view.rows, dtype=bool)
        mine[fixed.subset[ok]] = True
        mine &= rows
        if mine.any():
            rule = get_rule(code)
            verdicts.repairs.append(
                FastRepair(code, rule.repaired_as, mine, fixed.occurrences[code])
            )
            accepted |= mine
    verdicts.repaired = accepted
    verdicts.repaired_column = fixed.column.filter(pa.array(accepted[fixed.subset]))
    if fixed.origins is not None:
        verdicts.repaired_origins = fixed.origins.filter(accepted[fixed.subset])


def _default_rules() -> list[Rule]:
    """The rules a run with the default config looks for (`too_long` only with a limit)."""
    from transcript_clean.policy import DEFAULT

    return [rule for rule in rules() if rule.enabled(DEFAULT)]


def _how_many(masks: Iterable[Mask], rows: int) -> npt.NDArray[np.int64]:
    """Per row, how many of `masks` hold it."""
    out = np.zeros(rows, dtype=np.int64)
    for mask in masks:
        out += mask
    return out
