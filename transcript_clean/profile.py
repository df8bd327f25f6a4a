"""What the data is: a profile of every run (rows, turns, lengths, turn classes, tools).

Each batch is measured as it came in: the rows the fast path settles in Arrow, by their
format's Arrow side (`formats/<name>/arrow.py`, `*_measures`), the others from the transcript
the per-row path decoded anyway. The measures go into a `Profile`, a mergeable, order-free
summary: exact counts, sums and maxima, and each distribution as exact counts in fixed bins
(one per value up to `EXACT_BELOW`, then log-spaced, each at most `RELATIVE_ERROR` wide), so
blocks merged in any order, by any engine and any number of workers, give the same numbers.
A quantile is the lower edge of the bin holding it (the inverted-CDF quantile of NumPy), so it
is exact below `EXACT_BELOW` and within `RELATIVE_ERROR` (below the true value) above.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import list_sizes
from transcript_clean.fastpath.measures import Measures, add_counts
from transcript_clean.model import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
    message_texts,
)
from transcript_clean.sources import jsontypes
from transcript_clean.transcript import TURN_CLASSES, assistant_turn_class

if TYPE_CHECKING:
    from transcript_clean.formats.base import Format

__all__ = [
    "EXACT_BELOW",
    "PER_ROW",
    "PER_TURN",
    "QUANTILES",
    "RELATIVE_ERROR",
    "Histogram",
    "Measures",
    "Profile",
    "add_counts",
    "arrow_measures",
    "measure_transcripts",
    "message_texts",
    "profile_batch",
]

RELATIVE_ERROR: Final = 0.01
"""A quantile above `EXACT_BELOW` is at most this fraction below the true one."""
EXACT_BELOW: Final = 128
"""Values below it have a bin each: their quantiles are exact."""
QUANTILES: Final = {"p5": 0.05, "p50": 0.5, "p95": 0.95}

PER_ROW: Final = (
    "messages", "user_turns", "assistant_turns", "tool_calls", "chars", "tokens",
    "rendered_tokens", "trained_tokens",
)  # fmt: skip
"""The distributions over rows (`tokens` only with a tokenizer; `rendered_tokens`, the
conversation as a chat template renders it, and `trained_tokens`, those of its assistant mask,
only with `--chat-template`, over the rows kept)."""
RENDERED: Final = ("rendered_tokens", "trained_tokens")
PER_TURN: Final = ("chars", "tokens")
"""The distributions over assistant turns, named `turn_<name>`."""

Ints = npt.NDArray[np.int64]


@cache
def _edges() -> Ints:
    """Each bin's lowest value: 0, 1, ... EXACT_BELOW - 1, then each `RELATIVE_ERROR` above the
    one before, up to 2**62."""
    edges = list(range(EXACT_BELOW))
    top = 2**62
    while edges[-1] < top:
        edges.append(max(edges[-1] + 1, int(np.ceil(edges[-1] * (1 + RELATIVE_ERROR)))))
    return np.array(edges, dtype=np.int64)


LOOKED_UP_BELOW: Final = 2**16
"""Values below it find their bin in a table (`_bin_table`), the rest by a search."""


@cache
def _bin_table() -> Ints:
    """The bin of every value below `LOOKED_UP_BELOW`: one gather a value instead of a binary
    search of the edges (most values a profile sees, characters and counts, are below it)."""
    return np.searchsorted(_edges(), np.arange(LOOKED_UP_BELOW), side="right") - 1


def bins_of(values: Ints) -> Ints:
    """The bin of each value (non-negative integers)."""
    bins: Ints = _bin_table()[np.minimum(values, LOOKED_UP_BELOW - 1)]
    large = values >= LOOKED_UP_BELOW
    if large.any():
        bins[large] = np.searchsorted(_edges(), values[large], side="right") - 1
    return bins


@dataclass(slots=True, eq=False)
class Histogram:
    """A distribution of non-negative integers: count, sum, max, and counts per fixed bin (as
    many bins as the largest value needs)."""

    count: int = 0
    total: int = 0
    max: int = 0
    counts: Ints = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per bin (`bins_of`), its values."""

    def add(self, values: Ints) -> None:
        if not len(values):
            return
        self.count += len(values)
        self.total += int(values.sum())
        self.max = max(self.max, int(values.max()))
        self._add_counts(np.bincount(bins_of(values)))

    def merge(self, other: Histogram) -> None:
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)
        self._add_counts(other.counts)

    def _add_counts(self, counts: Ints) -> None:
        if len(counts) > len(self.counts):
            self.counts = np.concatenate(
                [self.counts, np.zeros(len(counts) - len(self.counts), dtype=np.int64)]
            )
        self.counts[: len(counts)] += counts

    @property
    def bins(self) -> dict[int, int]:
        """The bins that hold values, and how many each."""
        found = np.flatnonzero(self.counts)
        return dict(zip(found.tolist(), self.counts[found].tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (self.count, self.total, self.max, self.bins) == (
            other.count,
            other.total,
            other.max,
            other.bins,
        )

    def quantile(self, q: float) -> int:
        """The inverted-CDF quantile (the smallest value with at least q of the count at or
        below it), as the lower edge of its bin."""
        if not self.count:
            return 0
        rank = max(1, int(np.ceil(q * self.count)))
        at = int(np.searchsorted(np.cumsum(self.counts), rank))  # the first bin reaching it
        return int(_edges()[at])

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "count": self.count,
            "mean": round(self.total / self.count, 3) if self.count else 0.0,
        }
        out.update({name: self.quantile(q) for name, q in QUANTILES.items()})
        out["max"] = self.max
        return out

    def buckets(self, n: int = 20) -> list[list[int]]:
        """The distribution in at most `n` log-spaced buckets, for a chart: [low, count] each,
        `low` being the lowest value of the bucket."""
        if not self.count:
            return []
        top = int(np.log2(self.max + 1)) + 1
        step = max(1, int(np.ceil(top / n)))
        counts: dict[int, int] = {}
        edges = _edges()
        for b, k in self.bins.items():
            bucket = int(np.log2(int(edges[b]) + 1)) // step
            counts[bucket] = counts.get(bucket, 0) + k
        return [[2 ** (b * step) - 1, counts[b]] for b in sorted(counts)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "total": self.total,
            "max": self.max,
            "bins": [[b, n] for b, n in self.bins.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        histogram = cls(int(data["count"]), int(data["total"]), int(data["max"]))
        if data["bins"]:
            at = np.array([b for b, _ in data["bins"]], dtype=np.int64)
            counts = np.zeros(int(at.max()) + 1, dtype=np.int64)
            counts[at] = [n for _, n in data["bins"]]
            histogram.counts = counts
        return histogram


@dataclass(slots=True)
class Profile:
    """A run's profile, merged from its batches' measures; the same whatever the order."""

    rows: int = 0
    """Rows in, including those that could not be read (they have no measures)."""
    system_rows: int = 0
    per_row: dict[str, Histogram] = field(default_factory=dict)
    per_turn: dict[str, Histogram] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    tools: dict[str, int] = field(default_factory=dict)
    rendered_rows: int = 0
    """Rows rendered with a chat template (`--chat-template`): those that got as far."""

    def add(self, measures: Measures, tokens: Callable[[list[str]], Ints] | None = None) -> None:
        """Add measured rows (count the rows themselves with `add_rows`)."""
        for name, values in measures.rows.items():
            if name == "system":
                self.system_rows += int(values.sum())
            else:
                self.per_row.setdefault(name, Histogram()).add(values)
        self.per_turn.setdefault("chars", Histogram()).add(measures.turn_chars)
        counts = np.bincount(measures.turn_classes, minlength=len(TURN_CLASSES))
        turns = zip(TURN_CLASSES, counts.tolist(), strict=True)
        add_counts(self.turns, {name: n for name, n in turns if n})
        add_counts(self.tools, measures.tools)
        if tokens is not None and measures.texts is not None:
            self._add_tokens(measures, tokens(measures.texts))

    def _add_tokens(self, measures: Measures, counts: Ints) -> None:
        assert measures.text_row is not None and measures.text_turn is not None
        rows = len(measures.rows["messages"])
        per_row = np.bincount(measures.text_row, weights=counts, minlength=rows)
        self.per_row.setdefault("tokens", Histogram()).add(per_row.astype(np.int64))
        turns = len(measures.turn_chars)
        inside = measures.text_turn >= 0
        per_turn = np.bincount(measures.text_turn[inside], counts[inside], minlength=turns)
        self.per_turn.setdefault("tokens", Histogram()).add(per_turn.astype(np.int64))

    def add_rendered(self, tokens: Sequence[int], trained: Sequence[int]) -> None:
        """Add rows rendered with a chat template: their tokens, and those trained."""
        for name, values in zip(RENDERED, (tokens, trained), strict=True):
            if values:
                self.per_row.setdefault(name, Histogram()).add(np.array(values, dtype=np.int64))

    def merge(self, other: Profile) -> None:
        self.rows += other.rows
        self.system_rows += other.system_rows
        self.rendered_rows += other.rendered_rows
        for mine, theirs in ((self.per_row, other.per_row), (self.per_turn, other.per_turn)):
            for name, histogram in theirs.items():
                mine.setdefault(name, Histogram()).merge(histogram)
        add_counts(self.turns, other.turns)
        add_counts(self.tools, other.tools)

    @property
    def measured(self) -> int:
        """Rows that were read (and measured)."""
        messages = self.per_row.get("messages")
        return 0 if messages is None else messages.count

    def report(self) -> dict[str, Any]:
        """profile.json: every distribution's count, mean, p5, p50, p95 and max; the turn
        classes (counts and shares); calls per tool; the share of rows with a system message."""
        turns = sum(self.turns.values())
        per_row = {n: self.per_row[n].summary() for n in PER_ROW if n in self.per_row}
        per_turn = {n: self.per_turn[n].summary() for n in PER_TURN if n in self.per_turn}
        return {
            "rows": self.rows,
            "rows_measured": self.measured,
            "relative_error": RELATIVE_ERROR,
            "exact_below": EXACT_BELOW,
            "per_row": per_row,
            "per_assistant_turn": per_turn,
            "turns": {name: self.turns.get(name, 0) for name in TURN_CLASSES},
            "turn_shares": {
                name: round(self.turns.get(name, 0) / turns, 6) if turns else 0.0
                for name in TURN_CLASSES
            },
            "calls_per_tool": dict(sorted(self.tools.items(), key=lambda kv: (-kv[1], kv[0]))),
            "system_share": round(self.system_rows / self.measured, 6) if self.measured else 0.0,
            **({"rendered_rows": self.rendered_rows} if self.rendered_rows else {}),
            "histograms": {
                f"{name}_{where}": histogram.buckets()
                for name in (*PER_TURN, *RENDERED)
                for where, histogram in (
                    ("per_row", self.per_row.get(name)),
                    ("per_assistant_turn", self.per_turn.get(name)),
                )
                if histogram is not None
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "system_rows": self.system_rows,
            "per_row": {n: h.to_dict() for n, h in self.per_row.items()},
            "per_turn": {n: h.to_dict() for n, h in self.per_turn.items()},
            "turns": dict(self.turns),
            "tools": dict(self.tools),
            **({"rendered_rows": self.rendered_rows} if self.rendered_rows else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        return cls(
            int(data["rows"]),
            int(data["system_rows"]),
            {n: Histogram.from_dict(h) for n, h in data["per_row"].items()},
            {n: Histogram.from_dict(h) for n, h in data["per_turn"].items()},
            {str(k): int(v) for k, v in data["turns"].items()},
            {str(k): int(v) for k, v in data["tools"].items()},
            int(data.get("rendered_rows", 0)),
        )


# ---------------------------------------------------------------------------------------------
# measuring decoded transcripts (the per-row path's rows, and formats with no Arrow side)


def measure_transcripts(
    transcripts: Sequence[Sequence[Message]], *, texts: bool = False
) -> Measures:
    """The measures of decoded transcripts, one row each. A user turn is a user message that
    answers no call (tool results are not a turn of the user's)."""
    names = ("messages", "user_turns", "assistant_turns", "tool_calls", "chars", "system")
    rows: dict[str, list[int]] = {name: [] for name in names}
    turn_chars: list[int] = []
    classes: list[int] = []
    tools: Counter[str] = Counter()
    pieces: list[str] = []
    piece_row: list[int] = []
    piece_turn: list[int] = []
    index = {name: i for i, name in enumerate(TURN_CLASSES)}
    for r, messages in enumerate(transcripts):
        users = assistants = calls = chars = system = 0
        for message in messages:
            own = list(message_texts(message))
            length = sum(map(len, own))
            chars += length
            turn = -1
            if isinstance(message, AssistantMessage):
                turn = len(turn_chars)
                assistants += 1
                turn_chars.append(length)
                classes.append(index[assistant_turn_class(message.content)])
                for part in message.content:
                    if isinstance(part, ToolCall):
                        calls += 1
                        tools[part.name] += 1
            elif isinstance(message, UserMessage):
                users += not any(isinstance(p, ToolResult) for p in message.content)
            else:
                system = 1
            if texts:
                pieces += own
                piece_row += [r] * len(own)
                piece_turn += [turn] * len(own)
        for name, value in zip(
            names, (len(messages), users, assistants, calls, chars, system), strict=True
        ):
            rows[name].append(value)
    return Measures(
        {name: np.array(values, dtype=np.int64) for name, values in rows.items()},
        np.array(turn_chars, dtype=np.int64),
        np.array(classes, dtype=np.int8),
        dict(tools),
        pieces if texts else None,
        np.array(piece_row, dtype=np.int64) if texts else None,
        np.array(piece_turn, dtype=np.int64) if texts else None,
    )


# ---------------------------------------------------------------------------------------------
# one batch


ArrowMeasures = Callable[..., tuple[Measures, npt.NDArray[np.bool_]]]


def arrow_measures(fmt: Format) -> ArrowMeasures | None:
    """The format's Arrow side's measures, where it has them: `f(fmt, table, rows, texts=...)`
    measures rows of `rows` (a mask of rows its view reads as the decoder would) and returns
    the measures and the rows it measured; the others are decoded. A format that flattens into
    the columnar view is measured from it (`conversation_measures`)."""
    format_name = fmt.name
    if format_name == "openai":
        from transcript_clean.fastpath.measures import column_array
        from transcript_clean.formats.openai.arrow import openai_measures

        def openai(
            fmt: Format, table: pa.Table, rows: npt.NDArray[np.bool_], *, texts: bool = False
        ) -> tuple[Measures, npt.NDArray[np.bool_]]:
            column = column_array(table, fmt.column)
            roles = getattr(fmt, "roles", None)
            if roles:  # rows that name roles otherwise: measured with the roles they mean
                from transcript_clean.formats.openai.arrow import with_roles

                column = with_roles(column, roles)[0]
            return openai_measures(column, rows, texts=texts), rows

        return openai
    from transcript_clean.formats.base import Format as Base

    if type(fmt).flatten is not Base.flatten:
        return _flattened_measures
    return None


def _flattened_measures(
    fmt: Format, table: pa.Table, rows: npt.NDArray[np.bool_], *, texts: bool = False
) -> tuple[Measures, npt.NDArray[np.bool_]]:
    """The measures of the rows of `rows` that `fmt`'s flattener reads."""
    from transcript_clean.fastpath.measures import column_array, conversation_measures

    side = {n: column_array(table, n) for n in fmt.side_columns if n in table.column_names}
    conversations = fmt.flatten(column_array(table, fmt.column), table.schema, side)
    if conversations is None:
        return measure_transcripts([]), np.zeros_like(rows)
    measured = rows & conversations.read
    return conversation_measures(conversations, measured, texts=texts), measured


def _first_conversation(table: pa.Table, fmt: Any) -> tuple[Format, pa.Table] | None:
    """A dataset type's batch as its inner format reads one conversation: the prompt followed
    by the first candidate (`ShapedFormat.decode`), put together in Arrow in the inner format's
    column. None where the parts are not lists of one type (then each row is decoded)."""
    parts = _first_conversation_parts(table, fmt)
    if parts is None:
        return None
    inner = fmt.inner
    joined = parts[0] if len(parts) == 1 else _concat_lists(parts[0], parts[1])
    at = table.schema.get_field_index(inner.column)
    if at >= 0:
        return inner, table.set_column(at, inner.column, joined)
    return inner, table.append_column(inner.column, joined)


def _first_conversation_parts(table: pa.Table, fmt: Any) -> list[pa.Array] | None:
    """A dataset type's prompt and first candidate columns, as lists of one type; None where
    they are not, or hold a `pa.json_()` field (then each row is decoded: in Arrow, such a
    field is its JSON text, which the decoder reads as values)."""
    from transcript_clean.shapes.arrow import part_column

    found = [part_column(table, path) for path in fmt.shape.first_conversation]
    parts = [p for p in found if p is not None]
    if len(parts) < len(found) or any(p.type != parts[0].type for p in parts):
        return None
    if any(jsontypes.has_json(p.type) for p in parts):
        return None
    return parts


def _concat_lists(a: pa.Array, b: pa.Array) -> pa.Array:
    """Row by row, the items of list array `a` followed by those of `b` (of the same type)."""
    first, second = list_sizes(a), list_sizes(b)
    total = first + second
    offsets = np.zeros(len(a) + 1, dtype=np.int64)
    np.cumsum(total, out=offsets[1:])
    flat_a, flat_b = pc.list_flatten(a), pc.list_flatten(b)
    start_a = np.cumsum(first) - first
    start_b = np.cumsum(second) - second + len(flat_a)
    row = np.repeat(np.arange(len(a)), total)
    place = np.arange(int(offsets[-1])) - offsets[:-1][row]
    index = np.where(place < first[row], start_a[row] + place, start_b[row] + place - first[row])
    values = pa.concat_arrays([flat_a, flat_b]).take(pa.array(index))
    return pa.LargeListArray.from_arrays(pa.array(offsets), values).cast(
        pa.list_(a.type.value_field)
    )


def _decoded(fmt: Format, row: Mapping[str, Any]) -> Sequence[Message] | None:
    """A settled row's transcript (the fast path settles only rows that decode: None is a
    safeguard, an unread row)."""
    from transcript_clean.formats.base import DecodeError

    try:
        return fmt.decode(row).messages
    except (DecodeError, RecursionError):
        return None


def profile_batch(
    table: pa.Table,
    fmt: Format,
    settled: npt.NDArray[np.bool_] | None,
    decoded: Mapping[int, Sequence[Message] | None],
    *,
    tokenizer: str | None = None,
) -> Profile:
    """The profile of one batch as it came in: `settled` (the rows the fast path settled) are
    measured in Arrow where the format can (else decoded here: the per-row cost), `decoded`
    holds the per-row path's transcripts by position (None: it could not be read)."""
    from transcript_clean.shapes import ShapedFormat
    from transcript_clean.tokens import token_counts

    profile = Profile(rows=table.num_rows)
    tokens = None if tokenizer is None else partial(token_counts, tokenizer)
    texts = tokenizer is not None
    transcripts = [m for m in decoded.values() if m is not None]
    if settled is not None and settled.any():
        # A dataset type's row is profiled as the per-row path reads it, its prompt and first
        # candidate (`ShapedFormat.decode`): OpenAI's parts measured one by one, the other
        # formats' put together into one column (`_first_conversation`).
        measure = arrow_measures(fmt)
        read_as: tuple[Format, pa.Table] | None = (fmt, table)
        parts = None
        if isinstance(fmt, ShapedFormat):
            read_as = None
            if fmt.inner.name == "openai" and not texts:
                parts = _first_conversation_parts(table, fmt)
            else:
                read_as = _first_conversation(table, fmt)
        if parts is not None:
            from transcript_clean.formats.openai.arrow import openai_parts_measures

            profile.add(openai_parts_measures(parts, settled), tokens)
            settled = np.zeros_like(settled)
        elif measure is not None and read_as is not None:
            measures, measured = measure(read_as[0], read_as[1], settled, texts=texts)
            profile.add(measures, tokens)
            settled = settled & ~measured
        rows = table.filter(pa.array(settled)).to_pylist() if settled.any() else []
        transcripts += [m for m in map(partial(_decoded, fmt), rows) if m is not None]
    if transcripts:
        profile.add(measure_transcripts(transcripts, texts=texts), tokens)
    return profile
