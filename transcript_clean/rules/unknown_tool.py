"""unknown_tool: a call names a tool the row does not declare (issue 17).

Checked only in a row that declares its tools (`transcript_clean.tools`): a call to a tool the
model was never offered teaches it to make tools up. No repair can say which tool was meant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.model import AssistantMessage
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "unknown_tool"

# How many declared names a message lists: enough to see the slip, not the whole catalogue.
SHOWN: Final = 5


def message(index: int, place: int, name: str, declared: list[str]) -> str:
    shown = ", ".join(declared[:SHOWN]) + (", ..." if len(declared) > SHOWN else "")
    return (
        f"message {index}: tool_calls[{place}] to {name!r}: no tool of that name is declared "
        f"(declared: {shown or 'none'})"
    )


def find(walk: Walk) -> Iterator[Violation]:
    tools = walk.tools
    # Declarations that cannot be read at all are `invalid_tool_declaration`'s alone.
    if tools is None or (not tools.tools and tools.problems):
        return
    for index, msg in enumerate(walk.messages):
        if not isinstance(msg, AssistantMessage):
            continue
        for place, call in enumerate(msg.tool_calls):
            if call.name not in tools.tools:
                words = message(index, place, call.name, tools.names())
                yield Violation(CODE, index, call.id, words)


RULE = Rule(
    CODE,
    order=2.1,
    summary="a call names a tool the row does not declare",
    actions_help=(
        "A tool call names a tool the row's declared tools (its `tools` column) do not hold. "
        "Checked only where a row declares its tools. `reject`."
    ),
    allowed=frozenset({"reject"}),
    default="reject",
    find=find,
    reads_declared_tools=True,
)
