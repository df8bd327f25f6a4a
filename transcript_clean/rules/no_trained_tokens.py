"""no_trained_tokens: under a chat template that marks generation (`{% generation %}`), the
row's assistant mask is empty, so `assistant_only_loss` trains on nothing of it
(huggingface/trl#4879). Looked for only with `--chat-template`; a template that marks no
generation gives no mask at all, which the run says once, not on every row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.rules._template import template_check, with_template
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "no_trained_tokens"


def find(walk: Walk) -> Iterator[Violation]:
    checked = template_check(walk)
    if checked is None or checked.rendering.error is not None:
        return
    if not checked.template.marks_generation:
        return
    rendering = checked.rendering
    empty = rendering.trained == 0 if rendering.trained is not None else not rendering.trained_chars
    if empty:
        message = (
            f"the chat template {checked.template.name} marks no token of the row as trained "
            "(its assistant mask is empty)"
        )
        yield Violation(CODE, None, None, message)


RULE = Rule(
    CODE,
    order=6.33,
    summary="the --chat-template's assistant mask is empty",
    actions_help="Under a chat template (--chat-template) that marks generation, the row's "
    "assistant mask is empty: assistant-only loss trains on nothing of it. `reject` sets it "
    "aside, `keep` counts it.",
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    stage="render",
    find=find,
    enabled=with_template,
)
