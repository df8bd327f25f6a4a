"""Anthropic's hh-rlhf transcripts: one text of turns, each `\\n\\nHuman: ` or `\\n\\nAssistant: `
followed by what was said (`chosen` and `rejected` of Anthropic/hh-rlhf, and the many sets made
from it).

    >>> parse_hh("\\n\\nHuman: Hi\\n\\nAssistant: Hello.")
    [('user', 'Hi'), ('assistant', 'Hello.')]
    >>> render_hh([("user", "Hi"), ("assistant", "Hello.")])
    '\\n\\nHuman: Hi\\n\\nAssistant: Hello.'

A text whose first marker is not at its start (after white space), or with no marker at all,
is not such a transcript: `parse_hh` raises `ValueError` saying which.

Guanaco's transcripts (timdettmers/openassistant-guanaco, from OpenAssistant's) mark each turn
with `### Human: ` or `### Assistant: ` and no blank line before it:

    >>> parse_guanaco("### Human: Hi### Assistant: Hello.")
    [('user', 'Hi'), ('assistant', 'Hello.')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "MARKERS",
    "looks_like_guanaco",
    "looks_like_hh",
    "parse_guanaco",
    "parse_hh",
    "render_guanaco",
    "render_hh",
]

MARKERS: Final = {"Human": "user", "Assistant": "assistant"}
"""The speaker names of a transcript, and the role each stands for."""

_ROLES: Final = {role: name for name, role in MARKERS.items()}

# A marker opens a turn at the text's start (after white space) or after a blank line.
_MARKER: Final = re.compile(r"(?:\A\s*|\n\n)(Human|Assistant):")
# Guanaco's open a turn wherever they stand.
_GUANACO_MARKER: Final = re.compile(r"(?:\A\s*)?### (Human|Assistant):")


def looks_like_hh(value: object) -> bool:
    """Whether `value` is a text that starts with a `Human:` turn (after white space)."""
    return isinstance(value, str) and value.lstrip().startswith("Human:")


def looks_like_guanaco(value: object) -> bool:
    """Whether `value` is a text that starts with a `### Human:` turn (after white space)."""
    return isinstance(value, str) and value.lstrip().startswith("### Human:")


def parse_hh(text: str) -> list[tuple[str, str]]:
    """The turns of a transcript, as (role, text): `user` for `Human:`, `assistant` for
    `Assistant:`; the one space after a marker is the marker's, not the turn's."""
    return _parse(text, _MARKER, "'\\n\\nHuman:' or '\\n\\nAssistant:'")


def parse_guanaco(text: str) -> list[tuple[str, str]]:
    """The turns of a Guanaco transcript, as `parse_hh` gives an hh-rlhf one's."""
    return _parse(text, _GUANACO_MARKER, "'### Human:' or '### Assistant:'")


def _parse(text: str, marker: re.Pattern[str], names: str) -> list[tuple[str, str]]:
    found = list(marker.finditer(text))
    if not found:
        raise ValueError(f"no {names} marker: not a transcript of turns")
    before = text[: found[0].start()]
    if before.strip():
        raise ValueError(f"text before the first marker: {before.strip()[:40]!r}")
    turns = []
    for k, match in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(text)
        said = text[match.end() : end]
        turns.append((MARKERS[match.group(1)], said[1:] if said.startswith(" ") else said))
    return turns


def render_hh(turns: Iterable[tuple[str, str]], *, lead: str = "\n\n") -> str:
    """The transcript of `turns` (role, text), each opened by its marker after a blank line
    (`lead`, for the first: what the source started with)."""
    out = []
    for k, (role, said) in enumerate(turns):
        opening = lead if k == 0 else "\n\n"
        out.append(f"{opening}{_ROLES[role]}:" + (f" {said}" if said else ""))
    return "".join(out)


def render_guanaco(turns: Iterable[tuple[str, str]], *, lead: str = "") -> str:
    """The Guanaco transcript of `turns` (role, text), each opened by its marker (`lead`
    before the first: what the source started with)."""
    out = [lead]
    for role, said in turns:
        out.append(f"### {_ROLES[role]}:" + (f" {said}" if said else ""))
    return "".join(out)
