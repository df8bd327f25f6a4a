"""template_drops_content: the chat template leaves out a call, a tool result, a reasoning part
or an assistant text of the row, even where its message ends the conversation: the model would
never be trained on it (DeepSeek-R1-Distill drops a turn's calls when it has text). Looked for
only with `--chat-template`; what a template leaves out of history only is
`template_prunes_history` (`templates/drops.py` tells them apart)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.rules._template import template_check, with_template
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "template_drops_content"


def find(walk: Walk) -> Iterator[Violation]:
    checked = template_check(walk)
    if checked is None:
        return
    name = checked.template.name
    for piece in checked.drops.dropped:
        message = f"message {piece.index}: the chat template {name} leaves out {piece.what}"
        yield Violation(CODE, piece.index, None, message)


RULE = Rule(
    CODE,
    order=6.31,
    summary="the --chat-template leaves out a call, result, reasoning or text",
    actions_help="The chat template (--chat-template) renders the row without one of its calls, "
    "tool results, reasoning parts or assistant texts, even where its message is the last: the "
    "model would be trained without it. `reject` sets the row aside, `keep` counts it.",
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    stage="render",
    find=find,
    enabled=with_template,
)
