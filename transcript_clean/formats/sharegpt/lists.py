"""Observations holding one JSON list for several calls, split into their items over the whole
column, as `values.split_list` splits each value.

`split_list` gives an item that is no text as `json.dumps(item, ensure_ascii=False)` writes it.
A list of flat objects as `json.dumps` writes them (`_LIST`: `, ` and `: ` between the parts, no
other white space) is that already, item by item, where every part is spelled as `json.dumps`
spells it again: strings with no escape it would write otherwise (no `\\u`, no `\\/`), integers
of at most 18 digits and no `-0`, decimals of at most 14 significant digits, no exponent, no
trailing zero and at least 1e-4 (such a decimal reads as a double whose `repr` is the same
digits). The items are then the value's own text, parted at each `}, {` (no string holds a
brace). What the expression cannot tell, a key written twice in an object (`json.dumps` writes
it once), is told by one parse of all the values together: each value's keys in its text
(`": ` ends a key and nothing else, where no string holds `\\"` or starts with `:`) against its
objects' keys. Any other value is split by `split_list`, one by one.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Counts, Mask, as_mask, indices
from transcript_clean.formats.sharegpt.values import split_list
from transcript_clean.jsontext import DUMPED_NUMBER

__all__ = ["split_lists"]

_CHAR: Final = r'(?:[^"\\\x00-\x1f{}]|\\[\\bfnrt])'
_STRING: Final = rf'"(?:(?:[^"\\\x00-\x1f{{}}:]|\\[\\bfnrt]){_CHAR}*)?"'
_PAIR: Final = rf"{_STRING}: (?:{_STRING}|{DUMPED_NUMBER}|true|false|null)"
_OBJECT: Final = rf"\{{(?:{_PAIR}(?:, {_PAIR})*)?\}}"
_LIST: Final = rf"^\[{_OBJECT}(?:, {_OBJECT})*\]$"


def split_lists(texts: pa.Array, counts: Counts) -> tuple[Mask, pa.Array]:
    """Per value of `texts` (none null), whether `split_list(text, count)` splits it; and the
    items of those it splits, in order (a large string array), as `split_list` gives them."""
    fast = as_mask(pc.match_substring_regex(texts, _LIST))
    at = np.flatnonzero(fast)
    listed = texts.take(indices(at))
    inner = pc.utf8_slice_codeunits(listed, 2, -2)  # `[{` and `}]` off: items parted by `}, {`
    items = _counted(inner, "}, {") + 1
    keys = _counted(listed, '": ')
    if len(at):
        parsed = orjson.loads("[" + ",".join(listed.to_pylist()) + "]")
        read = np.fromiter((sum(map(len, v)) for v in parsed), np.int64, len(at))
        fast[at] = (keys == read) & (items == counts[at])
    parts = pc.list_flatten(pc.split_pattern(inner.filter(pa.array(fast[at])), "}, {"))
    brace, end, none = (pa.scalar(t, parts.type) for t in ("{", "}", ""))  # the texts' type
    quick = pc.binary_join_element_wise(brace, parts, end, none).cast(pa.large_string())

    read_mask = fast.copy()
    slow = np.flatnonzero(~fast)
    found: list[str] = []
    sizes = np.where(fast, counts, 0)
    for k, text in zip(slow.tolist(), texts.take(indices(slow)).to_pylist(), strict=True):
        split = split_list(text, int(counts[k]))
        if split is not None:
            read_mask[k] = True
            sizes[k] = len(split)
            found += split
    if not found:
        return read_mask, quick
    # The items in value order: those split in Arrow, then those split one by one.
    quick_at = np.flatnonzero(fast)
    owner = np.concatenate([np.repeat(quick_at, counts[quick_at]), np.repeat(slow, sizes[slow])])
    order = np.argsort(owner, kind="stable")
    every = pa.concat_arrays([quick, pa.array(found, pa.large_string())])
    return read_mask, every.take(indices(order))


def _counted(texts: pa.Array, pattern: str) -> Counts:
    counted: Counts = pc.count_substring(texts, pattern).to_numpy().astype(np.int64)
    return counted
