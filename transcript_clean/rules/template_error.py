"""template_error: the chat template raises on the transcript as it will be written, so its
trainer cannot render the row (Gemma 3 on roles that do not alternate, Llama 3.1 on two calls
in a turn). Looked for only with `--chat-template`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.rules._template import template_check, with_template
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "template_error"


def find(walk: Walk) -> Iterator[Violation]:
    checked = template_check(walk)
    if checked is None or checked.rendering.error is None:
        return
    at = checked.rendering.error_at
    where = "" if at is None else f"message {at}: "
    name = checked.template.name
    yield Violation(
        CODE, at, None, f"{where}the chat template {name} raises: {checked.rendering.error}"
    )


RULE = Rule(
    CODE,
    order=6.3,
    summary="the --chat-template raises on the row",
    actions_help="The chat template (--chat-template) raises on the transcript as it would be "
    "written: its trainer cannot render the row. `reject` sets it aside with the template's own "
    "words, `keep` counts it.",
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    stage="render",
    find=find,
    enabled=with_template,
)
