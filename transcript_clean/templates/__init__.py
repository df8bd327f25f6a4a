"""Rows rendered with a model's chat template (`--chat-template`): what the model will really be
trained on. `load` finds and compiles a template, `render` turns a canonical transcript into the
messages and tools `apply_chat_template` takes and renders it, `drops` finds what the render left
out, `check` does both for one row (the rules `template_error`, `template_drops_content`,
`template_prunes_history` and `no_trained_tokens` read it). transformers is imported only here,
and only when a template is asked for."""

from __future__ import annotations

from transcript_clean.templates.check import ArgumentsOption, Checked, check_transcript
from transcript_clean.templates.load import (
    ARGUMENTS_AS,
    ChatTemplate,
    check_template,
    load_template,
)

__all__ = [
    "ARGUMENTS_AS",
    "ArgumentsOption",
    "ChatTemplate",
    "Checked",
    "check_template",
    "check_transcript",
    "load_template",
]
