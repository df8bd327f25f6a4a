"""Hermes' `<tool_response>` bodies read over the whole column, as `values.response` reads one
body (stripped) after `jsontext.loads`: its name and its content's text.

A body in the common layout, `{"name": "...", "content": ...}` as `json.dumps` writes it with
`ensure_ascii=False`, is read in Arrow: one regular expression proves it strict JSON whose
content, written again by `jsontext.dumps`, is the source's own text, and splitting it at
`", "content": ` gives the name and the content. The content is

- a flat object (each key's value a string, a number, true, false or null) whose keys hold no
  escape and appear once: the encoder writes it back as it is (a key given twice keeps its last
  value in its first place, so such bodies are found over the column and left to the rest);
- or a string without escapes, whose text is the content.

The expression holds only what the encoder writes back unchanged: `, ` and `: ` between the
parts and no other white space; in strings the escapes it writes (`\\"`, `\\\\`, `\\b`, `\\f`,
`\\n`, `\\r`, `\\t`; no `\\u`, no `\\/`); integers without a sign on zero, of at most 18 digits
(no run of `jsontext.LONG_DIGITS`); and numbers with a fraction that `float.__repr__` writes as
they are: at most 7 digits before the point and 7 significant digits after it, no trailing
zero but in `.0`, none below 0.0001 (at most 14 significant digits: each such decimal is the
shortest that reads as its double, and `repr` writes no exponent from 0.0001 to 1e16). Any
other body is the caller's to read one by one with the codec's readers, the truth: property
tests hold the two equal on drawn bodies.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, indices, list_sizes
from transcript_clean.jsontext import DUMPED_NUMBER

__all__ = ["common_responses"]

_CHAR: Final = r'[^"\\\x00-\x1f]'
_STRING: Final = rf'"(?:{_CHAR}|\\["\\bfnrt])*"'
_KEY: Final = rf'"{_CHAR}*"'
_SCALAR: Final = rf"(?:{_STRING}|{DUMPED_NUMBER}|true|false|null)"
_PAIR: Final = rf"{_KEY}: {_SCALAR}"
_FLAT: Final = rf"\{{(?:{_PAIR}(?:, {_PAIR})*)?\}}"
_COMMON: Final = rf'^\{{"name": "{_CHAR}*", "content": (?:{_FLAT}|"{_CHAR}*")\}}$'
_NAME_ENDS: Final = '", "content": '
_HEAD: Final = len('{"name": "')
_MOST_KEYS: Final = 16  # an object of more keys is left to the rest: its pairs of keys are many


def common_responses(bodies: pa.Array) -> tuple[Mask, pa.Array, pa.Array]:
    """Per body of `bodies` (stripped, none null), whether it is in the common layout (the
    module's docstring); the name and the content's text of each such body, in order."""
    fast = as_mask(pc.match_substring_regex(bodies, _COMMON))
    if not fast.any():
        empty = pa.array([], pa.large_string())
        return fast, empty, empty
    halves = pc.split_pattern(bodies.filter(pa.array(fast)), _NAME_ENDS, max_splits=1)
    names = pc.utf8_slice_codeunits(pc.list_element(halves, 0), _HEAD)
    content = pc.utf8_slice_codeunits(pc.list_element(halves, 1), 0, -1)
    said = as_mask(pc.starts_with(content, '"'))
    twice = _repeated_keys(content, ~said)
    if said.any():
        content = pc.if_else(pa.array(said), pc.utf8_slice_codeunits(content, 1, -1), content)
    if twice.any():
        at = np.flatnonzero(fast)
        fast[at[twice]] = False
        keep = pa.array(~twice)
        names, content = names.filter(keep), content.filter(keep)
    return fast, names.cast(pa.large_string()), content.cast(pa.large_string())


def _repeated_keys(content: pa.Array, objects: Mask) -> Mask:
    """Per content, whether it is an object of `_FLAT` that may hold a key twice: one that does,
    or one parted in more than `_MOST_KEYS` pieces. It is parted at each `, "`: its strings
    hold no bare `"`, so every pair but the first starts at one, and a piece's key, which holds
    no `"`, is its text up to its first `"`, the same text for the same key. A string that ends
    in `, ` parts it once more (its closing quote ends a `, "` too), which only ever adds
    pieces to compare: such an object may be left to the rest, never read wrong. Each two
    pieces' keys are compared."""
    out = np.zeros(len(content), dtype=bool)
    at = np.flatnonzero(objects)
    if not len(at):
        return out
    inner = pc.utf8_slice_codeunits(content.take(indices(at)), 2, -1)  # less its `{"` and `}`
    pairs = pc.split_pattern(inner, ', "')
    sizes = list_sizes(pairs)
    several = np.flatnonzero(sizes > 1)
    if not len(several):
        return out
    out[at[sizes > _MOST_KEYS]] = True
    keys = pc.list_element(pc.split_pattern(pc.list_flatten(pairs), '"', max_splits=1), 0)
    first = np.cumsum(sizes) - sizes
    left, right, owner = [], [], []
    for size in np.unique(sizes[several]).tolist():
        if size > _MOST_KEYS:
            break
        objects_of_size = several[sizes[several] == size]
        i, j = np.triu_indices(size, 1)
        starts = first[objects_of_size][:, None]
        left.append((starts + i).ravel())
        right.append((starts + j).ravel())
        owner.append(np.repeat(objects_of_size, len(i)))
    if not left:
        return out
    same = as_mask(
        pc.equal(
            keys.take(indices(np.concatenate(left))), keys.take(indices(np.concatenate(right)))
        )
    )
    out[at[np.concatenate(owner)[same]]] = True
    return out
