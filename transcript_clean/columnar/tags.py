"""Tags in text counted over a whole string column at once: the column's bytes are looked at
once for each tag's first byte (`<` is rare in chat text), and only those places for the rest."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from transcript_clean.columnar.arrays import Counts, text_bytes, validity

__all__ = ["tag_counts"]


def tag_counts(texts: pa.Array, *tags: str) -> list[Counts]:
    """Per tag, how many times each text of `texts` (a string array; a null text 0) holds it,
    as `pyarrow.compute.count_substring` counts it. A tag's first character may not recur in
    it, so that no two of its places overlap (`<think>`, `<tool_call>`)."""
    offsets, data = text_bytes(texts)
    valid = validity(texts) if texts.null_count else None
    leads: dict[int, Counts] = {}
    out: list[Counts] = []
    for tag in tags:
        needle = np.frombuffer(tag.encode(), dtype=np.uint8)
        if not len(needle) or needle[0] in needle[1:]:
            raise ValueError(f"a tag whose places may overlap: {tag!r}")
        first = int(needle[0])
        if first not in leads:
            leads[first] = np.flatnonzero(data == first)
        at = leads[first]
        at = at[at <= len(data) - len(needle)]
        for k in range(1, len(needle)):
            at = at[data[at + k] == needle[k]]
        # Each place's text; a place running past its text's end spans two texts: no tag.
        start = at + offsets[0]
        owner = np.searchsorted(offsets, start, side="right") - 1
        inside = start + len(needle) <= offsets[owner + 1]
        counts = np.bincount(owner[inside], minlength=len(texts)).astype(np.int64)
        out.append(counts * valid if valid is not None else counts)
    return out
