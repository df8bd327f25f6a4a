"""The options a command was given, as the library takes them: the config (with tokens and a
chat template), the source and engine options, and the gates' limits."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from transcript_clean.options import EngineOptions, SourceOptions
    from transcript_clean.policy import Config


def command_options(
    source: str, given: dict[str, Any]
) -> tuple[str | Config, SourceOptions, EngineOptions]:
    """The shared options a command was given, as the library takes them: the config, and
    the source and engine options (`given` keeps the rest)."""
    from transcript_clean.options import EngineOptions, SourceOptions

    engine = EngineOptions(
        given.pop("engine", "local"), given.pop("workers", 1), given.pop("ray_address", None)
    )
    names = (
        "format", "column", "tools_column", "split", "subset", "revision", "streaming",
        "batch_size", "batch_bytes", "limit", "storage_options", "max_row_bytes",
    )  # fmt: skip
    read = SourceOptions(source, **{name: given.pop(name) for name in names if name in given})
    candidates = given.pop("candidates", None)
    read = replace(
        read,
        dataset_type=given.pop("dataset_type", "auto"),
        prompt_column=given.pop("prompt_column", None),
        candidates=tuple(c.strip() for c in candidates.split(",")) if candidates else None,
    )
    config = _with_tokens(
        given.pop("config"),
        given.pop("tokenizer", None),
        given.pop("max_tokens", None),
        given.pop("chat_template", None),
        given.pop("arguments_as", None),
    )
    return config, read, engine


_FORM_WORDS = {"object": "JSON objects", "string": "JSON text"}


def _with_tokens(
    config: str,
    tokenizer: str | None,
    max_tokens: int | None,
    chat_template: str | None = None,
    arguments_as: str | None = None,
) -> str | Config:
    """The config, with `--tokenizer`, `--max-tokens`, `--chat-template` and `--arguments-as`
    when given (the name otherwise)."""
    if tokenizer is None and max_tokens is None and chat_template is None and arguments_as is None:
        return config
    if max_tokens is not None and tokenizer is None and chat_template is None:
        raise click.UsageError("--max-tokens needs --tokenizer or --chat-template")
    from dataclasses import replace

    from transcript_clean.policy import load_config
    from transcript_clean.tokens import check_tokenizer

    if tokenizer is not None:
        check_tokenizer(tokenizer)
    loaded = replace(load_config(config), tokenizer=tokenizer, max_tokens=max_tokens)
    if chat_template is None and arguments_as is None:
        return loaded
    from transcript_clean.policy import with_template
    from transcript_clean.templates import load_template

    loaded = with_template(loaded, chat_template, arguments_as)
    assert loaded.chat_template is not None
    template = load_template(loaded.chat_template, loaded.tokenizer)
    if arguments_as == "auto":
        from transcript_clean.templates.check import arguments_form

        click.echo(
            f"note: --arguments-as auto: the chat template {template.name} takes calls' "
            f"arguments as {_FORM_WORDS[arguments_form(template, 'auto')]}: rows are rendered, "
            "and OpenAI rows written, with them so",
            err=True,
        )
    if not template.marks_generation:
        click.echo(
            f"note: the chat template {template.name} marks no {{% generation %}}: it gives no "
            "assistant mask, so trained tokens cannot be counted (no_trained_tokens is not "
            "looked for)",
            err=True,
        )
    return loaded


def gate_limit(value: str | None, hint: str) -> float | None:
    """A gate's limit as typed, or a usage error naming the option."""
    if value is None:
        return None
    from transcript_clean.audit.measure import parse_fraction

    try:
        return parse_fraction(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint=hint) from None


def share_limits(
    max_error_rate: str | None, max_codes: tuple[str, ...]
) -> tuple[float | None, dict[str, float]]:
    """`--max-error-rate` and `--max CODE=R` parsed, before the run: a mistyped code or limit
    is a usage error, not a failed run."""
    max_share: dict[str, float] = {}
    if not max_codes:
        return gate_limit(max_error_rate, "'--max-error-rate'"), max_share
    from transcript_clean.audit.measure import parse_code_limit

    for text in max_codes:
        try:
            code, share = parse_code_limit(text)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="'--max'") from None
        max_share[code] = share
    return gate_limit(max_error_rate, "'--max-error-rate'"), max_share


def profile_drift_limits(texts: list[str]) -> list[Any]:
    """`--max-drift NAME=LIMIT` gates on the profile's figures."""
    from transcript_clean.audit.profile_drift import parse_drift_limit

    try:
        return [parse_drift_limit(text) for text in texts]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'--max-drift'") from None
