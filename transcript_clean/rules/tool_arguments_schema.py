"""tool_arguments_schema: a call's arguments, a JSON object, break its tool's declared schema.

Checked only in a row that declares its tools, for calls to a declared tool with a parameters
schema, whose arguments are a JSON object (other arguments are `invalid_tool_arguments`'s; a
raw-input tool has no schema). The message names the call, the tool and the first schema error,
as `jsonschema` words it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.model import AssistantMessage
from transcript_clean.rules.base import Rule, Violation, Walk
from transcript_clean.rules.invalid_tool_arguments import has_invalid_arguments
from transcript_clean.tools import arguments_error

CODE: Final = "tool_arguments_schema"


def message(index: int, place: int, name: str, error: str) -> str:
    return f"message {index}: tool_calls[{place}] to {name!r}: {error}"


def find(walk: Walk) -> Iterator[Violation]:
    tools = walk.tools
    if tools is None:
        return
    for index, msg in enumerate(walk.messages):
        if not isinstance(msg, AssistantMessage):
            continue
        for place, call in enumerate(msg.tool_calls):
            tool = tools.tools.get(call.name)
            if tool is None or tool.schema_key is None or has_invalid_arguments(call):
                continue
            error = arguments_error(tool.schema_key, call.arguments)
            if error is not None:
                yield Violation(CODE, index, call.id, message(index, place, call.name, error))


RULE = Rule(
    CODE,
    order=2.2,
    summary="a call's arguments break its declared tool's JSON Schema",
    actions_help=(
        "A tool call's arguments, a JSON object, do not validate against the parameters schema "
        "its tool declares. Checked only where a row declares its tools. `reject`, or `keep`."
    ),
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    find=find,
    reads_declared_tools=True,
)
