"""Text from the data (tool names, file names) put into Markdown that users open: the dataset
card, the audit's Markdown report. A CommonMark renderer must show it as it is: no HTML that
runs, no emphasis or link, no `|` that splits a table cell, no line that ends a table row.
And any text from the data that a command prints or writes must have a UTF-8 form (`printable`)."""

from __future__ import annotations

import html
import re

__all__ = ["code", "printable", "text"]

_PUNCTUATION = re.compile(r"([\\`*_\[\]{}()#+\-.!|~])")
"""The ASCII punctuation that can start or end Markdown markup; CommonMark lets a backslash
make each literal."""

_SPAN_BREAKERS = re.compile(r"[`|<>&\\\s]")
"""What a code span in a table cell cannot hold as it is: a backtick ends the span, a `|` the
cell, a line break the row; `<`, `>`, `&` and `\\` are left out too, for renderers that do
not keep a span literal. (A space is allowed, but not at either end.)"""


def printable(value: str) -> str:
    """`value` with each lone surrogate as its escape (`\\ud800`): JSON's `"\\ud800"` reads
    into a Python string that has no UTF-8 form, so printing or writing it would fail. Any text
    a command prints or writes from the data goes through here; all else is left as it is."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def text(value: object) -> str:
    """`value` as literal Markdown text, on one line, safe in a table cell: `<`, `>` and `&`
    as entities (so no tag is ever HTML), markup punctuation escaped, line breaks as spaces."""
    flat = " ".join(str(value).split())
    return _PUNCTUATION.sub(r"\\\1", html.escape(flat, quote=False))


def code(value: object) -> str:
    """`value` as a code span, which is how the card shows names and files, when the span can
    hold it as it is; anything else as `text` (inside a span a backslash escapes nothing)."""
    name = str(value)
    if name and not _SPAN_BREAKERS.search(name.replace(" ", "x")) and name == name.strip():
        return f"`{name}`"
    return text(name)
