"""What the chat-template rules share: the transcript rendered once per row, kept on the walk."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from transcript_clean.rules.base import RuleConfig, Walk
    from transcript_clean.templates import ArgumentsOption, Checked
    from transcript_clean.templates.render import ArgumentsAs

_MEMO = "template"


def template_check(walk: Walk) -> Checked | None:
    """The walk's transcript checked against the run's chat template (None without one)."""
    config = walk.config
    if config is None or config.chat_template is None:
        return None
    if _MEMO not in walk.memo:
        from transcript_clean.templates import check_transcript, load_template

        template = load_template(config.chat_template, config.tokenizer)
        walk.memo[_MEMO] = check_transcript(
            template,
            walk.messages,
            walk.declarations,
            cast("ArgumentsOption | None", config.arguments_as),
        )
    return cast("Checked", walk.memo[_MEMO])


def with_template(config: RuleConfig) -> bool:
    return config.chat_template is not None


def written_arguments(config: RuleConfig) -> ArgumentsAs | None:
    """The form kept rows' calls' arguments are written in (`--arguments-as`, `auto` worked
    out from the template once per process), or None: as the rows hold them."""
    if config.arguments_as is None or config.chat_template is None:
        return None
    from transcript_clean.templates import load_template
    from transcript_clean.templates.check import arguments_form

    template = load_template(config.chat_template, config.tokenizer)
    return arguments_form(template, cast("ArgumentsOption", config.arguments_as))
