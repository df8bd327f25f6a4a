"""The events OpenHands saves that hold no message: what the codec passes over and its flattener
leaves out of every message (shared by both, which import neither each other)."""

from __future__ import annotations

from typing import Final

PASSED_ACTIONS: Final = frozenset(
    {"change_agent_state", "recall", "condensation", "condensation_request", "null"}
)
"""Actions of the agent's bookkeeping, when they have no `tool_call_metadata`."""
PASSED_OBSERVATIONS: Final = frozenset({"agent_state_changed", "null", "recall"})
"""Observations of the agent's bookkeeping, when they answer no call."""
