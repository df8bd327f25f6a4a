"""template_prunes_history: the chat template leaves a piece of an earlier turn out of the
conversation's history, by design, and renders it where its turn is the last (Qwen3's
reasoning before the last user query; gpt-oss's analysis before a final answer). Counted, kept
by default: a trainer that renders the row whole never trains on it, one that renders it turn
by turn does. Looked for only with `--chat-template`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from transcript_clean.rules._template import template_check, with_template
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "template_prunes_history"


def find(walk: Walk) -> Iterator[Violation]:
    checked = template_check(walk)
    if checked is None:
        return
    name = checked.template.name
    for piece in checked.drops.pruned:
        message = (
            f"message {piece.index}: the chat template {name} renders {piece.what} only while "
            "its turn is the last"
        )
        yield Violation(CODE, piece.index, None, message)


RULE = Rule(
    CODE,
    order=6.32,
    summary="the --chat-template prunes an earlier turn's piece, by design",
    actions_help="The chat template (--chat-template) leaves a piece of an earlier turn out of "
    "the conversation and renders it only where its turn is the last (Qwen3's earlier "
    "reasoning): `keep` counts it, `reject` sets the row aside.",
    allowed=frozenset({"keep", "reject"}),
    default="keep",
    stage="render",
    find=find,
    enabled=with_template,
)
