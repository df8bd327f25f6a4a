"""What the fast path shares with the formats' Arrow sides: a format's view of a batch, the
verdicts worked out from it, and Arrow and NumPy helpers."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.columnar import arrays
from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    field_type,
    fields_agree,
    indices,
    is_text,
)
from transcript_clean.formats.base import DecodeError, Format
from transcript_clean.rules import TRAILING_TOOL_CALL, get_rule
from transcript_clean.sources import jsontypes

if TYPE_CHECKING:
    from transcript_clean.profile import Measures, Profile
    from transcript_clean.rules.base import RuleConfig


class Measurer(Protocol):
    """What measures rows for the profile from what it has read already: a view (`ArrowView`),
    or the views of a dataset type's parts (`shapes.arrow`)."""

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None: ...


class ArrowView:
    """A format's columnar view of one batch's conversation column: the rows it reads as the
    decoder would, and per code it knows, which of those may have it (its Arrow checks: a row
    not flagged certainly does not). The fast path makes one (`fastpath.arrow_view`, of a
    format's flattened `Conversations`), combines it with the rules' own checks, and settles a
    row only when every enabled rule has cleared it.

    A format that can also repair or reject rows in Arrow says which codes (`repairs`,
    `rejects`) and overrides `repair` and `reject`.
    """

    repairs: frozenset[str] = frozenset()
    """Codes whose repair this view can do itself, for rows that have no other code."""
    rejects: frozenset[str] = frozenset()
    """Codes for which it can reject rows itself, with the per-row path's message."""
    with_empty: frozenset[str] = frozenset()
    """Of `repairs`, the codes it repairs in a row together with R1's empty turns (R4, which
    looks at the messages R1 keeps), besides the rows whose only code they are."""
    tools: tuple[pa.Array, ...] = ()
    """The batch's columns of declared tools (`Format.declaring_columns`), set by the fast path:
    what the declared-tools checks read (`fastpath.declared`)."""
    calls: tuple[npt.NDArray[np.int64], pa.Array, pa.Array] | None = None
    """The calls of the rows it reads, where the view brings them: each call's row, tool name
    and arguments (as the source holds them). Without them, a row that declares tools may have
    any declared-tools code."""
    tool_masks: dict[str, Mask] | None = None
    """The declared-tools checks, once worked out."""
    tool_declared: tuple[npt.NDArray[np.int64], list[Any]] | None = None
    """Per row, its declarations among the batch's distinct ones (`fastpath.declared`)."""
    tool_found: Any = None
    """What they found call by call, for the view's rejects (`fastpath.declared._Found`)."""
    config: RuleConfig | None = None
    """The run's config, set by the fast path where it knows it: what a repair that depends on
    it reads (R3 drops an orphan a later turn may have used, or rejects its row). Where it is
    None, such a row is left to the per-row path."""

    def __init__(
        self, rows: int, unread: Mask, checks: dict[str, Mask], trailing_calls: Counts
    ) -> None:
        self.rows = rows
        self.unread = unread
        """Rows this view does not read as the decoder would: the per-row path decides them."""
        self.checks = checks
        """Per code it knows, the rows it reads that may have it."""
        self.trailing_calls = trailing_calls
        """Per row, the calls pending at the very end (one per id)."""

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        """The rows of `rows` (per code, rows whose only code it is) repaired, as the per-row
        path would repair them."""
        raise NotImplementedError

    def again(self, column: pa.Array, rows: Counts) -> ArrowView | None:
        """The view of a column this view repaired, to check what the repair left; `rows`, the
        batch's rows it holds, in order (`ArrowRepair.subset`)."""
        raise NotImplementedError

    def reject(self, rows: dict[str, Mask]) -> list[FastReject]:
        """The rows of `rows` (per code, rows that may be rejected for it) that this view can
        reject as the per-row path would, with its messages."""
        return []

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        """The profile's measures of the rows of `rows` (rows it reads as the decoder would),
        from what the view has read already; None where it cannot tell them."""
        return None


@dataclass(slots=True)
class ArrowRepair:
    """What a view made of the rows it was asked to repair."""

    subset: npt.NDArray[np.int64]
    """The rows it repaired, by position in the batch."""
    column: pa.Array
    """Their conversations, repaired, in that order."""
    occurrences: dict[str, Counts]
    """Per code, its occurrences in each row of the batch."""
    rejects: list[FastReject] = field(default_factory=list)
    """Rows whose repair is impossible, rejected as the per-row path would (not in `subset`)."""
    origins: Origins | None = None
    """Where each message of `column` came from; None where the view does not say."""


ORIGIN: Final = pa.struct([pa.field("at", pa.int64()), pa.field("rewritten", pa.bool_())])
"""Where a repaired row's message came from: `at`, the position in the row as it came in of
the message it was made from (-1: made anew), and whether the repair rewrote its text."""


class Origins:
    """Where the messages of repaired rows came from, one list of `ORIGIN` per row, in the
    order of their conversations (`ArrowRepair.column`, `Verdicts.repaired_column`). A JSON
    Lines row's repaired line is then its line with just those edits made
    (`pipeline.lines.relined`), not the whole row re-encoded by the per-row path.

    Worked out when first read (`messages` may be given as a function that makes them): only
    a batch whose lines are written anew reads them."""

    __slots__ = ("_make", "_messages", "text")

    def __init__(self, messages: pa.Array | Callable[[], pa.Array], text: str) -> None:
        self._messages = messages if isinstance(messages, pa.Array) else None
        self._make = None if isinstance(messages, pa.Array) else messages
        self.text = text
        """The message field a rewrite sets (OpenAI's `content`)."""

    @property
    def messages(self) -> pa.Array:
        """A list of `ORIGIN` per row."""
        if self._messages is None:
            assert self._make is not None
            self._messages, self._make = self._make(), None
        return self._messages

    def filter(self, keep: Mask) -> Origins:
        return Origins(lambda: self.messages.filter(pa.array(keep)), self.text)

    def slice(self, start: int, length: int) -> Origins:
        return Origins(lambda: self.messages.slice(start, length), self.text)


@dataclass(slots=True, frozen=True)
class FastRepair:
    """The rows the fast path repaired for one code, as the stats count them."""

    code: str
    action: str
    """As the stats name it: `dropped` for empty turns, `repaired` for the rest."""
    rows: Mask
    occurrences: Counts
    """Per row, the code's occurrences (turns dropped, calls answered, results dropped...)."""


@dataclass(slots=True, frozen=True)
class FastReject:
    """The rows the fast path rejected for one code, and what the per-row path says of each."""

    code: str
    rows: Mask
    occurrences: Counts
    messages: list[str]
    """The rejected rows' messages, in order."""
    present: Mapping[str, Counts] = field(default_factory=dict)
    """Codes the rejected rows also have, which did not decide their fate (the per-row path's
    `present`: R1's empty turns in a row then rejected for what their drop leaves), each with
    its occurrences per row."""

    def slice(self, start: int, stop: int) -> FastReject:
        before = int(self.rows[:start].sum())
        rows = self.rows[start:stop]
        messages = self.messages[before : before + int(rows.sum())]
        present = {code: counts[start:stop] for code, counts in self.present.items()}
        return FastReject(self.code, rows, self.occurrences[start:stop], messages, present)


@dataclass(slots=True)
class Verdicts:
    """What the fast path decided for each row of a batch (the rest take the per-row path)."""

    clean: Mask
    """Canonical, with no code: kept as it is."""
    trailing: Mask
    """Canonical but for calls pending at the very end: kept as it is, as `trailing_tool_call`."""
    trailing_calls: Counts
    """Per row, the pending calls of that last turn (one per id)."""
    repaired: Mask
    """Canonical once one kind of defect is repaired here: kept as `repaired_column` holds it."""
    repairs: list[FastRepair] = field(default_factory=list)
    repaired_column: pa.Array | None = None
    """The repaired rows' conversations, in order, as they are written."""
    rejects: list[FastReject] = field(default_factory=list)
    """Rows rejected as they are, each for one code."""
    tool_counts: ToolCounts | None = None
    """The rows' declared tools and calls, for the stats (`fastpath.declared`)."""
    view: Measurer | None = None
    """The view that decided them (a batch's verdicts, not a slice's): what measures the rows
    settled here for the profile (a dataset type's: the view of its prompt and first candidate,
    `shapes.arrow`). None: the batch's profile measures them (`batch_profile.profile_batch`)."""
    profile: Profile | None = None
    """The profile of the rows settled here that decode, where it was measured with the
    verdicts (`pipeline.settled_profile`): then the batch's profile adds only the other rows."""
    stale_lines: bool = False
    """The repaired rows' JSON Lines lines (`_raw_line`) are written, and are stale: each is
    written anew when the batch is cleaned (`pipeline.lines.relined`)."""
    repaired_origins: Origins | None = None
    """Where the repaired rows' messages came from, where the view says (`ArrowRepair.origins`):
    their lines are then edited, not re-encoded."""
    messages: Counts | None = None
    """Per row, its messages as `Format.message_counts` counts them, for the rows settled here,
    where the format reads them from the view (`Format.settled_message_counts`): what `settle`
    counts, without reading the batch again."""

    def coded(self) -> list[tuple[str, Mask]]:
        """Per code, the rows settled here that have it (each row settled here has one, and
        a rejected one the codes `present` beside it)."""
        coded = [(TRAILING_TOOL_CALL, self.trailing)] if self.trailing.any() else []
        coded += ((r.code, r.rows) for r in self.repairs)
        coded += ((r.code, r.rows) for r in self.rejects)
        coded += ((code, r.rows) for r in self.rejects for code in r.present)
        return coded

    @property
    def handled(self) -> Mask:
        handled = self.clean | self.trailing | self.repaired
        for reject in self.rejects:
            handled = handled | reject.rows
        return handled

    @property
    def read(self) -> Mask:
        """The rows settled here that decode: all but those rejected while decoding."""
        read = self.handled
        for reject in self.rejects:
            if get_rule(reject.code).stage == "decode":
                read = read & ~reject.rows
        return read

    def slice(self, start: int, stop: int) -> Verdicts:
        """The verdicts of rows [start, stop), as if worked out for those rows alone."""
        repaired = self.repaired[start:stop]
        column = origins = None
        if self.repaired_column is not None and repaired.any():
            before, count = int(self.repaired[:start].sum()), int(repaired.sum())
            column = self.repaired_column.slice(before, count)
            if self.repaired_origins is not None:
                origins = self.repaired_origins.slice(before, count)
        repairs = [
            FastRepair(r.code, r.action, r.rows[start:stop], r.occurrences[start:stop])
            for r in self.repairs
            if r.rows[start:stop].any()
        ]
        rejects = [r.slice(start, stop) for r in self.rejects if r.rows[start:stop].any()]
        counts = None if self.tool_counts is None else self.tool_counts.slice(start, stop)
        return Verdicts(
            self.clean[start:stop],
            self.trailing[start:stop],
            self.trailing_calls[start:stop],
            repaired,
            repairs,
            column,
            rejects,
            counts,
            stale_lines=self.stale_lines,
            repaired_origins=origins,
            messages=None if self.messages is None else self.messages[start:stop],
        )


def text_or_absent(schema: pa.Schema | None, name: str) -> bool:
    """Whether the column `name` of `schema` holds text, or is not there."""
    kind = None if schema is None else field_type(pa.struct(list(schema)), name)
    return kind is None or is_text(kind)


def flagged_within(array: pa.Array, flag: Callable[[pa.Array], Mask | None]) -> Mask:
    """Per element of `array`, whether any value within it (through structs, lists, maps' values
    and dictionaries) is one `flag` flags. `flag` answers for the arrays it judges, per
    element, and with None for the rest, which are looked into. `pa.json_()` values are
    looked at as their text (`jsontypes.as_storage`: Arrow cannot flatten lists of them that
    are null in every row)."""
    return arrays.flagged_within(jsontypes.as_storage(array), flag)


def agrees(msgs: pa.Array, merged: Collection[str], asked: Mask) -> Mask:
    """Per message (a struct) of `asked` (each with one before it), whether its fields other
    than `merged` (what R4 merges: the text) agree with its predecessor's, as R4 requires to
    merge the two (`weight`, say: `arrays.fields_agree`). False for the other messages. Only
    the messages asked (the few R4 could merge) are looked at."""
    at = np.flatnonzero(asked)
    agree = np.zeros(len(msgs), dtype=bool)
    if len(at):
        before, after = msgs.take(indices(at - 1)), msgs.take(indices(at))
        agree[at] = fields_agree(before, after, merged)
    return agree


@dataclass(slots=True, frozen=True)
class ToolCounts:
    """What the stats count of the rows that declare tools, per row of a batch: its
    declarations (an index into `declared`, -1 for none) and its calls' tool names (an index
    into `names`), so that the rows the fast path settles can be counted without them."""

    names: list[str]
    declared_id: npt.NDArray[np.int64]
    declared: list[list[int]]
    """Per distinct declarations, the indexes of its tools' names."""
    call_row: npt.NDArray[np.int64]
    call_name: npt.NDArray[np.int64]

    def slice(self, start: int, stop: int) -> ToolCounts:
        inside = (self.call_row >= start) & (self.call_row < stop)
        return ToolCounts(
            self.names,
            self.declared_id[start:stop],
            self.declared,
            self.call_row[inside] - start,
            self.call_name[inside],
        )

    def count(self, rows: Mask) -> tuple[int, dict[str, int], dict[str, int]]:
        """Of `rows`, those that declare tools, and per tool name the rows that declare it and
        the calls to it in them."""
        ids = self.declared_id[rows & (self.declared_id >= 0)]
        declared: dict[str, int] = {}
        if len(ids):
            per_id = np.bincount(ids, minlength=len(self.declared))
            for i in np.flatnonzero(per_id).tolist():
                for name in self.declared[i]:
                    declared[self.names[name]] = declared.get(self.names[name], 0) + int(per_id[i])
        chosen = rows[self.call_row] & (self.declared_id[self.call_row] >= 0)
        per_name = np.bincount(self.call_name[chosen], minlength=len(self.names))
        calls = {self.names[i]: int(per_name[i]) for i in np.flatnonzero(per_name).tolist()}
        return len(ids), declared, calls


def decode_rejects(
    fmt: Format, records: Iterable[tuple[int, Mapping[str, Any]]], wanted: Mapping[str, Mask]
) -> list[FastReject]:
    """The rows whose record (`records`: each row's position and what the decoder reads of it)
    the format's decoder cannot read, for a decoding code of `wanted` that holds the row:
    rejected with the decoder's words, as the per-row path rejects them. Rows it reads, or
    nests too deep to read, are left out (the per-row path's to say)."""
    size = len(next(iter(wanted.values())))
    found = {code: (np.zeros(size, dtype=bool), list[str]()) for code in wanted}
    for row, record in records:
        try:
            fmt.decode(record)
        except DecodeError as err:
            if err.code in wanted and wanted[err.code][row]:
                found[err.code][0][row] = True
                found[err.code][1].append(str(err))
        except RecursionError:
            continue
    return [
        FastReject(code, rejected, rejected.astype(np.int64), words)
        for code, (rejected, words) in found.items()
        if rejected.any()
    ]
