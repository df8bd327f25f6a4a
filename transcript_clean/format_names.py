"""The names of the conversation formats, as `--format` and `--to` take them: a module that
imports nothing, so that `--help` can list them without importing every codec
(`formats.registry` maps each to its class, and holds the two lists the same)."""

from __future__ import annotations

from typing import Final

FORMAT_NAMES: Final = (
    "openai",
    "sharegpt",
    "anthropic",
    "rig",
    "hermes",
    "gemini",
    "bedrock",
    "claude-code",
    "llamafactory",
    "hh",
    "guanaco",
    "alpaca",
    "dolly",
    "query-response",
    "pairs",
    "completion",
    "responses",
    "openhands",
)
"""The names `--format` takes, besides "auto"."""
