"""What a rule is: its code and actions, how it is found and repaired, and where Arrow clears it.

A rule's `find` on the canonical transcript is the truth. Its Arrow checks (one per format, in
`arrow`, or the format's own, in the format's `arrow.py`) are an addition that may only say
"certainly not in this row"; a row is settled fast only when every enabled rule has said so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from transcript_clean.errors import TranscriptCleanError
from transcript_clean.model import AssistantMessage, Message, ToolResult, UserMessage
from transcript_clean.transcript import TranscriptError, transcript_errors

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from transcript_clean.columnar.walk import ConversationsWalk
    from transcript_clean.tools import Declared

__all__ = [
    "ACTIONS",
    "Action",
    "ColumnarCheck",
    "Rule",
    "RuleConfig",
    "Stage",
    "Unrepairable",
    "Violation",
    "Walk",
    "answer_window",
    "put_results",
    "raw_input_names",
]

Action = Literal["repair", "reject", "keep"]
ACTIONS: tuple[Action, ...] = ("repair", "reject", "keep")

Stage = Literal["decode", "empty", "walk", "render", "encode"]
"""Where a rule is found: by the format's decoder (R0), among the empty turns (R1), on the
R1-cleaned transcript (`find`), on the transcript as it will be written, rendered with the
chat template (`find`, after R6), or when a repaired row is written back (R7)."""

ColumnarCheck = Callable[["ConversationsWalk"], "npt.NDArray[np.bool_]"]
"""Given the walk over a batch's `Conversations` (any format's), the rows that may have the code;
every other row the view reads certainly does not."""


class RuleConfig(Protocol):
    """What a rule reads of a run's config (`policy.Config` is one; the policy, above the
    rules, reads their registry)."""

    @property
    def interrupted_call(self) -> str: ...

    @property
    def orphan_result(self) -> str: ...

    @property
    def tokenizer(self) -> str | None: ...

    @property
    def max_tokens(self) -> int | None: ...

    @property
    def to(self) -> str | None: ...

    @property
    def chat_template(self) -> str | None: ...

    @property
    def arguments_as(self) -> str | None: ...

    def action(self, code: str) -> Action: ...


@dataclass(slots=True, frozen=True)
class Violation:
    """One problem found in a row. `index` is the message's index in the decoded transcript."""

    code: str
    index: int | None
    call_id: str | None
    message: str


class Unrepairable(TranscriptCleanError):
    """A violation the repair cannot fix; the row is rejected with `code`."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class Walk:
    """A transcript being checked, with what several rules read of it worked out once: the walk
    of SPEC section 3 and the calls pending at its end. `tools` are the tools the row declares
    (None when it declares none: then no call is checked against them)."""

    __slots__ = (
        "_by_code",
        "_errors",
        "_trailing",
        "_trailing_known",
        "config",
        "declarations",
        "memo",
        "messages",
        "tools",
    )

    def __init__(
        self,
        messages: Sequence[Message],
        tools: Declared | None = None,
        config: RuleConfig | None = None,
        declarations: object = None,
    ) -> None:
        self.messages = messages
        self.tools = tools
        self.config = config
        """The run's config, for a rule that needs more than the actions (`too_long`)."""
        self.declarations = declarations
        """The row's declarations as it holds them (stage `render`: the template's `tools`)."""
        self.memo: dict[str, object] = {}
        """What several rules of one stage work out once (the render, for `render` rules)."""
        self._errors: list[TranscriptError] | None = None
        self._by_code: dict[str, list[TranscriptError]] | None = None
        self._trailing: tuple[int, tuple[str, ...]] | None = None
        self._trailing_known = False

    @property
    def errors(self) -> list[TranscriptError]:
        if self._errors is None:
            self._errors = transcript_errors(self.messages)
        return self._errors

    @property
    def trailing(self) -> tuple[int, tuple[str, ...]] | None:
        """The last assistant turn and its call ids, when they are pending at the very end."""
        if not self._trailing_known:
            self._trailing = trailing_calls(self.messages)
            self._trailing_known = True
        return self._trailing

    def errors_of(self, code: str) -> list[TranscriptError]:
        """The walk's errors of `code`, in order (grouped once: five rules ask, per row)."""
        if self._by_code is None:
            by_code: dict[str, list[TranscriptError]] = {}
            for error in self.errors:
                by_code.setdefault(error.code, []).append(error)
            self._by_code = by_code
        return list(self._by_code.get(code, ()))


def _always(config: RuleConfig) -> bool:
    return True


@dataclass(slots=True, frozen=True)
class Rule:
    """One code of the stats table, and everything the cleaner knows about it."""

    code: str
    order: float
    """Its place among the rules (SPEC section 5: R0 first); the repair chain runs in it."""
    summary: str
    """One line: what the code means (the codes table, `--help`)."""
    actions_help: str
    """What each allowed action does with it: the comment above it in `configs/default.toml`."""
    allowed: frozenset[Action]
    default: Action
    strict: Action = "reject"
    stage: Stage = "walk"
    find: Callable[[Walk], Iterable[Violation]] | None = None
    """Its violations on the R1-cleaned transcript (stage `walk`)."""
    rendered: Callable[[Walk], Iterable[Violation]] | None = None
    """With a chat template, its violations on the transcript as rendered, found in stage
    `render` in place of `find` (`too_long` counts the rendered conversation's tokens)."""
    repair: Callable[[list[Message], RuleConfig], list[Message]] | None = None
    """Its repair, where it has one: new messages, or `Unrepairable`."""
    repair_declared: (
        Callable[[list[Message], RuleConfig, Declared | None], list[Message]] | None
    ) = None
    """Its repair given the row's declared tools too, where they matter to it (R2: a raw-input
    tool's call is not invalid); the cleaner calls it in place of `repair`."""
    also_repairs: tuple[str, ...] = ()
    """Codes whose repair, when the config asks for it, is this rule's repair too."""
    repaired_as: str = "repaired"
    """What the stats table calls its repair (`dropped` for empty turns)."""
    survives_repair: bool = False
    """Its repair answers it rather than removing it (R2: the invalid call stays, answered), so a
    repaired transcript may still show it."""
    message: str | None = None
    """The words of every violation, where they never depend on the row: the fast path then
    rejects by itself the rows whose only code it is."""
    columnar: ColumnarCheck | None = None
    """Its Arrow check over the columnar view of conversations (`transcript_clean.columnar`),
    written once for every format that flattens into it."""
    reads_declared_tools: bool = False
    """It checks calls against the row's declared tools: its Arrow check is the fast path's
    declared-tools checks (`fastpath.declared`), over any view's calls."""
    enabled: Callable[[RuleConfig], bool] = _always
    """Whether a run with this config looks for it at all."""
    optional: bool = False
    """A config's summary (`Config.to_dict`, summary.json, a run's identity) names its action
    only where it is `enabled`: a code that only an option brings (`--to`), so that a run
    without the option reads as it did before the code was added."""

    def __post_init__(self) -> None:
        if self.default not in self.allowed or self.strict not in self.allowed:
            raise ValueError(f"{self.code}: default and strict actions must be allowed ones")


# ---------------------------------------------------------------------------------------------
# what several rules' repairs share


def trailing_calls(messages: Sequence[Message]) -> tuple[int, tuple[str, ...]] | None:
    """The last assistant turn and its call ids, when its calls are still pending at the very end
    of the history (no user message after it)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            return None
        if isinstance(message, AssistantMessage):
            ids = tuple(dict.fromkeys(c.id for c in message.tool_calls))
            return (index, ids) if ids else None
    return None


def answer_window(messages: Sequence[Message], turn: int) -> int | None:
    """The index of the user message that must answer the assistant turn at `turn`, if any: the
    next message that is not a system message, when it is a user message."""
    for index in range(turn + 1, len(messages)):
        message = messages[index]
        if isinstance(message, UserMessage):
            return index
        if isinstance(message, AssistantMessage):
            return None
    return None


def put_results(
    messages: list[Message], turn: int, results: Sequence[ToolResult], *, replacing: bool
) -> None:
    """Answer the turn at `turn` with `results`, in the user message that answers it: with
    `replacing`, in front of its other parts and in place of the first result for each of their
    calls; without, after the results it opens with and before its other parts (an agent loop
    records a call's result before what the user said next: Claude Code writes the error result
    of a call the user interrupted, then "[Request interrupted by user for tool use]"; and
    Anthropic's API takes a user message's results only before its texts). When no user
    message answers the turn, they become a new one right after it."""
    at = answer_window(messages, turn)
    if at is None:
        messages.insert(turn + 1, UserMessage(tuple(results)))
        return
    answering = messages[at]
    assert isinstance(answering, UserMessage)
    if not replacing:
        parts = answering.content
        head = next((i for i, p in enumerate(parts) if not isinstance(p, ToolResult)), len(parts))
        messages[at] = replace(answering, content=(*parts[:head], *results, *parts[head:]))
        return
    calls = {r.call for r in results}
    replaced: set[str] = set()
    others = []
    for part in answering.content:
        if isinstance(part, ToolResult) and part.call in calls and part.call not in replaced:
            replaced.add(part.call)
        else:
            others.append(part)
    messages[at] = replace(answering, content=(*results, *others))


def raw_input_names(tools: Declared | None) -> frozenset[str]:
    """The names of the declared tools that take raw input (`code_interpreter`, custom tools):
    their calls' arguments are not JSON by design."""
    if tools is None:
        return frozenset()
    return frozenset(name for name, tool in tools.tools.items() if tool.raw)
