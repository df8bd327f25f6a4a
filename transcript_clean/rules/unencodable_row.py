"""unencodable_row (R7): a repaired row that cannot be written back in its format or schema.

Found when the repaired row is encoded; a row the fast path keeps is never re-encoded, and the
rows it repairs are written in the input's own Arrow type, so the fast path needs no check.
"""

from __future__ import annotations

from typing import Final

from transcript_clean.rules.base import Rule

CODE: Final = "unencodable_row"


def message(problem: str) -> str:
    """The words of a repaired row the encoder could not write, for what it said (`problem`)."""
    return f"the repaired row cannot be written in its format: {problem}"


RULE = Rule(
    CODE,
    order=7,
    summary="a repaired row no longer fits the input's Arrow schema",
    actions_help="A repaired row that no longer fits the input's Arrow schema. Only `reject`.",
    allowed=frozenset({"reject"}),
    default="reject",
    stage="encode",
)
