"""The edits a rule's repair decides over a batch's `Conversations`, in canonical terms, and
what every format's writer shares to put them back in its own layout.

A rule decides once, over the view, what its repair does to some rows (drop these messages,
join those into that one); the format that flattened the batch writes the edits back into its
conversation column (`Format.write`), knowing no rule: it gets edits, not codes. Everything
here is NumPy and Arrow: no row becomes Python objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
    Counts,
    Mask,
    as_mask,
    field_type,
    flattened,
    indices,
    is_text,
    lists_of,
    run_starts,
    with_child,
)
from transcript_clean.columnar.conversations import Conversations, first_items

V = TypeVar("V")

__all__ = [
    "JOINER",
    "Answers",
    "Edits",
    "Inserts",
    "Merges",
    "Subset",
    "appended_lists",
    "drop_elements",
    "first_items",
    "first_items_of",
    "inserted_lists",
    "item_origins",
    "item_sources",
    "joins_texts",
    "merged_texts",
    "removed_items",
    "replaced",
    "taken",
    "with_values",
    "write_appended",
    "write_joined",
    "write_merged",
    "written",
]

JOINER: Final = "\n\n"
"""What joins merged texts in a format whose message holds one string (SPEC R4; the same as
`formats.base.TEXT_JOINER`, which a test holds it to)."""


@dataclass(slots=True, frozen=True)
class Merges:
    """Messages joined into the message before them (R4): per message of the view, `into` the
    message it is joined into (-1: none), and `adds`, whether its parts are appended there
    (False: it repeats that message and is dropped with nothing added). A message receiving
    others is never itself joined; those joined into it follow it, in order."""

    into: Counts
    adds: Mask

    @property
    def joined(self) -> Mask:
        """Per message: joined into another (its items go)."""
        out: Mask = self.into >= 0
        return out

    @property
    def grown(self) -> Counts:
        """The messages that gain parts, ascending."""
        out: Counts = np.unique(self.into[self.adds & self.joined])
        return out


@dataclass(slots=True, frozen=True)
class Answers:
    """Results written anew in place of those there (R2's answers), each an error result of one
    text, as `transcript.tool_result_message` makes it: per result, its position among the
    view's results, the call it answers (by position among the view's calls) and its text."""

    result: Counts
    call: Counts
    text: pa.Array


@dataclass(slots=True, frozen=True)
class Inserts:
    """Results made by a repair (R5's error results): per new result, the call it answers (a
    position among the view's calls) and the message it goes into, the user message that
    answers the call's turn, after the results that message opens with (-1: none answers it,
    and the results of the turn become a new user message right after it). In the order they
    are written: by message, then by call. Each says `text` and is an error."""

    call: Counts
    into: Counts
    text: str

    def __len__(self) -> int:
        return len(self.call)


@dataclass(slots=True, frozen=True)
class Edits:
    """What the repairs of some rows of a batch change, over the view of that batch: the rows
    to write anew, the messages dropped (R1's empty turns, R5's cut), the messages merged (R4)
    and the results dropped (R3's orphans, for a flattener with `result_item`) and made (R5's
    error results). Messages of other rows are never touched."""

    conversations: Conversations
    rows: Counts
    """The rows written anew, by position in the batch, ascending."""
    drop: Mask
    """Per message of the view: dropped, with its items."""
    merges: Merges | None = None
    drop_results: Mask | None = None
    """Per result of the view: dropped, with its item (`Conversations.result_item`)."""
    answers: Answers | None = None
    """Results written anew in their place (a format that writes them: `Format.write`)."""
    inserts: Inserts | None = None
    """Results made (a format that says it writes them: `Format.writes_results`)."""

    @property
    def inserting(self) -> bool:
        """Whether the edits make results (which only a format that says so writes)."""
        return self.inserts is not None and len(self.inserts) > 0

    @property
    def removed(self) -> Mask:
        """Per message: its items are not written (dropped, or joined into another)."""
        if self.merges is None:
            return self.drop
        out: Mask = self.drop | self.merges.joined
        return out


@dataclass(slots=True, frozen=True)
class Subset:
    """Some rows of a batch, to be written anew, and their flattened elements."""

    rows: Counts
    """The rows, by position in the batch."""
    elements: Counts
    """Their elements, by position among the batch's flattened elements."""
    parent: Counts
    """Each of those elements' row, by position in `rows`."""

    @classmethod
    def of(cls, rows: Counts, parent: Counts, batch_rows: int) -> Subset:
        """The rows at `rows` of a batch of `batch_rows` rows whose elements' rows are `parent`."""
        row_at = np.full(batch_rows, -1, dtype=np.int64)
        row_at[rows] = np.arange(len(rows), dtype=np.int64)
        elements = np.flatnonzero(row_at[parent] >= 0)
        return cls(rows, elements, row_at[parent[elements]])

    def renumbered(self, values: Mapping[int, V]) -> dict[int, V]:
        """`values`, kept by the positions of batch elements, kept by their positions among the
        subset's elements instead (those of other rows left out)."""
        if not values or not len(self.elements):
            return {}
        elements = np.fromiter(values, dtype=np.int64, count=len(values))
        at = np.minimum(np.searchsorted(self.elements, elements), len(self.elements) - 1)
        found = (self.elements[at] == elements).tolist()
        return {
            place: value
            for place, value, ok in zip(at.tolist(), values.values(), found, strict=True)
            if ok
        }

    def places(self) -> Counts:
        """Each element's place in its row (every element of a row is among `elements`)."""
        out: Counts = self.elements - self.elements[run_starts(self.parent)]
        return out

    def column(self, type_: pa.DataType, values: pa.Array, drop: Mask) -> pa.Array:
        """The subset's rows as a list column of `type_`, from `values` (their elements, in
        order) without the elements `drop` flags (among the batch's)."""
        return drop_elements(type_, len(self.rows), values, drop[self.elements], self.parent)


def drop_elements(
    type_: pa.DataType, rows: int, values: pa.Array, drop: Mask, parent: Counts
) -> pa.Array:
    """A list column of `rows` rows from their flattened elements `values` (`parent` gives each
    one's row; no row is null), without those flagged in `drop`."""
    keep = ~drop
    counts = np.bincount(parent[keep], minlength=rows)
    return lists_of(type_, counts, values.filter(pa.array(keep)))


def replaced(array: pa.Array, positions: Counts, new: pa.Array) -> pa.Array:
    """`array` with its elements at `positions` (in order) replaced by those of `new`."""
    n = len(array)
    index = np.arange(n, dtype=np.int64)
    index[positions] = n + np.arange(len(positions), dtype=np.int64)
    return pa.concat_arrays([array, new.cast(array.type)]).take(indices(index))


def with_values(structs: pa.Array, name: str, positions: Counts, values: pa.Array) -> pa.Array:
    """A struct array with its field `name` set to `values` at `positions` (ascending)."""
    if not len(positions):
        return structs
    return with_child(structs, name, replaced(pc.struct_field(structs, name), positions, values))


Rewrite = Callable[[pa.Array, Counts], pa.Array]
"""A format's rewrite of the items of the rows an edit writes: given those items (in order) and
their positions among the batch's items, the items as they are to be written."""


def written(column: pa.Array, edits: Edits, rewrite: Rewrite | None = None) -> pa.Array:
    """The rows of `edits` as a list column of `column`'s type: their items, rewritten by the
    format (`rewrite`, where a merge changes an item), without the items of the messages the
    edits remove. For a format whose messages are whole items (`item_message`)."""
    items, _, parent = flattened(column)
    chosen = Subset.of(edits.rows, parent, len(column))
    values = items.take(indices(chosen.elements))
    if rewrite is not None:
        values = rewrite(values, chosen.elements)
    return chosen.column(column.type, values, removed_items(edits, len(items)))


def removed_items(edits: Edits, items: int) -> Mask:
    """Per item of the conversation column, whether the edits remove it: an item of a message
    dropped or joined into another, or a result dropped."""
    item_message = edits.conversations.item_message
    assert item_message is not None
    whole = item_message >= 0
    gone = np.zeros(items, dtype=bool)
    gone[whole] = edits.removed[item_message[whole]]
    result_item = edits.conversations.result_item
    if edits.drop_results is not None and result_item is not None:
        gone[result_item[edits.drop_results]] = True
    return gone


def item_sources(column: pa.Array, edits: Edits) -> tuple[Counts, Counts, Mask]:
    """Where each item the edits write came from (a format whose line is its items, each
    written back as it came but for the text a merge sets): per row written, its number of
    items, and per item its place in the row as it came in (-1: a result answered anew) and
    whether a merge set its text."""
    items, _, parent = flattened(column)
    chosen = Subset.of(edits.rows, parent, len(column))
    place = chosen.places()
    rewritten = np.zeros(len(items), dtype=bool)
    c = edits.conversations
    if edits.merges is not None and c.item_message is not None:
        grown = edits.merges.grown
        rewritten[first_items_of(c.item_message, c.messages, grown)] = True
    if edits.answers is not None and c.result_item is not None:
        made = np.zeros(len(items), dtype=bool)
        made[c.result_item[edits.answers.result]] = True
        place = np.where(made[chosen.elements], -1, place)
    kept = ~removed_items(edits, len(items))[chosen.elements]
    sizes = np.bincount(chosen.parent[kept], minlength=len(chosen.rows)).astype(np.int64)
    return sizes, place[kept], rewritten[chosen.elements][kept]


def inserted_lists(lists: pa.Array, values: pa.Array, owner: Counts, before: Counts) -> pa.Array:
    """`lists` (a list array) with `values` put in: each into the list `owner` gives, before
    the element `before` gives (its place in that list; the list's size or more: at its end),
    after the values put there before it in `values`, which hold the lists' element type."""
    elements, sizes, parent = flattened(lists)
    place = np.arange(len(elements), dtype=np.int64) - (np.cumsum(sizes) - sizes)[parent]
    row = np.concatenate([parent, owner])
    slot = np.concatenate([place, np.minimum(before, sizes[owner])])
    old = np.concatenate([np.ones(len(parent), dtype=bool), np.zeros(len(owner), dtype=bool)])
    order = np.lexsort((np.arange(len(row), dtype=np.int64), old, slot, row))
    counts = sizes + np.bincount(owner, minlength=len(lists))
    mask = lists.is_null() if lists.null_count else None
    both = pa.concat_arrays([elements, values]).take(indices(order))
    return lists_of(lists.type, counts, both, mask)


def first_items_of(item_message: Counts, messages: int, positions: Counts) -> Counts:
    """`first_items` of the messages at `positions` only (a few, those a merge grows): found
    by a search where every item is part of a message (then `item_message` is sorted)."""
    if len(item_message) and item_message[0] >= 0 and (item_message >= 0).all():
        out: Counts = np.searchsorted(item_message, positions).astype(np.int64)
        found = out < len(item_message)
        found[found] = item_message[out[found]] == positions[found]
        return np.where(found, out, -1)
    return first_items(item_message, messages)[positions]


def taken(values: pa.Array, at: Counts) -> pa.Array:
    """`values` at the positions `at`, null where a position is -1."""
    return values.take(pa.array(np.maximum(at, 0), pa.int64(), mask=at < 0))


def item_origins(
    items: pa.Array, item_message: Counts, messages: int
) -> Callable[[Counts], pa.Array]:
    """Of the messages at the positions given, the item each starts with (null for one with
    none): its `origin`, for a format whose decoder keeps a message's first item as its origin
    (`Conversations.message_origin`)."""
    # Asked only for the few messages a merge grows: found for those alone, not for every one.
    return lambda positions: taken(items, first_items_of(item_message, messages, positions))


def merged_texts(merges: Merges, text: Callable[[Counts], pa.Array]) -> tuple[Counts, pa.Array]:
    """The messages that gain parts, and each one's text once the texts of those joined into it
    are appended, as a format whose message holds one string writes them (SPEC R4,
    `formats.base.join_texts`): joined with a blank line, the blank ones (white space only) left
    out; all blank, joined as they are. `text` gives the texts of the messages at the positions
    it is given (`Conversations.message_text`)."""
    grown = merges.grown
    if not len(grown):
        return grown, pa.array([], pa.large_string())
    # The pieces: each grown message's own text, then those of the messages adding to it.
    adding = np.flatnonzero(merges.adds & merges.joined)
    owner = np.concatenate([grown, merges.into[adding]])
    piece = np.concatenate([grown, adding])
    order = np.lexsort((piece, owner))
    owner, piece = owner[order], piece[order]
    texts = text(piece).cast(pa.large_string())
    said = as_mask(pc.match_substring_regex(texts, NOT_SPACE), fill=False)
    place = np.searchsorted(grown, owner)
    said_any = np.zeros(len(grown), dtype=bool)
    said_any[place[said]] = True
    # Where any piece says something, the blank ones are left out; else all are joined.
    kept = said | ~said_any[place]
    counts = np.bincount(place[kept], minlength=len(grown))
    offsets = np.zeros(len(grown) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    lists = pa.ListArray.from_arrays(pa.array(offsets), texts.filter(pa.array(kept)))
    with_blank_lines = pc.binary_join(lists, pa.scalar(JOINER, pa.large_string()))
    as_they_are = pc.binary_join(lists, pa.scalar("", pa.large_string()))
    joined = pc.if_else(pa.array(said_any), with_blank_lines, as_they_are)
    return grown, joined


def appended_lists(items: pa.Array, name: str, owner: Counts) -> pa.Array:
    """Items (structs) whose list field `name` gains the elements of other items: each item's
    elements go to the item `owner` gives it (itself where they stay), after that item's own
    and those of the items before it, as a format whose message is a list of parts writes a
    merge (SPEC R4: the second's parts appended to the first's)."""
    lists = pc.struct_field(items, name)
    elements, _, element_item = flattened(lists)
    moved_to = owner[element_item]
    order = np.argsort(moved_to, kind="stable")
    counts = np.bincount(moved_to, minlength=len(items))
    mask = lists.is_null() if lists.null_count else None
    rebuilt = lists_of(lists.type, counts, elements.take(indices(order)), mask)
    return with_child(items, name, rebuilt)


def joins_texts(column: pa.Array, name: str) -> bool:
    """Whether a message of `column` holds what it says in `name` as one text (R4 joins texts
    into it; only a message that is one text can grow) rather than a list of parts."""
    return is_text(field_type(column.type.value_type, name))


def write_merged(column: pa.Array, edits: Edits, name: str) -> pa.Array:
    """The rows of `edits` written by a format whose assistant message is one item holding
    what it says in the field `name`: `write_joined` where it is text, else `write_appended`."""
    if joins_texts(column, name):
        return write_joined(column, edits, name)
    return write_appended(column, edits, name)


def write_joined(column: pa.Array, edits: Edits, name: str) -> pa.Array:
    """The rows of `edits` written by a format whose assistant message is one item holding its
    text in the text field `name` (ShareGPT's `value`, Anthropic's string `content`): a message
    that others are joined into gets their texts joined into that field (`merged_texts`); each
    such message is one text, or its text beside reasoning the merge leaves as it is
    (`consecutive_assistant.merges` with `plain_first`, `Conversations.merge_text`)."""
    merges = edits.merges
    if merges is None or not len(merges.grown):
        return written(column, edits)
    c = edits.conversations
    assert c.item_message is not None and c.message_text is not None
    grown, texts = merged_texts(merges, c.merge_text or c.message_text)
    first = first_items_of(c.item_message, c.messages, grown)

    def rewrite(items: pa.Array, elements: Counts) -> pa.Array:
        return with_values(items, name, np.searchsorted(elements, first), texts)

    return written(column, edits, rewrite)


def write_appended(column: pa.Array, edits: Edits, name: str) -> pa.Array:
    """The rows of `edits` written by a format whose assistant message is one item holding its
    parts in the list field `name` (rig's, LLaMA-Factory's and Anthropic's blocks `content`): a
    message that others are joined into gets their parts appended (`appended_lists`)."""
    merges = edits.merges
    if merges is None or not len(merges.grown):
        return written(column, edits)
    c = edits.conversations
    assert c.item_message is not None
    first = c.first_items()
    # Per item of a message whose parts are appended to another's: that message's first item.
    adding = merges.adds & merges.joined
    whole = c.item_message >= 0
    moves = np.zeros(len(c.item_message), dtype=bool)
    moves[whole] = adding[c.item_message[whole]]
    target = np.where(moves, first[merges.into[np.maximum(c.item_message, 0)]], -1)

    def rewrite(items: pa.Array, elements: Counts) -> pa.Array:
        own = np.arange(len(elements), dtype=np.int64)
        to = target[elements]
        owner = np.where(to >= 0, np.searchsorted(elements, np.maximum(to, 0)), own)
        return appended_lists(items, name, owner)

    return written(column, edits, rewrite)
