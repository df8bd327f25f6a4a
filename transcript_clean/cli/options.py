"""The commands' options, in groups that several commands share: how to read SOURCE, a run's
engine and batches, tokens, chat templates and gates; with the click callbacks that parse a
value as it is given."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from transcript_clean.format_names import FORMAT_NAMES

F = TypeVar("F", bound=Callable[..., Any])

FORMAT_CHOICES = ("auto", *FORMAT_NAMES)
TYPE_CHOICES = (
    "auto", "conversation", "prompt", "prompt-completion", "preference", "implicit-preference",
    "unpaired", "openai-preference", "ranking",
)  # fmt: skip


def apply_options(options: list[Callable[[F], F]], f: F) -> F:
    for option in reversed(options):
        f = option(f)
    return f


def _storage_options(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, Any]:
    from transcript_clean.storage import parse_storage_options

    try:
        return parse_storage_options(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def source_options(f: F) -> F:
    """The options that say how to read SOURCE, shared by every command that reads one."""
    return apply_options(
        [
            click.option(
                "--format",
                type=click.Choice(FORMAT_CHOICES),
                default="auto",
                show_default=True,
                help="The rows' format; auto picks it from the columns and the first rows.",
            ),
            click.option(
                "--column",
                default=None,
                help="The conversation column (default: the format's, e.g. messages, "
                "conversations).",
            ),
            click.option(
                "--tools-column",
                default=None,
                help="The column with each row's declared tools (default: tools, and for "
                "openai also functions).",
            ),
            click.option(
                "--type",
                "dataset_type",
                type=click.Choice(TYPE_CHOICES),
                default="auto",
                show_default=True,
                help="The dataset type: one conversation column, or a prompt and its "
                "candidates (docs/dataset-types.md); auto picks it from the columns.",
            ),
            click.option(
                "--prompt-column",
                default=None,
                help="With --type: the prompt's column, or a path into one (input.messages).",
            ),
            click.option(
                "--candidates",
                default=None,
                help="With --type: the candidate columns, comma-separated (chosen,rejected).",
            ),
            click.option(
                "--config",
                default="default",
                show_default=True,
                help="A config TOML file, or a built-in name: default (repair) or strict (reject).",
            ),
            click.option("--split", default=None, help="Hub / datasets folder: the split (train)."),
            click.option("--subset", default=None, help="Hub: the dataset's configuration name."),
            click.option("--revision", default=None, help="Hub: a branch, tag or commit."),
            click.option("--streaming", is_flag=True, help="Hub: stream instead of downloading."),
            click.option(
                "--storage-option",
                "storage_options",
                multiple=True,
                metavar="KEY=VALUE",
                callback=_storage_options,
                help="A URI's filesystem option (s3fs, gcsfs...), for SOURCE, OUTPUT and "
                "--baseline: endpoint_url=http://host:9000, region=eu-west-1, anon=true, "
                "timeout=SECONDS (a bucket call's wait, 10 by default). "
                "Repeatable; credentials come from the environment, not from here.",
            ),
        ],
        f,
    )


_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def byte_size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """A `--...-bytes` option's value, a number of bytes maybe with a unit: 64MiB, 512KiB, 1GB."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmg]i?b|b)?\s*", value, re.IGNORECASE)
    if match is None or int(match[1]) < 1:
        raise click.BadParameter(f"{value!r} is not a size such as 64MiB, 512KiB or 1048576")
    return int(match[1]) * _UNITS[(match[2] or "b").lower()]


def run_options(f: F) -> F:
    """The options of a run over SOURCE (`clean` and `audit`): how much to read, in what
    batches, and on which engine."""
    return apply_options(
        [
            click.option(
                "--limit",
                type=click.IntRange(min=0),
                default=None,
                help="Read only the first N rows.",
            ),
            click.option(
                "--batch-size",
                type=click.IntRange(min=1),
                default=4096,
                show_default=True,
                help="Rows per Arrow batch (memory is bounded by this and --batch-bytes, not by "
                "the input).",
            ),
            click.option(
                "--batch-bytes",
                metavar="SIZE",
                callback=byte_size,
                default="64MiB",
                show_default=True,
                help="Bytes of rows per Arrow batch, as well as --batch-size rows (a batch of one "
                "long row may hold more): 64MiB, 512KiB, 1GiB or a number of bytes.",
            ),
            click.option(
                "--max-row-bytes",
                metavar="SIZE",
                callback=byte_size,
                default="64MiB",
                show_default=True,
                help="A JSON Lines line longer than this is a malformed_row reject, skipped as it "
                "is read, never held whole (a small .jsonl.gz can hold a line of a GiB).",
            ),
            click.option(
                "--workers",
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Processes working on blocks in parallel; the result is the same for any "
                "number.",
            ),
            click.option(
                "--engine",
                type=click.Choice(["local", "ray"]),
                default="local",
                show_default=True,
                help="local: processes on this machine; ray: Ray Data tasks on a local Ray or a "
                "cluster (needs the [ray] extra: pip install 'transcript-clean[ray]').",
            ),
            click.option(
                "--ray-address",
                default=None,
                help="Ray: the cluster to join, HOST:PORT or auto (default: RAY_ADDRESS, else a "
                "new local Ray on this machine).",
            ),
        ],
        f,
    )


def token_options(f: F) -> F:
    """Token lengths with a local tokenizer (`clean` and `audit`): the profile's tokens, and
    the `too_long` rule."""
    return apply_options(
        [
            click.option(
                "--tokenizer",
                type=click.Path(dir_okay=False),
                default=None,
                help="A local tokenizer.json: the profile adds tokens per row and per assistant "
                "turn (needs the [tokens] extra: pip install 'transcript-clean[tokens]').",
            ),
            click.option(
                "--max-tokens",
                type=click.IntRange(min=1),
                default=None,
                help="With --tokenizer: rows over N tokens have the code too_long (kept and "
                "counted unless the config rejects them).",
            ),
        ],
        f,
    )


def template_options(f: F) -> F:
    """Rows rendered with a model's chat template (`clean`, `audit` and `explain`)."""
    return apply_options(
        [
            click.option(
                "--chat-template",
                metavar="TEMPLATE",
                default=None,
                help="Render every row kept with this chat template, as its trainer will: a "
                ".jinja file, a tokenizer folder or a Hub model id; adds the codes template_error, "
                "template_drops_content, template_prunes_history and no_trained_tokens (needs "
                "the [templates] extra: pip install 'transcript-clean[templates]').",
            ),
            click.option(
                "--arguments-as",
                type=click.Choice(["object", "string", "auto"]),
                default=None,
                help="With --chat-template: render calls' arguments as JSON objects, as JSON "
                "text, or auto: in the form the template renders without error and without "
                "loss (worked out once per run); OpenAI rows (and --to openai) are written "
                "with them in that form. Without it: rendered as objects, written as they are.",
            ),
        ],
        f,
    )


def gate_options(f: F) -> F:
    """The gates on a run's shares (`clean` and `audit`): `--max-error-rate` and `--max`."""
    return apply_options(
        [
            click.option(
                "--max-error-rate",
                metavar="R",
                default=None,
                help="Gate: fail when the share of rows with any violation exceeds R, a "
                "fraction (0.05) or a percentage (5%).",
            ),
            click.option(
                "--max",
                "max_codes",
                metavar="CODE=R",
                multiple=True,
                help="Gate, repeatable: fail when CODE's share exceeds R. A code's share is the "
                "rows it was acted on in (repaired, dropped, kept, or rejected: it decided the "
                "row) over the rows in; rows where it was merely present, rejected by another "
                "code, do not count.",
            ),
        ],
        f,
    )
