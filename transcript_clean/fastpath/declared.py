"""The fast path's checks for the declared-tools codes (issue 17), for every format's view.

A row that declares no tools has none of `unknown_tool`, `tool_arguments_schema` and
`invalid_tool_declaration`. Of the rows that do, the distinct declarations of a batch are each
read once (their JSON text, or their value's canonical JSON), which settles
`invalid_tool_declaration`. Where the view brings its calls (`ArrowView.calls`: OpenAI's), each
distinct (declarations, tool name) pair is looked up once and each distinct (schema, arguments)
pair validated once, so rows whose calls all name declared tools and validate are cleared
without a Python object per row; for other views, a row that declares tools may have them.

A call to a raw-input tool is flagged (its arguments are R2's question, the per-row path's to
answer), and so are rows whose declarations' value cannot be read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, finite, indices, is_text, long_digits
from transcript_clean.fastpath.base import ArrowView, FastReject, ToolCounts
from transcript_clean.fastpath.struct_schemas import object_fails, struct_fails
from transcript_clean.jsontext import orjson_loads, strict_loads
from transcript_clean.rules.base import raw_input_names
from transcript_clean.rules.tool_arguments_schema import message as schema_message
from transcript_clean.rules.unknown_tool import message as unknown_message
from transcript_clean.sources import jsontypes
from transcript_clean.tools import (
    Declared,
    SimpleSchema,
    arguments_error,
    canonical,
    fast_validator,
    json_loads,
    read_declarations,
    simple_schema,
)

__all__ = [
    "INVALID_DECLARATION",
    "SCHEMA",
    "UNKNOWN",
    "ToolCounts",
    "declared_rejects",
    "raw_input_calls",
    "tool_checks",
    "tool_counts",
    "with_inner_declarations",
]

UNKNOWN: Final = "unknown_tool"
SCHEMA: Final = "tool_arguments_schema"
INVALID_DECLARATION: Final = "invalid_tool_declaration"


def tool_checks(view: ArrowView) -> dict[str, Mask]:
    """Per declared-tools code, the rows of the view that may have it (worked out once per
    view: the three rules each ask)."""
    if view.tool_masks is None:
        view.tool_masks = _checks(view)
    return view.tool_masks


def tool_counts(view: ArrowView) -> ToolCounts | None:
    """The view's rows' declarations and calls, for the stats; None when it has no calls to
    give (then every row that declares tools takes the per-row path)."""
    if view.calls is None or not view.tools:
        return None
    ids, distinct = _declared(view)
    call_row, names, _ = view.calls
    encoded = pc.dictionary_encode(names)
    tool_names: list[str] = [str(n) for n in encoded.dictionary.to_pylist()]
    place = {n: i for i, n in enumerate(tool_names)}
    declared = []
    for found in distinct:
        listed = [] if found is None else found.names()
        for name in listed:
            if name not in place:
                place[name] = len(tool_names)
                tool_names.append(name)
        declared.append([place[n] for n in listed])
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    known = codes >= 0
    return ToolCounts(tool_names, ids, declared, call_row[known], codes[known])


def raw_input_calls(view: ArrowView) -> tuple[Mask, Mask]:
    """Per call of the view's calls, whether its row declares its tool as one that takes raw
    input (`rules.base.raw_input_names`: its arguments are never invalid), and the rows whose
    declarations are not read here (which may declare any tool so)."""
    assert view.calls is not None
    call_row, names, _ = view.calls
    raw = np.zeros(len(call_row), dtype=bool)
    if not view.tools:
        return raw, np.zeros(view.rows, dtype=bool)
    ids, distinct = _declared(view)
    unread = np.array([d is _UNREAD for d in distinct] + [False])[ids]
    takes_raw = [raw_input_names(d) for d in distinct]
    declaring = np.flatnonzero(np.array([bool(t) for t in takes_raw] + [False])[ids[call_row]])
    for k, name in zip(declaring.tolist(), names.take(indices(declaring)).to_pylist(), strict=True):
        raw[k] = name in takes_raw[int(ids[call_row[k]])]
    return raw, unread


def _declared(view: ArrowView) -> tuple[npt.NDArray[np.int64], list[Declared | None]]:
    """`declared_per_row` of the view's declarations columns, worked out once per view."""
    if view.tool_declared is None:
        view.tool_declared = declared_per_row(view.tools, view.rows)
    ids, distinct = view.tool_declared
    return ids, distinct


def _checks(view: ArrowView) -> dict[str, Mask]:
    rows = view.rows
    ids, distinct = _declared(view)
    has = ids >= 0
    problems = np.array([d is not None and bool(d.problems) for d in distinct] + [False])
    out = {
        INVALID_DECLARATION: problems[ids],
        UNKNOWN: has.copy(),
        SCHEMA: has.copy(),
    }
    if view.calls is None or not has.any():
        return out
    call_row, names, arguments = view.calls
    out[UNKNOWN] = np.zeros(rows, dtype=bool)
    out[SCHEMA] = np.zeros(rows, dtype=bool)
    # A call without a name is the decoder's to reject (`malformed_row`, naming the field),
    # not looked up: its row may have either code, so that only the per-row path settles it.
    nameless = as_mask(names.is_null())
    for code in (UNKNOWN, SCHEMA):
        out[code][call_row[nameless & has[call_row]]] = True
    checked = np.flatnonzero(has[call_row] & ~nameless)
    if not len(checked):
        return out
    declared = ids[call_row[checked]]
    encoded = pc.dictionary_encode(names.take(indices(checked)))
    name_codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    tool_names = encoded.dictionary.to_pylist()

    # Each distinct (declarations, name) pair is looked up once.
    pair_keys = declared * (len(tool_names) + 1) + name_codes
    pairs, pair_of = np.unique(pair_keys, return_inverse=True)
    unknown = np.zeros(len(pairs), dtype=bool)
    raw = np.zeros(len(pairs), dtype=bool)
    schema_of: list[str | None] = []
    for p, key in enumerate(pairs.tolist()):
        found = distinct[key // (len(tool_names) + 1)]
        assert found is not None
        tool = found.tools.get(tool_names[key % (len(tool_names) + 1)])
        # Unreadable declarations are `invalid_tool_declaration`'s alone (as `find` has it).
        unknown[p] = tool is None and not (not found.tools and found.problems)
        raw[p] = tool is not None and tool.raw
        schema_of.append(None if tool is None else tool.schema_key)
    call_unknown = unknown[pair_of]
    call_schema = raw[pair_of].copy()

    # Each distinct (schema, arguments) pair is validated once.
    with_schema = np.array([s is not None for s in schema_of] + [False])[pair_of]
    if with_schema.any():
        at = np.flatnonzero(with_schema)
        texts = arguments.take(indices(checked[at]))
        if pa.types.is_struct(texts.type):  # objects held as structs (Anthropic's, rig's)
            call_schema[at] = _broken_objects(pair_of[at], schema_of, texts)
        elif not is_text(texts.type):
            call_schema[at] = True  # arguments of another type: the per-row path's
        else:
            args = pc.dictionary_encode(texts)
            arg_codes = args.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            arg_texts = args.dictionary.to_pylist()
            long = long_digits(args.dictionary).tolist()
            keys = pair_of[at] * (len(arg_texts) + 1) + arg_codes
            unique, back = np.unique(keys, return_inverse=True)
            broken = _broken(unique, len(arg_texts) + 1, schema_of, arg_texts, long)
            call_schema[at] = broken[back]
    out[UNKNOWN][call_row[checked[call_unknown]]] = True
    out[SCHEMA][call_row[checked[call_schema]]] = True
    schema_keys = [schema_of[p] for p in pair_of[call_schema].tolist()]
    view.tool_found = _Found(
        ids, distinct, checked[call_unknown], checked[call_schema], schema_keys
    )
    return out


@dataclass(slots=True, frozen=True)
class _Found:
    """What the checks found, call by call, for the view's rejects: the rows' declarations, and
    the calls (by position among the view's calls) to an unknown tool and that may break their
    tool's schema (with the schema's key; None for a raw-input tool's, flagged for R2)."""

    ids: npt.NDArray[np.int64]
    distinct: list[Declared | None]
    unknown: npt.NDArray[np.int64]
    schema: npt.NDArray[np.int64]
    schema_keys: list[str | None]


def declared_rejects(
    view: ArrowView,
    rows: dict[str, Mask],
    places: tuple[npt.NDArray[np.int64], ...] | Callable[[], tuple[npt.NDArray[np.int64], ...]],
) -> list[FastReject]:
    """The rows of `rows` (per code, rows whose only possible code it is) rejected for
    `unknown_tool` or `tool_arguments_schema` with the per-row path's words, given each call's
    canonical message index and place in its turn (or what works them out, asked only where a
    row is rejected); a row whose words cannot be told here (a call the schema check only
    flagged) is left out, for the per-row path."""
    tool_checks(view)
    found = view.tool_found
    if found is None or view.calls is None:
        return []
    call_row, names, arguments = view.calls
    worked: list[tuple[npt.NDArray[np.int64], ...]] = []

    def where() -> tuple[npt.NDArray[np.int64], ...]:
        if not worked:
            worked.append(places() if callable(places) else places)
        return worked[0]

    out = []
    for code, calls in ((UNKNOWN, found.unknown), (SCHEMA, found.schema)):
        wanted = rows.get(code)
        if wanted is None or not len(calls):
            continue
        # The calls of the wanted rows, their names and arguments made Python in one go.
        ks = np.flatnonzero(wanted[call_row[calls]])
        if not len(ks):
            continue
        mine = calls[ks]
        index, place = where()
        call_names = names.take(indices(mine)).to_pylist()
        texts = arguments.take(indices(mine)).to_pylist() if code == SCHEMA else None
        words: dict[int, str] = {}  # row -> the message of its first such call
        count = np.zeros(view.rows, dtype=np.int64)
        unsure = np.zeros(view.rows, dtype=bool)
        for j, (k, call) in enumerate(zip(ks.tolist(), mine.tolist(), strict=True)):
            row = int(call_row[call])
            if unsure[row]:
                continue
            name = str(call_names[j])
            if texts is None:
                declared = found.distinct[int(found.ids[row])]
                assert declared is not None
                text = unknown_message(int(index[call]), int(place[call]), name, declared.names())
            else:
                error = _error(found.schema_keys[k], texts[j])
                if error is None:
                    unsure[row] = True
                    continue
                text = schema_message(int(index[call]), int(place[call]), name, error)
            words.setdefault(row, text)
            count[row] += 1
        chosen = np.zeros(view.rows, dtype=bool)
        chosen[[r for r in words if not unsure[r]]] = True
        if chosen.any():
            messages = [words[r] for r in np.flatnonzero(chosen).tolist()]
            out.append(FastReject(code, chosen, np.where(chosen, count, 0), messages))
    return out


def _error(schema_key: str | None, text: Any) -> str | None:
    """The words of a call's schema error, or None where they cannot be told here. `text` is
    the arguments' JSON text, or the object a struct holds (`_broken_objects`)."""
    if schema_key is not None and isinstance(text, dict):
        return arguments_error(schema_key, text)
    if schema_key is None or not isinstance(text, str):
        return None
    try:
        value = orjson_loads(text)
    except orjson.JSONDecodeError:
        return None
    return arguments_error(schema_key, value) if isinstance(value, dict) else None


def _broken(
    keys: npt.NDArray[np.int64],
    width: int,
    schemas: list[str | None],
    texts: list[Any],
    long: list[bool],
) -> Mask:
    """For each distinct (schema, arguments) pair (`key // width` the schema's place in
    `schemas`, `key % width` the arguments' in `texts`), whether the arguments may break the
    schema (`breaks`); arguments holding a long run of digits (`long`, per text: an integer
    orjson may read as a float) may, and are left to the per-row path, which reads them
    exactly. The answer for a simple schema (`tools.simple_schema`, told without the compiled
    validator) is not kept: working it out costs less than looking it up."""
    out = np.zeros(len(keys), dtype=bool)
    schema_at, text_at = np.divmod(keys, width)
    simple = {s: _simple(schemas[s]) is not None for s in set(schema_at.tolist())}
    broken = []
    for u, (s, t) in enumerate(zip(schema_at.tolist(), text_at.tolist(), strict=True)):
        text = texts[t]
        if text is None:
            continue
        if long[t]:
            broken.append(u)
            continue
        schema = schemas[s]
        assert schema is not None
        check = breaks if simple[s] or len(text) > CACHED_ARGUMENTS else _breaks_cached
        if check(schema, text):
            broken.append(u)
    out[broken] = True
    return out


def _simple(schema_key: str | None) -> SimpleSchema | None:
    return None if schema_key is None else simple_schema(schema_key)


def _broken_objects(
    pairs: npt.NDArray[np.int64], schemas: list[str | None], structs: pa.Array
) -> Mask:
    """For each call (`pairs[k]` its tool's place in `schemas`), whether its arguments, held as
    a struct, break the tool's schema: over the column where the schema is simple
    (`struct_schemas`), else each made Python and validated (`_broken_values`)."""
    out = np.zeros(len(structs), dtype=bool)
    told = np.zeros(len(structs), dtype=bool)
    plain = ~as_mask(structs.is_null()) & finite(structs)  # no object, NaN: the values' way
    codes = pc.dictionary_encode(pa.array(schemas, pa.string()))
    schema_code = codes.indices.to_numpy(zero_copy_only=False)[pairs]
    for code, key in enumerate(codes.dictionary.to_pylist()):
        simple = None if key is None else simple_schema(key)
        if simple is None:
            continue
        at = np.flatnonzero((schema_code == code) & plain)
        fails = struct_fails(simple, structs.take(indices(at))) if len(at) else None
        if fails is not None:
            out[at], told[at] = fails, True
    if told.all():
        return out
    rest = np.flatnonzero(~told)
    out[rest] = _broken_values(pairs[rest], schemas, structs.take(indices(rest)))
    return out


def _broken_values(
    pairs: npt.NDArray[np.int64], schemas: list[str | None], structs: pa.Array
) -> Mask:
    """`_broken_objects` told of each struct made Python as the per-row path reads it (a key
    other calls have is null here), validated. Distinct (schema, arguments) pairs are
    validated once where the struct holds JSON's types only and finite numbers (their JSON text
    is then the key); any other value (NaN, a date) is flagged, for the per-row path."""
    flat = _flat_keys(structs)
    if flat is not None:  # each distinct (schema, struct) made Python and validated once
        present = np.flatnonzero(~as_mask(structs.is_null()) & finite(structs))
        out = np.ones(len(structs), dtype=bool)  # NaN: the per-row path's
        out[as_mask(structs.is_null())] = False  # no object: `invalid_tool_arguments`' alone
        if not len(present):
            return out
        codes = pc.dictionary_encode(flat.take(indices(present))).indices
        width = int(pc.max(codes).as_py() or 0) + 1
        keys = pairs[present] * width + codes.to_numpy(zero_copy_only=False).astype(np.int64)
        unique, first, back = np.unique(keys, return_index=True, return_inverse=True)
        values = structs.take(indices(present[first])).to_pylist()
        fails = np.zeros(len(unique), dtype=bool)
        for u, (key, value) in enumerate(zip(unique.tolist(), values, strict=True)):
            schema = schemas[key // width]
            assert schema is not None
            fails[u] = _fails(schema, value)
        out[present] = fails[back]
        return out
    values = structs.to_pylist()
    keyed = _json_typed(structs.type)
    sure = finite(structs) if keyed else np.zeros(len(values), dtype=bool)
    out = np.zeros(len(values), dtype=bool)
    seen: dict[tuple[int, bytes], bool] = {}
    for k, (p, value) in enumerate(zip(pairs.tolist(), values, strict=True)):
        if value is None:
            continue  # no object: `invalid_tool_arguments`' alone
        schema = schemas[p]
        assert schema is not None
        if sure[k]:
            key = (p, orjson.dumps(value))
            broken = seen.get(key)
            if broken is None:
                broken = seen[key] = _fails(schema, value)
            out[k] = broken
        else:
            out[k] = True  # NaN, a date: what the per-row path makes of it is its own
    return out


def _flat_keys(structs: pa.Array) -> pa.Array | None:
    """Per struct of JSON scalars (text, numbers, booleans, nulls; no nesting), a text equal to
    another's exactly where the two structs hold equal values: each field's value tagged with
    its kind and length; None for any other struct type."""
    pieces = []
    for child_field, child in zip(structs.type, structs.flatten(), strict=True):
        type_ = child_field.type
        if is_text(type_):
            tag = "s"
        elif pa.types.is_integer(type_) or pa.types.is_floating(type_):
            tag = "n"
        elif pa.types.is_boolean(type_):
            tag = "b"
        elif pa.types.is_null(type_):
            continue  # null in every struct: the same in all
        else:
            return None
        text = child.cast(pa.string())
        length = pc.utf8_length(text).cast(pa.string())
        piece = pc.binary_join_element_wise(tag, length, ":", text, "")
        pieces.append(pc.fill_null(piece, "-"))
    if not pieces:
        return pa.nulls(len(structs), pa.string()).fill_null("")
    return pc.binary_join_element_wise(*pieces, "")


def _fails(schema_key: str, value: Any) -> bool:
    """Whether `value` fails the schema whose canonical JSON is `schema_key`, by the compiled
    validator."""
    try:
        fast_validator(schema_key)(value)
    except Exception:  # a failure, in words for the per-row path or the rejects
        return True
    return False


def _json_typed(type_: pa.DataType) -> bool:
    """Whether every value of `type_` is one of JSON's: text, a number, a boolean, null, or a
    list or struct of those."""
    if pa.types.is_struct(type_):
        return all(_json_typed(f.type) for f in type_)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _json_typed(type_.value_type)
    return (
        is_text(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_null(type_)
    )


CACHED_ARGUMENTS: Final = 2048
"""The longest arguments text whose answer `_broken` keeps (`_breaks_cached`): at most 16,384
answers of short texts, a few tens of MB at worst, not a long trace's file contents."""


def breaks(schema_key: str, text: str) -> bool:
    """Whether a call's arguments `text` may break the schema whose canonical JSON is
    `schema_key`: they are a JSON object that fails it, or text only the standard library
    reads. `text` holds no long run of digits (`_broken` leaves those out: orjson may read an
    integer there as a float). Arguments that are no JSON object are R2's (not flagged: a row
    whose only code is R2's is settled in Arrow). `_broken` keeps the answers for short texts
    across batches, as the per-row path keeps its own (`tools.arguments_error`): a tool's calls
    repeat their arguments from batch to batch."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            strict_loads(text)
        except (ValueError, RecursionError):
            return False  # no JSON object: `invalid_tool_arguments`' alone, as `find` has it
        return True  # JSON only the standard library reads: the per-row path's
    if type(value) is not dict:
        return False
    simple = simple_schema(schema_key)  # told without the compiled validator where simple
    return object_fails(simple, value) if simple is not None else _fails(schema_key, value)


_breaks_cached = lru_cache(maxsize=16384)(breaks)


def with_inner_declarations(
    columns: tuple[pa.Array, ...], inner: pa.Array, rows: int
) -> tuple[np.ndarray, list[Declared | None]]:
    """`declared_per_row` of the declarations columns, and for each row they declare nothing
    for, those of `inner`: what a conversation holds itself (`Conversations.declarations`,
    Hermes' `<tools>` in the system prompt), which its decoder reads only then."""
    ids, distinct = declared_per_row(columns, rows)
    own, found = declared_per_row((inner,), rows)
    use = (ids < 0) & (own >= 0)
    return np.where(use, own + len(distinct), ids), distinct + found


def declared_per_row(
    columns: tuple[pa.Array, ...], rows: int
) -> tuple[np.ndarray, list[Declared | None]]:
    """Per row, the index of its declarations among the batch's distinct ones (-1: none), read
    as `read_row_declarations` reads them: from the first column that holds something."""
    ids = np.full(rows, -1, dtype=np.int64)
    decided = np.zeros(rows, dtype=bool)
    distinct: list[Declared | None] = []
    for column in columns:
        if isinstance(column.type, pa.ExtensionType):  # JSON text (`pa.json_()`)
            column = column.storage
        if is_text(column.type):
            holds = ~as_mask(column.is_null()) & ~as_mask(pc.equal(column, ""), True)
            rows_at = np.flatnonzero(holds & ~decided)
            encoded = pc.dictionary_encode(_rows_of(column, rows_at))
            values = [
                _UNREAD if t is _NOT_TEXT else read_declarations(t)
                for t in _python_values(encoded.dictionary)
            ]
            codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        elif pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy()
            rows_at = np.flatnonzero((lengths > 0) & ~decided)
            # Values as canonical JSON: each distinct one read once.
            keys = [
                None if v is _NOT_TEXT else canonical(v)
                for v in _python_values(_rows_of(column, rows_at))
            ]
            unique = list(dict.fromkeys(keys))
            values = [
                _UNREAD if k is None else _listed_declarations(k, column.type) for k in unique
            ]
            place = {k: i for i, k in enumerate(unique)}
            codes = np.array([place[k] for k in keys], dtype=np.int64)
        else:  # another shape: every row holding something is the per-row path's question
            rows_at = np.flatnonzero(~as_mask(column.is_null()) & ~decided)
            values = [_UNREAD]
            codes = np.zeros(len(rows_at), dtype=np.int64)
        present = np.array([v is not None for v in values] + [False])
        offset = len(distinct)
        distinct.extend(values)
        ids[rows_at] = np.where(present[codes], codes + offset, -1)
        decided[rows_at] = True
    return ids, distinct


def _rows_of(column: pa.Array, rows: npt.NDArray[np.int64]) -> pa.Array:
    """The values of `column` at `rows` (ascending): the column itself when that is all of
    them, as it is when every row declares tools (no copy)."""
    return column if len(rows) == len(column) else column.take(indices(rows))


_UNREAD: Final = Declared({}, ("unread",))
"""Declarations the fast path does not read: the row is the per-row path's question."""

_NOT_TEXT: Final = object()
"""A value whose text is not UTF-8 (`_python_values`)."""


def _python_values(array: pa.Array) -> list[Any]:
    """`array.to_pylist()`, with `_NOT_TEXT` for each value holding text that is not UTF-8
    (Arrow does not check it, and Python cannot decode it): its row is rejected by the per-row
    path (`utf8`), and must not stop the batch here."""
    try:
        values: list[Any] = array.to_pylist()
        return values
    except UnicodeDecodeError:
        out: list[Any] = []
        for k in range(len(array)):
            try:
                out.append(array[k].as_py())
            except UnicodeDecodeError:
                out.append(_NOT_TEXT)
        return out


def _listed_declarations(key: str, type_: pa.DataType) -> Declared | None:
    """The declarations of a list value whose `to_pylist` form has the canonical JSON `key`,
    read as the per-row path reads them: the text of its `json_` leaves (a JSON Lines file's
    tool schemas) decoded first (`jsontypes.python_rows`)."""
    value = json_loads(key)
    if jsontypes.has_json(type_):
        try:
            value = jsontypes.decoded(value, type_)
        except jsontypes.UndecodedJson:  # the per-row path's to say what is wrong
            return _UNREAD
    return read_declarations(value)
