"""too_long: a transcript over `--max-tokens` tokens of the `--tokenizer` does not fit the
training context. Looked for only when `--max-tokens` is given. With `--chat-template`, the
tokens are the rendered conversation's, as the trainer will see them (the template's
tokenizer), counted on the transcript as it will be written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from transcript_clean.model import message_texts
from transcript_clean.rules.base import Rule, Violation, Walk

if TYPE_CHECKING:
    from transcript_clean.rules.base import RuleConfig

CODE: Final = "too_long"


def find(walk: Walk) -> Iterator[Violation]:
    from transcript_clean.tokens import count_text_tokens

    config = walk.config
    if config is None or config.max_tokens is None or config.tokenizer is None:
        return
    texts = [text for message in walk.messages for text in message_texts(message)]
    tokens = count_text_tokens(config.tokenizer, texts)
    if tokens > config.max_tokens:
        message = f"the transcript has {tokens} tokens, over the limit of {config.max_tokens}"
        yield Violation(CODE, None, None, message)


def rendered(walk: Walk) -> Iterator[Violation]:
    from transcript_clean.rules._template import template_check

    config = walk.config
    checked = template_check(walk)
    if config is None or config.max_tokens is None or checked is None:
        return
    tokens, trained = checked.rendering.tokens, checked.rendering.trained
    if tokens is not None and tokens > config.max_tokens:
        of = "" if trained is None else f" ({trained} trained)"
        message = (
            f"the rendered conversation has {tokens} tokens{of}, over the limit of "
            f"{config.max_tokens}"
        )
        yield Violation(CODE, None, None, message)


def _enabled(config: RuleConfig) -> bool:
    return config.max_tokens is not None


RULE = Rule(
    CODE,
    order=6.2,
    summary="more tokens than --max-tokens (looked for only with it)",
    actions_help="More tokens than --max-tokens (each text counted alone with --tokenizer): "
    "`keep` counts it, `reject` sets the row aside.",
    allowed=frozenset({"keep", "reject"}),
    default="keep",
    strict="reject",
    find=find,
    rendered=rendered,
    enabled=_enabled,
)
