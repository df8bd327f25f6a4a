"""The config: which action each code gets (SPEC section 5), read from `configs/*.toml`.

The codes, their allowed and default actions and the built-in configs' text come from the rules
registry (`transcript_clean.rules`).
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from transcript_clean.errors import ConfigError, option, option_name
from transcript_clean.rules import Action, get_rule, rules, unknown_code
from transcript_clean.rules.unanswered_tool_call import INTERRUPTED_TEXT

if TYPE_CHECKING:
    from transcript_clean.formats.base import Format

InterruptedCall = Literal["auto", "cut", "error_result"]
OrphanResult = Literal["reject", "drop"]


def allowed_actions() -> dict[str, frozenset[Action]]:
    """Which actions each code takes. `keep` is offered only where the row still passes R6 when
    left as is; a row that cannot be read or written can only be rejected."""
    return {rule.code: rule.allowed for rule in rules()}


def default_actions() -> dict[str, Action]:
    return {rule.code: rule.default for rule in rules()}


CONFIG_DIR: Final = Path(__file__).parent / "configs"


@dataclass(slots=True, frozen=True)
class Config:
    """What the cleaner does with each code, and how it repairs an unanswered call."""

    actions: Mapping[str, Action] = field(default_factory=default_actions)
    interrupted_call: InterruptedCall = "auto"
    """`cut` the transcript before the turn, or answer the call with an `error_result`; `auto`:
    the error result where the rows are an agent loop's record (`Format.agent_trace`: the loop
    answers a call it interrupted so), else the cut. A run settles `auto` for its format
    (`for_format`) before it starts, so its summary says which was done."""
    orphan_result: OrphanResult = "reject"
    """R3, for an orphan result a later assistant turn may use: `reject` the row, or `drop` it
    anyway (an empty or repeated one is always dropped)."""
    name: str = "default"
    tokenizer: str | None = None
    """A local `tokenizer.json` (`--tokenizer`): the profile counts tokens with it."""
    max_tokens: int | None = None
    """`--max-tokens`: rows over it have `too_long` (looked for only when it is set)."""
    chat_template: str | None = None
    """`--chat-template`: a `.jinja` file, a tokenizer folder or a Hub model id; every row kept
    is rendered with it (the rules `template_*` and `no_trained_tokens`, looked for only then).
    Held as given, so that it travels to workers as text; each process loads it once."""
    arguments_as: str | None = None
    """`--arguments-as`: `object`, `string` or `auto`, how calls' arguments reach the template
    (None: as objects, what transformers documents)."""
    max_row_bytes: int | None = None
    """`--max-row-bytes`: a row holding more bytes in Arrow is a `malformed_row` reject, never
    made Python objects (None: no limit; `clean` and `audit` set their source options')."""
    to: str | None = None
    """`--to`: the format kept rows are written in (`convert.py`); only then is
    `lossy_conversion` looked for."""

    def action(self, code: str) -> Action:
        """The code's action: as the config says, or, for a code it does not name (a rule added
        after it was made), the rule's default."""
        action = self.actions.get(code)
        return get_rule(code).default if action is None else action

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            # The optional codes (`--to`'s) and the chat template's only in a run that looks for
            # them: a run without them reads, and resumes, as it did before they were added.
            "actions": {
                rule.code: self.action(rule.code)
                for rule in rules()
                if (not rule.optional or rule.enabled(self))
                and (self.chat_template is not None or rule.stage != "render")
            },
            "repair": {
                "interrupted_call": self.interrupted_call,
                "orphan_result": self.orphan_result,
            },
            # Only when set, so a run without them reads as it always did.
            **({"tokenizer": self.tokenizer} if self.tokenizer is not None else {}),
            **({"max_tokens": self.max_tokens} if self.max_tokens is not None else {}),
            **({"chat_template": self.chat_template} if self.chat_template is not None else {}),
            **({"arguments_as": self.arguments_as} if self.arguments_as is not None else {}),
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
        data = tomllib.loads(_read_config(path).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a config file") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {err.start}: {err.object[err.start]:#04x}); "
            "TOML files are UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(f"{path}: not valid TOML: nested too deep") from None
    return config_from_dict(data, name=path.stem, where=str(path))


MAX_CONFIG_BYTES = 1 << 20
"""A config is a few hundred bytes; one larger than this is not one (and is not read whole)."""

_NOT_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _read_config(path: Path) -> bytes:
    """The bytes of the config file `path`: only a plain file's, and at most
    `MAX_CONFIG_BYTES` (a FIFO would wait for a writer, /dev/zero never end)."""
    mode = path.stat().st_mode  # follows a link: what would be read; stat never blocks
    for kind, name in _NOT_FILES:
        if kind(mode):
            raise ConfigError(f"{path}: {name}, not a config file")
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(path)
    with path.open("rb") as file:
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than 1 MiB, which no config is")
    return data


def config_from_dict(
    data: Mapping[str, Any], *, name: str = "custom", where: str = "config"
) -> Config:
    """A config from the parsed TOML; codes the file leaves out keep their default action."""
    unknown = set(data) - {"actions", "repair"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {sorted(unknown)[0]!r} (expected [actions], [repair])"
        )

    actions = default_actions()
    allowed = allowed_actions()
    for code, action in _table(data, "actions", where).items():
        if code not in allowed:
            raise ConfigError(f"{where}: actions.{code}: {unknown_code(code)}")
        if not isinstance(action, str):
            raise ConfigError(
                f"{where}: actions.{code} = {action!r} must be a string "
                f"(choose {', '.join(sorted(allowed[code]))})"
            )
        if action not in allowed[code]:
            raise ConfigError(
                f"{where}: actions.{code} = {action!r} is not allowed "
                f"(choose {', '.join(sorted(allowed[code]))})"
            )
        actions[code] = action

    repair = _table(data, "repair", where)
    unknown = set(repair) - {"interrupted_call", "orphan_result"}
    if unknown:
        raise ConfigError(f"{where}: unknown key repair.{sorted(unknown)[0]}")
    interrupted = repair.get("interrupted_call", "auto")
    if interrupted not in ("auto", "cut", "error_result"):
        raise ConfigError(
            f"{where}: repair.interrupted_call = {interrupted!r} is not allowed "
            "(choose auto, cut, error_result)"
        )
    orphan = repair.get("orphan_result", "reject")
    if orphan != "reject" and orphan != "drop":  # narrows the type for mypy
        raise ConfigError(
            f"{where}: repair.orphan_result = {orphan!r} is not allowed (choose drop, reject)"
        )
    return Config(actions=actions, interrupted_call=interrupted, orphan_result=orphan, name=name)


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: {key} must be a table, got {value!r}")
    return value


def for_format(config: Config, fmt: Format) -> Config:
    """`config` with `[repair] interrupted_call = "auto"` settled for the rows of `fmt`: R5
    answers an unanswered call with its error result where they are an agent loop's record
    (`fmt.agent_trace`: Claude Code answers a call the user interrupted with an `is_error`
    result, OpenHands with an error observation), and cuts the transcript before it elsewhere.
    A config that names `cut` or `error_result` is kept as it is. What every entry point (a run,
    `audit`, `explain`, `clean_batch`, `clean_row`) does once, before the rules read it."""
    if config.interrupted_call != "auto":
        return config
    return replace(config, interrupted_call="error_result" if fmt.agent_trace else "cut")


def interrupted_words(interrupted_call: str, fmt: Format) -> str:
    """How R5 repaired an unanswered call, settled as `interrupted_call` for the rows of `fmt`,
    in words (the card's and `explain`'s)."""
    if interrupted_call == "error_result":
        words = f'each unanswered call answered with the error result "{INTERRUPTED_TEXT}"'
        if fmt.agent_trace:
            words += (
                f", as the agent loop that recorded these {fmt.name} rows answers a call it "
                'interrupted (what `interrupted_call = "auto"` does for them)'
            )
        return words
    words = "the transcript cut just before the assistant turn that made the unanswered call"
    if fmt.agent_trace:
        words += (
            ' (`interrupted_call = "cut"`; `"auto"` would answer it with an error result, as '
            f"the agent loop that recorded these {fmt.name} rows does)"
        )
    return words


DEFAULT: Final = Config()
STRICT: Final = Config(actions={rule.code: rule.strict for rule in rules()}, name="strict")


def with_template(config: Config, chat_template: str | None, arguments_as: str | None) -> Config:
    """`config` with `--chat-template` and `--arguments-as` (checked: the template is loaded
    here, once, so that a bad one fails before the run starts)."""
    from transcript_clean.templates.load import ARGUMENTS_AS, check_template

    if chat_template is None and arguments_as is None:
        return config
    if arguments_as is not None and arguments_as not in ARGUMENTS_AS:
        raise ConfigError(
            f"{option('arguments_as', arguments_as)}: choose {', '.join(ARGUMENTS_AS)}"
        )
    if chat_template is None:
        raise ConfigError(f"{option_name('arguments_as')} needs {option_name('chat_template')}")
    chat_template = os.fspath(chat_template)
    template = check_template(chat_template, config.tokenizer)
    if config.max_tokens is not None and template.tokenizer is None:
        raise ConfigError(
            f"{option_name('max_tokens')} with {option_name('chat_template')} counts the rendered "
            "tokens: give a tokenizer folder or Hub id, or a tokenizer.json as "
            f"{option_name('tokenizer')} with a .jinja file"
        )
    return replace(config, chat_template=chat_template, arguments_as=arguments_as)
