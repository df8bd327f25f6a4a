"""The config: which action each code gets (SPEC section 5), read from `configs/*.toml`."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from transcript_clean.errors import ConfigError

Action = Literal["repair", "reject", "keep"]
InterruptedCall = Literal["cut", "error_result"]

# The codes, in the order the cleaner meets them (R0-R6). They are the keys of the stats table.
MALFORMED_ROW: Final = "malformed_row"
UNKNOWN_ROLE: Final = "unknown_role"
EMPTY_ASSISTANT_TURN: Final = "empty_assistant_turn"
INVALID_TOOL_ARGUMENTS: Final = "invalid_tool_arguments"
ORPHAN_TOOL_RESULT: Final = "orphan_tool_result"
CONSECUTIVE_ASSISTANT: Final = "consecutive_assistant"
UNANSWERED_TOOL_CALL: Final = "unanswered_tool_call"
TRAILING_TOOL_CALL: Final = "trailing_tool_call"
NO_ASSISTANT_TURN: Final = "no_assistant_turn"
UNENCODABLE_ROW: Final = "unencodable_row"

CODES: Final = (
    MALFORMED_ROW,
    UNKNOWN_ROLE,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    ORPHAN_TOOL_RESULT,
    CONSECUTIVE_ASSISTANT,
    UNANSWERED_TOOL_CALL,
    TRAILING_TOOL_CALL,
    NO_ASSISTANT_TURN,
    UNENCODABLE_ROW,
)

# Which actions make sense for each code. `keep` is offered only where the row still passes R6
# when left as is; a row that cannot be read or written can only be rejected.
ALLOWED: Final[Mapping[str, frozenset[str]]] = {
    MALFORMED_ROW: frozenset({"reject"}),
    UNKNOWN_ROLE: frozenset({"reject"}),
    EMPTY_ASSISTANT_TURN: frozenset({"repair", "reject", "keep"}),
    INVALID_TOOL_ARGUMENTS: frozenset({"repair", "reject", "keep"}),
    ORPHAN_TOOL_RESULT: frozenset({"repair", "reject"}),
    CONSECUTIVE_ASSISTANT: frozenset({"repair", "reject"}),
    UNANSWERED_TOOL_CALL: frozenset({"repair", "reject"}),
    TRAILING_TOOL_CALL: frozenset({"repair", "reject", "keep"}),
    NO_ASSISTANT_TURN: frozenset({"reject", "keep"}),
    UNENCODABLE_ROW: frozenset({"reject"}),
}

DEFAULT_ACTIONS: Final[Mapping[str, Action]] = {
    MALFORMED_ROW: "reject",
    UNKNOWN_ROLE: "reject",
    EMPTY_ASSISTANT_TURN: "repair",
    INVALID_TOOL_ARGUMENTS: "repair",
    ORPHAN_TOOL_RESULT: "repair",
    CONSECUTIVE_ASSISTANT: "repair",
    UNANSWERED_TOOL_CALL: "repair",
    TRAILING_TOOL_CALL: "keep",
    NO_ASSISTANT_TURN: "reject",
    UNENCODABLE_ROW: "reject",
}

INTERRUPTED_TEXT: Final = "The tool call was interrupted before a result was produced."

CONFIG_DIR: Final = Path(__file__).parent / "configs"


@dataclass(slots=True, frozen=True)
class Config:
    """What the cleaner does with each code, and how it repairs an unanswered call."""

    actions: Mapping[str, Action] = field(default_factory=lambda: dict(DEFAULT_ACTIONS))
    interrupted_call: InterruptedCall = "cut"
    """`cut` the transcript before the turn, or answer the call with an `error_result`."""
    name: str = "default"

    def action(self, code: str) -> Action:
        return self.actions[code]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "actions": dict(self.actions),
            "repair": {"interrupted_call": self.interrupted_call},
        }


def builtin_configs() -> list[str]:
    """The names `load_config` accepts besides a path: `default`, `strict`, ..."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def load_config(spec: str | os.PathLike[str] | None = None) -> Config:
    """A config from a TOML file, or a built-in one by name (`default`, `strict`).

    Unknown keys and bad values raise `ConfigError` naming the file and the key.
    """
    if spec is None:
        spec = "default"
    path = Path(spec)
    if not path.suffix and not path.exists():
        builtin = CONFIG_DIR / f"{spec}.toml"
        if not builtin.exists():
            raise ConfigError(
                f"no config named {str(spec)!r}: give a .toml file or one of "
                f"{', '.join(builtin_configs())}"
            )
        path = builtin
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    return config_from_dict(data, name=path.stem, where=str(path))


def config_from_dict(
    data: Mapping[str, Any], *, name: str = "custom", where: str = "config"
) -> Config:
    """A config from the parsed TOML; codes the file leaves out keep their default action."""
    unknown = set(data) - {"actions", "repair"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (expected [actions], [repair])"
        )

    actions: dict[str, Action] = dict(DEFAULT_ACTIONS)
    for code, action in _table(data, "actions", where).items():
        if code not in ALLOWED:
            raise ConfigError(f"{where}: unknown code actions.{code} (codes: {', '.join(CODES)})")
        if action not in ALLOWED[code]:
            raise ConfigError(
                f"{where}: actions.{code} = {action!r} is not allowed "
                f"(choose {', '.join(sorted(ALLOWED[code]))})"
            )
        actions[code] = action

    repair = _table(data, "repair", where)
    unknown = set(repair) - {"interrupted_call"}
    if unknown:
        raise ConfigError(f"{where}: unknown key repair.{sorted(unknown)[0]}")
    interrupted = repair.get("interrupted_call", "cut")
    if interrupted not in ("cut", "error_result"):
        raise ConfigError(
            f"{where}: repair.interrupted_call = {interrupted!r} is not allowed "
            "(choose cut, error_result)"
        )
    return Config(actions=actions, interrupted_call=interrupted, name=name)


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: {key} must be a table, got {value!r}")
    return value


DEFAULT: Final = Config()
STRICT: Final = Config(
    actions={code: "reject" for code in CODES},
    name="strict",
)
