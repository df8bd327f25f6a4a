"""The rules: one module per code, and the registry that everything else reads.

Every module of this package (but `base`) holds one `RULE`: its code, allowed, default and strict
actions, a one-line summary, how it is found and repaired, and any Arrow check it brings. The
config tables (`policy`), the generated `configs/*.toml`, the per-row path's checks (`rows`), the
repair chain, the fast path's proof that a row is clean, the stats' order and the README's codes
table all come from here, so adding a rule is adding a module.

    >>> [rule.code for rule in RULES][:2]
    ['malformed_row', 'unknown_role']
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

from transcript_clean.rules.base import (
    ACTIONS,
    Action,
    Rule,
    Stage,
    Unrepairable,
    Violation,
    Walk,
)
from transcript_clean.rules.consecutive_assistant import CODE as CONSECUTIVE_ASSISTANT
from transcript_clean.rules.duplicate_call_id import CODE as DUPLICATE_CALL_ID
from transcript_clean.rules.empty_assistant_turn import CODE as EMPTY_ASSISTANT_TURN
from transcript_clean.rules.invalid_tool_arguments import CODE as INVALID_TOOL_ARGUMENTS
from transcript_clean.rules.malformed_row import CODE as MALFORMED_ROW
from transcript_clean.rules.no_assistant_turn import CODE as NO_ASSISTANT_TURN
from transcript_clean.rules.orphan_tool_result import CODE as ORPHAN_TOOL_RESULT
from transcript_clean.rules.too_long import CODE as TOO_LONG
from transcript_clean.rules.trailing_tool_call import CODE as TRAILING_TOOL_CALL
from transcript_clean.rules.unanswered_tool_call import CODE as UNANSWERED_TOOL_CALL
from transcript_clean.rules.unencodable_row import CODE as UNENCODABLE_ROW
from transcript_clean.rules.unknown_role import CODE as UNKNOWN_ROLE

if TYPE_CHECKING:
    from transcript_clean.model import Message
    from transcript_clean.rules.base import RuleConfig
    from transcript_clean.tools import Declared

__all__ = [
    "ACTIONS",
    "CONSECUTIVE_ASSISTANT",
    "DUPLICATE_CALL_ID",
    "EMPTY_ASSISTANT_TURN",
    "INVALID_TOOL_ARGUMENTS",
    "MALFORMED_ROW",
    "NO_ASSISTANT_TURN",
    "ORPHAN_TOOL_RESULT",
    "RULES",
    "TOO_LONG",
    "TRAILING_TOOL_CALL",
    "UNANSWERED_TOOL_CALL",
    "UNENCODABLE_ROW",
    "UNKNOWN_ROLE",
    "Action",
    "Rule",
    "Stage",
    "Unrepairable",
    "Violation",
    "Walk",
    "codes",
    "codes_table",
    "config_toml",
    "discover",
    "find_rendered",
    "find_violations",
    "get_rule",
    "registered",
    "render_rules",
    "repair_chain",
    "rules",
    "unknown_code",
]


def discover() -> list[Rule]:
    """The `RULE` of every module of this package, in their order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        rule = getattr(module, "RULE", None)
        if not isinstance(rule, Rule):
            raise TypeError(f"{module.__name__} has no RULE")
        found.append(rule)
    return _ordered(found)


def _ordered(found: Sequence[Rule]) -> list[Rule]:
    return list(_by_code(found).values())


def _by_code(found: Sequence[Rule]) -> dict[str, Rule]:
    """The rules by code, in their order (a dict keeps it)."""
    by_code: dict[str, Rule] = {}
    for rule in sorted(found, key=lambda r: (r.order, r.code)):
        if rule.code in by_code:
            raise ValueError(f"two rules have the code {rule.code!r}")
        by_code[rule.code] = rule
    return by_code


_registry: dict[str, Rule] = _by_code(discover())
RULES: Final = tuple(_registry.values())
"""The rules this package ships, in order (`rules()` also holds any registered since)."""


def rules() -> tuple[Rule, ...]:
    """Every rule, in order: those of this package and any `registered` since."""
    return tuple(_registry.values())


def codes() -> tuple[str, ...]:
    """The codes, in the order the cleaner meets them: the keys of the stats table."""
    return tuple(_registry)


def unknown_code(code: str) -> str:
    """Words for `code`, which is no code: the nearest code, when one is near, and the codes.
    Every place a code is typed (`--max`, a config's `[actions]`) says the same."""
    from difflib import get_close_matches

    near = get_close_matches(code, codes(), n=1)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown code {code!r}{guess}; the codes are {', '.join(codes())}"


def get_rule(code: str) -> Rule:
    return _registry[code]


@contextmanager
def registered(rule: Rule) -> Iterator[Rule]:
    """Add `rule` to the registry for the duration of the block (a rule defined outside this
    package: a plugin, or a test's)."""
    global _registry
    before = _registry
    _registry = _by_code([*before.values(), rule])
    try:
        yield rule
    finally:
        _registry = before


def repair_chain() -> list[Rule]:
    """The rules with a repair of the transcript, in the order they run (R2-R5)."""
    return [
        rule
        for rule in _registry.values()
        if rule.repair is not None or rule.repair_declared is not None
    ]


def find_violations(
    messages: Sequence[Message], config: RuleConfig | None = None, tools: Declared | None = None
) -> list[Violation]:
    """Every rule's violations in a transcript whose empty turns are already set aside, rule by
    rule in order; with `config`, of the rules a run with it looks for (`Rule.enabled`), as the
    fast path does; with `tools`, the row's declared tools, its calls checked against them."""
    walk = Walk(messages, tools, config)
    found: list[Violation] = []
    rendering = config is not None and config.chat_template is not None
    for rule in _registry.values():
        if rule.stage != "walk" or (rendering and rule.rendered is not None):
            continue
        if rule.find is not None and (config is None or rule.enabled(config)):
            found.extend(rule.find(walk))
    return found


def find_rendered(walk: Walk) -> list[Violation]:
    """The violations of the rules of stage `render` that the walk's config enables (and of
    those with a `rendered` find), in the transcript as it will be written (`Walk` with the
    row's declarations as it holds them)."""
    config = walk.config
    assert config is not None
    found: list[Violation] = []
    for rule in _registry.values():
        find = rule.find if rule.stage == "render" else rule.rendered
        if find is not None and rule.enabled(config):
            found.extend(find(walk))
    return found


def render_rules(config: RuleConfig) -> list[Rule]:
    """The rules of stage `render` a run with `config` looks for."""
    return [r for r in _registry.values() if r.stage == "render" and r.enabled(config)]


# ---------------------------------------------------------------------------------------------
# what the registry writes: the built-in configs and the README's codes table

_CONFIG_HEADS: Final = {
    "default": """\
# transcript-clean default config: repair what a live agent loop would have recorded.
#
# Each key of [actions] is an error code (the keys of the stats table); its value is what the
# cleaner does with a row that has it:
#   repair  fix the transcript (SPEC section 5, rules R1-R5) and keep the row
#   reject  send the row, as it came in, to rejects/ with its codes
#   keep    count the code and leave the row as is (only where the row stays valid)
# A code left out keeps the action shown here.
""",
    "strict": """\
# transcript-clean strict config, for audits: every violation rejects its row, nothing is
# repaired or kept. A rejected row's codes are exactly the codes found in its transcript
# (after empty assistant turns are set aside). See default.toml for what each code means.
""",
}

_REPAIR_TABLE: Final = {
    "default": """\
[repair]
# How R5 repairs an unanswered call: "cut" the transcript just before the assistant turn that
# made it (when an assistant turn remains), or "error_result": answer it with the error result
# "The tool call was interrupted before a result was produced." "auto": the error result where
# the rows are an agent loop's record (claude-code, openhands: the loop answers a call it
# interrupted so), the cut for every other format.
interrupted_call = "auto"
# How R3 repairs an orphan result that a later assistant turn may use (it is not empty and does
# not repeat a result already given): "reject" the row, since dropping the result would leave
# that turn stating what it never saw, or "drop" it anyway. An empty or repeated one is dropped.
orphan_result = "reject"
""",
    "strict": """\
[repair]
interrupted_call = "auto"
orphan_result = "reject"
""",
}


def config_toml(name: str) -> str:
    """The text of the built-in config `name` (`default` or `strict`), from the registry: what
    `configs/<name>.toml` holds (a test checks they agree; `scripts/make_configs.py` writes
    them)."""
    lines = [_CONFIG_HEADS[name], "[actions]"]
    for rule in _registry.values():
        if name == "default":
            lines += textwrap.wrap(
                rule.actions_help, width=99, initial_indent="# ", subsequent_indent="# "
            )
        action = rule.default if name == "default" else rule.strict
        lines.append(f'{rule.code} = "{action}"')
    return "\n".join(lines) + "\n\n" + _REPAIR_TABLE[name]


def codes_table() -> str:
    """The README's codes table, in Markdown (between its `codes:start` and `codes:end`)."""
    rows = ["| code | found when | default | strict |", "| --- | --- | --- | --- |"]
    for rule in _registry.values():
        default, strict = _action_text(rule, rule.default), _action_text(rule, rule.strict)
        rows.append(f"| `{rule.code}` | {rule.summary} | {default} | {strict} |")
    return "\n".join(rows) + "\n"


def _action_text(rule: Rule, action: Action) -> str:
    if action != "repair":
        return action
    if rule.repaired_as != "repaired":
        return f"repair: {rule.repaired_as}"
    return f"repair (R{int(rule.order)})"
