"""The events OpenHands saves that hold no message, which the codec passes over and its flattener
leaves out of every message, and the observation a tool result is written as (shared by both,
which import neither each other)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_clean.formats.base import Row, join_texts
from transcript_clean.model import Text, ToolResult

PASSED_ACTIONS: Final = frozenset(
    {"change_agent_state", "recall", "condensation", "condensation_request", "null"}
)
"""Actions of the agent's bookkeeping, when they have no `tool_call_metadata`."""
PASSED_OBSERVATIONS: Final = frozenset({"agent_state_changed", "null", "recall"})
"""Observations of the agent's bookkeeping, when they answer no call."""


def result_event(result: ToolResult, action: Any) -> Row:
    """The observation event `result` is written as: its source event rewritten, or a new one
    (a repair's result) naming its call by metadata and, where its action has an `id`, by
    `cause`."""
    out: Row = dict(result.origin) if result.origin is not None else {}
    out.setdefault("source", "agent")
    if result.origin is None and isinstance(action, Mapping) and action.get("id") is not None:
        out["cause"] = action["id"]
    if result.origin is None or result.status == "error":
        out["observation"] = "error" if result.status == "error" else "run"
    out["content"] = join_texts(p.text for p in result.content if isinstance(p, Text))
    metadata = dict(out.get("tool_call_metadata") or {})
    metadata["tool_call_id"] = result.call
    if result.name is not None:
        metadata.setdefault("function_name", result.name)
    out["tool_call_metadata"] = metadata
    return out
