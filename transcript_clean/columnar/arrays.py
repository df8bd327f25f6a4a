"""The NumPy and Arrow helpers every columnar step shares: a batch's list columns flattened
to elements with their rows, per-row counts and masks, and the blank and JSON-object tests that
Arrow compute runs. They know no format and no rule: the formats' flatteners, the rules' Arrow
checks and the fast path all build on them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.jsontext import LONG_DIGITS, strict_loads

Mask = npt.NDArray[np.bool_]
Counts = npt.NDArray[np.int64]

# A character that `str.strip()` keeps: the text holds something (SPEC section 2's blank test).
# The class lists every character for which Python's `str.isspace()` is true.
NOT_SPACE = (
    "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"
)


# A flat JSON object (values strings, numbers, true, false or null), in RFC 8259's grammar:
# text it matches is one `strict_loads` reads as a dict, so most arguments need no parsing.
# Its numbers with a fraction or an exponent stay below 1e308, so none overflows a double
# (`1e999` is no JSON number to a provider), and its `\u` escapes are no lone surrogates: text
# outside it is parsed.
_WS = r"[ \t\n\r]*"
_HEX = "[0-9a-fA-F]"
_ESCAPE = (
    f"\\\\u(?:[0-9a-cA-Ce-fE-F]{_HEX}{{3}}|[dD][0-7]{_HEX}{{2}}"
    f"|[dD][89abAB]{_HEX}{{2}}\\\\u[dD][c-fC-F]{_HEX}{{2}})"
)
_STRING = f'"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|{_ESCAPE})*"'
_NUMBER = (
    r"-?(?:0|[1-9][0-9]*"  # an integer, of any size
    r"|(?:0|[1-9][0-9]{0,99})(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,2})?"  # below 1e200
    r"|[0-9](?:\.[0-9]+)?[eE](?:-[0-9]+|\+?(?:[0-2][0-9]{2}|30[0-7]))"  # as repr writes
    r"|1(?:\.[0-6][0-9]*)?[eE]\+?308)"  # the largest double is 1.797...e308
)
_MEMBER = f"{_WS}{_STRING}{_WS}:{_WS}(?:{_STRING}|{_NUMBER}|true|false|null){_WS}"
FLAT_OBJECT = f"^{_WS}\\{{(?:{_MEMBER}(?:,{_MEMBER})*|{_WS})\\}}{_WS}$"


def last_of_rows(values: Counts, parent: npt.NDArray[np.int64], rows: int) -> Counts:
    """Per row, the value of its last element (0 for a row with none)."""
    out = np.zeros(rows, dtype=np.int64)
    last = np.flatnonzero(~neighbours(parent)[1])
    out[parent[last]] = values[last]
    return out


def field_type(struct: pa.DataType, name: str) -> pa.DataType | None:
    index = struct.get_field_index(name)
    return None if index < 0 else struct.field(index).type


def is_text(type_: pa.DataType | None) -> bool:
    return type_ is not None and (pa.types.is_string(type_) or pa.types.is_large_string(type_))


def as_mask(array: pa.Array | pa.ChunkedArray, fill: bool = False) -> Mask:
    """A boolean Arrow array as NumPy, nulls as `fill`: its bits unpacked from its buffers
    (`to_numpy` of a boolean array cost ten times as much, about 0.1 ms per 100,000 values, and
    the fast path makes a hundred such masks per batch)."""
    if isinstance(array, pa.BooleanArray):
        values = _bits(array.buffers()[1], array.offset, len(array))
        if array.null_count:
            valid = validity(array)
            values = (values & valid) | (~valid if fill else False)
        return values
    if array.null_count:
        array = pc.fill_null(array, fill)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> Mask:
    """`length` bits of a bitmap from bit `offset` on, as booleans (False where it has none)."""
    if buffer is None or not length:
        return np.zeros(length, dtype=bool)
    bits = np.unpackbits(
        np.frombuffer(buffer, dtype=np.uint8), count=offset + length, bitorder="little"
    )
    out: Mask = bits[offset:].view(bool)
    return out


def long_digits(texts: pa.Array) -> Mask:
    """Per text (null: False), whether it holds a run of `jsontext.LONG_DIGITS`, which may be an
    integer orjson reads as a float: such JSON text is for the standard library to read. The
    bytes of all the texts are looked at once first (`digit_run`): where they hold no such run,
    the common case, no text does (a regular expression over each text cost about 170 ns a
    text, more than half what orjson takes to parse a call)."""
    if is_text(texts.type) and not digit_run(text_bytes(texts)[1]):
        return np.zeros(len(texts), dtype=bool)
    return as_mask(pc.match_substring_regex(texts, LONG_DIGITS))


_WINDOW = np.arange(-8, 19)


def digit_run(data: npt.NDArray[np.uint8]) -> bool:
    """Whether `data` holds a run of 19 ASCII digits, at about 0.1 ns a byte: every such run
    holds two bytes nine apart at multiples of nine, so only the bytes at multiples of nine
    are looked at, and around the pairs of digits among them, the 27 bytes a run through both
    may cover."""
    n = len(data)
    if n < 19:
        return False
    sampled = (data[::9] - np.uint8(0x30)) < 10
    at = np.flatnonzero(sampled[:-1] & sampled[1:]) * 9
    if not len(at):
        return False
    where = at[:, None] + _WINDOW
    digit = (where >= 0) & (where < n) & ((data[np.clip(where, 0, n - 1)] - np.uint8(0x30)) < 10)
    runs = np.zeros((len(at), len(_WINDOW) + 1), dtype=np.int16)
    np.cumsum(digit, axis=1, out=runs[:, 1:])
    return bool((runs[:, 19:] - runs[:, :9] == 19).any())


def rows_with(flags: Mask, parent: npt.NDArray[np.int64], rows: int) -> Mask:
    """Rows (or any groups: messages, parts) where any of their elements is flagged."""
    return count(flags, parent, rows) > 0


def sole(flags: Mask, parent: npt.NDArray[np.int64], groups: int) -> npt.NDArray[np.int64]:
    """Per group (a message of parts, a result of blocks), the position of its one element
    where it has exactly one and that one is flagged (a text); -1 for any other group."""
    sizes = np.bincount(parent, minlength=groups)
    out = np.full(groups, -1, dtype=np.int64)
    at = np.flatnonzero(flags & (sizes[parent] == 1))
    out[parent[at]] = at
    return out


def any_of(masks: Iterable[Mask], rows: int) -> Mask:
    """Per row, whether any of `masks` holds it (none for no masks)."""
    out = np.zeros(rows, dtype=bool)
    for mask in masks:
        out |= mask
    return out


def count(
    flags: Mask, parent: npt.NDArray[np.int64], rows: int, weights: Counts | None = None
) -> Counts:
    """Per row, its elements flagged (or the sum of their `weights`)."""
    weighed = None if weights is None else weights[flags]
    return np.bincount(parent[flags], weights=weighed, minlength=rows).astype(np.int64)


def text_bytes(text: pa.Array) -> tuple[Counts, npt.NDArray[np.uint8]]:
    """A string array's offsets (from its own first value) and the bytes its values use, read
    from its buffers without a copy."""
    buffers = text.buffers()
    wide = pa.types.is_large_string(text.type)
    stored = np.frombuffer(buffers[1], dtype=np.int64 if wide else np.int32)
    offsets: Counts = stored[text.offset : text.offset + len(text) + 1].astype(np.int64)
    if buffers[2] is None or not len(text):
        return offsets, np.zeros(0, dtype=np.uint8)
    return offsets, np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0] : offsets[-1]]


# The first byte, in UTF-8, of every white-space character of `NOT_SPACE`'s class: a text that
# starts with any other byte holds something.
SPACE_LEADS = np.zeros(256, dtype=bool)
SPACE_LEADS[[*range(0x09, 0x0E), *range(0x1C, 0x21), 0xC2, 0xE1, 0xE2, 0xE3]] = True


def holds_text(text: pa.Array) -> Mask:
    """Per text, whether it holds something besides white space (what `str.strip()` keeps; a
    null holds nothing): matching `NOT_SPACE`, but only where the first byte leaves a doubt.
    Most texts start with a letter, told from the buffers at a byte a text: a regular
    expression over every text cost a flattener more than the rest of its blank tests."""
    if not is_text(text.type) or isinstance(text, pa.ChunkedArray) or not len(text):
        return as_mask(pc.match_substring_regex(text, NOT_SPACE), fill=False)
    offsets, used = text_bytes(text)
    spoken = offsets[1:] > offsets[:-1]
    if text.null_count:
        spoken &= as_mask(text.is_valid())
    first = np.zeros(len(text), dtype=np.uint8)
    first[spoken] = used[offsets[:-1][spoken] - offsets[0]]
    doubt = spoken & SPACE_LEADS[first]
    out: Mask = spoken & ~doubt
    if doubt.any():
        look = text.take(indices(np.flatnonzero(doubt)))
        out[doubt] = as_mask(pc.match_substring_regex(look, NOT_SPACE), fill=False)
    return out


def with_nulls(text: pa.Array, keep: Mask) -> pa.Array:
    """`text` (a string array) null where `keep` is False: the values `pc.if_else(keep, text,
    null)` gives, with the texts' bytes not copied (only a new validity bitmap)."""
    if not is_text(text.type):
        return pc.if_else(pa.array(keep), text, pa.nulls(len(text), text.type))
    valid = keep & validity(text) if text.null_count else keep
    # The bitmap is read from the array's offset on, as its other buffers are.
    padded = np.concatenate([np.zeros(text.offset, dtype=bool), valid])
    bits = np.packbits(padded, bitorder="little")
    buffers = text.buffers()
    return pa.Array.from_buffers(
        text.type,
        len(text),
        [pa.py_buffer(bits), buffers[1], buffers[2]],
        null_count=len(text) - int(valid.sum()),
        offset=text.offset,
    )


def list_sizes(array: pa.Array) -> Counts:
    """Each row's items of a list array (0 for a null row): its offsets' steps, read without a
    copy, and, where rows are null, times their validity bits (a null row's offsets need not
    be equal). `list_value_length` then `fill_null` cost 3x as much on a column of many nulls,
    as a message's `tool_calls` is."""
    if not isinstance(array, pa.ListArray | pa.LargeListArray):
        sizes: Counts = pc.fill_null(pc.list_value_length(array), 0).to_numpy().astype(np.int64)
        return sizes
    steps = np.diff(array.offsets.to_numpy())
    if array.null_count:
        steps *= validity(array)
    out: Counts = steps.astype(np.int64)
    return out


def validity(array: pa.Array) -> Mask:
    """Per element of `array`, whether it is valid: its validity bitmap unpacked (all True
    where it has none)."""
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.ones(len(array), dtype=bool)
    return _bits(bitmap, array.offset, len(array))


def indices(positions: npt.NDArray[np.int64]) -> pa.Array:
    return pa.array(positions, type=pa.int64())


def lists_of(
    type_: pa.DataType, sizes: Counts, values: pa.Array, mask: pa.Array | None = None
) -> pa.Array:
    """A list column of `type_` (a list or large list) whose rows hold `sizes` elements each,
    taken in order from `values`; `mask`: its null rows."""
    large = pa.types.is_large_list(type_)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(sizes, out=offsets[1:])
    kind = pa.LargeListArray if large else pa.ListArray
    return kind.from_arrays(pa.array(offsets), values, type=type_, mask=mask)


def joined_lists(first: pa.Array, second: pa.Array) -> pa.Array | None:
    """Row by row, the items of list array `first` followed by those of `second`, as one list
    column (a null row holds no items); items of two struct types are read as one type with
    the fields of both (a field one of them lacks is null in its items). None where the two
    types of items do not unify."""
    kind, other = first.type.value_type, second.type.value_type
    if pa.types.is_null(kind):  # (no items in any row: a type of none)
        kind = other
    elif not pa.types.is_null(other) and other != kind:
        if not (pa.types.is_struct(kind) and pa.types.is_struct(other)):
            return None
        try:
            schemas = [pa.schema(list(kind)), pa.schema(list(other))]
            kind = pa.struct(list(pa.unify_schemas(schemas, promote_options="permissive")))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    type_ = pa.list_(pa.field(first.type.value_field.name, kind))
    try:
        a, b = pc.list_flatten(first).cast(kind), pc.list_flatten(second).cast(kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    sizes_a, sizes_b = list_sizes(first), list_sizes(second)
    total = sizes_a + sizes_b
    row = np.repeat(np.arange(len(first), dtype=np.int64), total)
    place = np.arange(int(total.sum()), dtype=np.int64) - (np.cumsum(total) - total)[row]
    start_a = np.cumsum(sizes_a) - sizes_a
    start_b = np.cumsum(sizes_b) - sizes_b + len(a)
    index = np.where(
        place < sizes_a[row], start_a[row] + place, start_b[row] + place - sizes_a[row]
    )
    return lists_of(type_, total, pa.concat_arrays([a, b]).take(indices(index)))


def with_child(structs: pa.Array, name: str, child: pa.Array) -> pa.Array:
    """A struct array with its field `name` replaced by `child` (of the same length)."""
    children = [
        child if child_field.name == name else values
        for child_field, values in zip(structs.type, structs.flatten(), strict=True)
    ]
    mask = structs.is_null() if structs.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(structs.type), mask=mask)


def previous_unflagged(at: Counts, flagged: Mask, group: Counts) -> Counts:
    """Of the elements at `at`, the last element before each in its group (`group`: each
    element's) that `flagged` does not flag, -1 for none: the element before, stepped back
    over flagged ones (few, a step or two: system messages); past a long run of them, read
    with one pass over every element."""
    before = at - 1
    fits = before >= 0
    fits[fits] = group[before[fits]] == group[at[fits]]
    before[~fits] = -1
    look = np.flatnonzero(before >= 0)
    look = look[flagged[before[look]]]
    for _ in range(4):
        if not len(look):
            return before
        back = before[look] - 1
        fits = back >= 0
        fits[fits] = group[back[fits]] == group[at[look[fits]]]
        before[look] = np.where(fits, back, -1)
        look = look[fits]
        look = look[flagged[before[look]]]
    if not len(look):
        return before
    positions = np.arange(len(flagged), dtype=np.int64)
    last = np.maximum.accumulate(np.where(flagged, -1, positions))
    out: Counts = np.where(at > 0, last[np.maximum(at - 1, 0)], -1)
    out[(out >= 0) & (group[np.maximum(out, 0)] != group[at])] = -1
    return out


def flattened(array: pa.Array) -> tuple[pa.Array, Counts, Counts]:
    """A list column's items, each row's number of them, and each item's row."""
    sizes = list_sizes(array)
    parent: Counts = np.repeat(np.arange(len(array), dtype=np.int64), sizes)
    return pc.list_flatten(array), sizes, parent


def flatten(array: pa.Array) -> tuple[Mask, pa.Array, npt.NDArray[np.int64]]:
    """A list column's rows that are null or empty (so not settled here), its elements
    flattened, and each element's row."""
    items, sizes, parent = flattened(array)
    empty: Mask = as_mask(array.is_null()) | (sizes == 0)
    return empty, items, parent


def neighbours(parent: npt.NDArray[np.int64]) -> tuple[Mask, Mask]:
    """Per element, whether the one before it and the one after it are in the same row."""
    same_prev = np.zeros(len(parent), dtype=bool)
    same_prev[1:] = parent[1:] == parent[:-1]
    same_next = np.zeros(len(parent), dtype=bool)
    same_next[:-1] = same_prev[1:]
    return same_prev, same_next


def run_starts(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per element of sorted `keys`, the position of the first element with its key: what
    `np.searchsorted(keys, keys)` finds, in one pass instead of a search per element."""
    positions = np.arange(len(keys), dtype=np.int64)
    new = np.ones(len(keys), dtype=bool)
    new[1:] = keys[1:] != keys[:-1]
    starts: npt.NDArray[np.int64] = np.maximum.accumulate(np.where(new, positions, 0))
    return starts


def repeated(keys: npt.NDArray[np.int64]) -> Mask:
    """Which keys occur earlier in `keys` too."""
    out = np.zeros(len(keys), dtype=bool)
    if len(keys):
        order = np.argsort(keys, kind="stable")
        out[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    return out


def shift(values: Mask) -> Mask:
    """`values` moved one place on: each element sees its predecessor's (the first, False)."""
    out = np.zeros(len(values), dtype=bool)
    out[1:] = values[:-1]
    return out


def finite(array: pa.Array) -> Mask:
    """Per element, whether every number in it is finite: strict JSON has no NaN or infinity,
    which a float column may hold. Nested too deep to look into: not known to be."""
    try:
        return ~flagged_within(array, _not_finite)
    except RecursionError:
        return np.zeros(len(array), dtype=bool)


def _not_finite(array: pa.Array) -> Mask | None:
    if pa.types.is_floating(array.type):
        return ~as_mask(pc.is_finite(array), fill=True)
    return None


def flagged_within(array: pa.Array, flag: Callable[[pa.Array], Mask | None]) -> Mask:
    """Per element of `array`, whether any value within it (through structs, lists, maps' values
    and dictionaries) is one `flag` flags. `flag` answers for the arrays it judges, per
    element, and with None for the rest, which are looked into. An array holding `pa.json_()`
    values is the caller's to give as its text (`fastpath.base.flagged_within`)."""
    flagged = flag(array)
    if flagged is not None:
        return flagged
    type_, n = array.type, len(array)
    if pa.types.is_dictionary(type_):
        words = flagged_within(array.dictionary, flag)
        if not words.any():
            return np.zeros(n, dtype=bool)
        codes = pc.fill_null(array.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        used: Mask = words[codes] & ~np.asarray(array.is_null(), dtype=bool)
        return used
    if pa.types.is_struct(type_):
        return any_of((flagged_within(child, flag) for child in array.flatten()), n)
    if pa.types.is_map(type_):
        array = pa.ListArray.from_arrays(array.offsets, array.items, mask=array.is_null())
        type_ = array.type
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        parent = pc.list_parent_indices(array).to_numpy().astype(np.int64)
        return rows_with(flagged_within(pc.list_flatten(array), flag), parent, n)
    return np.zeros(n, dtype=bool)


def first_flagged(flags: Mask, parent: npt.NDArray[np.int64], rows: int) -> Counts:
    """Per row, the position of its first flagged element (past the last element if none)."""
    first = np.full(rows, len(parent), dtype=np.int64)
    at = np.flatnonzero(flags)
    np.minimum.at(first, parent[at], at)
    return first


def objects(arguments: pa.Array) -> Mask:
    """Whether each call's arguments are a JSON object: a struct is one, text must parse, and
    anything else (a map reads back as a list of pairs) is not."""
    if pa.types.is_struct(arguments.type):
        return ~as_mask(arguments.is_null()) & finite(arguments)
    if not is_text(arguments.type):
        return np.zeros(len(arguments), dtype=bool)
    # A flat object is one for sure; of the rest, only text that looks like one is parsed.
    out = as_mask(pc.match_substring_regex(arguments, FLAT_OBJECT))
    rest = np.flatnonzero(~out)
    if len(rest):
        texts = arguments.take(indices(rest))
        candidates = rest[as_mask(pc.match_substring_regex(texts, r"^\s*\{"))]
        out[candidates] = [is_object(t) for t in arguments.take(indices(candidates)).to_pylist()]
    return out


def is_object(text: str) -> bool:
    try:
        return isinstance(strict_loads(text), dict)
    except (ValueError, RecursionError):
        return False


def text_lengths(text: pa.Array) -> Counts:
    """Characters (code points, as Python's `len`) of each text, 0 for null. Texts that are
    all ASCII (a look at the bytes they use, about twenty times cheaper than counting) have
    as many characters as bytes, read from the offsets."""
    offsets, used = text_bytes(text)
    if used.max(initial=0) >= 0x80:
        counted: Counts = pc.fill_null(pc.utf8_length(text), 0).to_numpy().astype(np.int64)
        return counted
    lengths: Counts = np.diff(offsets)
    if text.null_count:
        lengths[~as_mask(text.is_valid())] = 0
    return lengths


def fields_agree(first: pa.Array, second: pa.Array, skip: Collection[str]) -> Mask:
    """Per pair of structs (`first[k]`, `second[k]`), whether their fields other than `skip`
    agree: both null (a missing key and a null one agree), or equal values that are not nested
    (a nested value is compared by nobody here: such a pair does not agree). A null struct
    agrees with nothing."""
    fine = ~as_mask(first.is_null()) & ~as_mask(second.is_null())
    for child_field in first.type:
        if child_field.name in skip:
            continue
        one = pc.struct_field(first, child_field.name)
        two = pc.struct_field(second, child_field.name)
        same = as_mask(one.is_null()) & as_mask(two.is_null())
        if not pa.types.is_nested(child_field.type) and not pa.types.is_null(child_field.type):
            same |= as_mask(pc.fill_null(pc.equal(one, two), False))
        fine &= same
    return fine


def whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`column` as one array: its only chunk as it is (`combine_chunks` copies even one chunk,
    a copy of the whole column; the engine reads a batch as large as the fast path looks at)."""
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()
