"""invalid_tool_declaration: a declared tool whose parameters are no JSON Schema, or that has no
name (or declarations that cannot be read at all).

Calls to such a tool are not checked against its schema; a model trained on the row would be
offered a tool no provider accepts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "invalid_tool_declaration"


def find(walk: Walk) -> Iterator[Violation]:
    if walk.tools is not None:
        for problem in walk.tools.problems:
            yield Violation(CODE, None, None, problem)


RULE = Rule(
    CODE,
    order=2.3,
    summary="a declared tool has no name, or no valid JSON Schema",
    actions_help=(
        "A row's declared tool has no name, or parameters that are not a valid JSON Schema "
        "(or its declarations cannot be read). `reject`."
    ),
    allowed=frozenset({"reject"}),
    default="reject",
    find=find,
    reads_declared_tools=True,
)
