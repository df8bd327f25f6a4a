"""The `transcript-clean` command: thin click wrappers over the library."""

from __future__ import annotations

import functools
import gc
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from threading import Event
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from transcript_clean.errors import AccountingError, TranscriptCleanError, command_line
from transcript_clean.version import __version__

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from transcript_clean.options import EngineOptions, SourceOptions
    from transcript_clean.policy import Config

F = TypeVar("F", bound=Callable[..., Any])

FORMAT_CHOICES = (
    "auto",
    "openai",
    "sharegpt",
    "anthropic",
    "rig",
    "hermes",
    "gemini",
    "bedrock",
    "claude-code",
    "llamafactory",
    "hh",
    "alpaca",
    "query-response",
    "pairs",
    "completion",
    "responses",
    "openhands",
)
LOG_LEVELS = ("debug", "info", "warning", "error")
TYPE_CHOICES = (
    "auto", "conversation", "prompt", "prompt-completion", "preference", "implicit-preference",
    "unpaired", "openai-preference", "ranking",
)  # fmt: skip


class InputError(click.ClickException):
    """Bad input, config or output folder: exit status 2, like a usage error."""

    exit_code = 2


class Group(click.Group):
    """Turns the library's errors into one-line messages, in one place, and Ctrl-C into exit
    status 130 wherever it comes (click's own answer is "Aborted!" and 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with command_line():  # the library's messages name the flags, not the arguments
                return super().invoke(ctx)
        except AccountingError as err:  # the run's fault, not the input's: exit 1
            raise click.ClickException(str(err)) from err
        except TranscriptCleanError as err:
            raise InputError(str(err)) from err
        except KeyboardInterrupt:
            _interrupted()
        except Exception as err:  # a store's or the network's, where no call of ours caught it
            from transcript_clean.storage import failure

            said = failure(err)
            if said is None:
                raise
            raise InputError(said) from err


class Interrupted(SystemExit):
    """Ctrl-C, handled and said: exit status 130."""


def _interrupted(message: str = "interrupted") -> NoReturn:
    """Say so on stderr and exit 130, as a program stopped by Ctrl-C does."""
    click.echo(f"\n{message}", err=True)
    raise Interrupted(130)


CTRL_C = Event()
"""Set once the program has had a Ctrl-C (`_ctrl_c`)."""


def _ctrl_c(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: KeyboardInterrupt, as Python's own handler raises it, and remembered. Python
    drops one raised where exceptions are only reported (a callback of importlib's, as a module
    is imported: "Exception ignored in ... KeyboardInterrupt"), and the run would go on to the
    end; `Progress` raises it again, as the run starts and after each batch."""
    CTRL_C.set()
    raise KeyboardInterrupt


def _dropped_ctrl_c() -> None:
    """Raise again a Ctrl-C that Python dropped (`_ctrl_c`)."""
    if CTRL_C.is_set():
        raise KeyboardInterrupt


def _exit_interrupted() -> NoReturn:
    """End the process with status 130 once Ctrl-C has been handled.

    A Ctrl-C that lands while an extension module runs Python code of its own as it is
    imported leaves the interpreter marked as stopped by it, and the interpreter then ends
    the process with SIGINT on the way out whatever status was asked: about one Ctrl-C in ten
    in the first half second of an uncompiled run. So the exit handlers run here, the output
    is flushed, and the process ends at once."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="transcript-clean")
def main() -> None:
    """Clean chat and tool-calling conversation datasets.

    Reads Hugging Face or Parquet conversation datasets, drops empty assistant turns, validates
    every row as a canonical transcript, repairs what a live agent loop would have recorded, and
    writes cleaned Parquet shards, a rejects shard and an error-stats table.
    """


JEMALLOC_CONF = "dirty_decay_ms:100,muzzy_decay_ms:100"
"""Arrow's jemalloc returns freed pages to the system after 0.1 s (JE_ARROW_MALLOC_CONF)."""


def entry() -> None:
    """The `transcript-clean` program: `main` with Arrow's jemalloc pool, then a quick exit.

    Arrow's default pool in the Linux wheels is mimalloc. With the cleaner's threads
    allocating side by side it held on to more memory than jemalloc, and was no faster
    (docs/performance.md has the numbers). The pool is chosen by ARROW_DEFAULT_MEMORY_POOL,
    which pyarrow reads when it is imported, and the worker processes inherit; a value the user
    set stays. jemalloc hands freed pages back after 0.1 s (`JEMALLOC_CONF`, read by the same
    rule): kept a second, as by default, the pages of the batches just freed were over 100 MB
    of a long-rows run's peak; handed back at once, they cost short rows a third more time.

    The cleaner does no linear algebra, yet NumPy's OpenBLAS starts a thread per core when it
    is imported, which spins a while for work that never comes: on two cores, 0.03 s of every
    run's start (docs/performance.md). One thread (OPENBLAS_NUM_THREADS, read at import too)
    starts none; again a value the user set stays.

    Once a command is done, everything it wrote is closed and in place; what is left is the
    interpreter's teardown, whose last garbage collection walks every object pyarrow and NumPy
    (and pandas, where a run loads it) made: most of the teardown's time. Frozen, they are left
    to be freed with the process. Exit handlers still run, and standard output is still
    flushed; only objects in reference cycles go without their finalizers, and nothing the
    commands leave open is one."""
    if sys.platform == "linux":  # before pyarrow is imported: it reads this once
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
        os.environ.setdefault("JE_ARROW_MALLOC_CONF", JEMALLOC_CONF)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy is imported
    signal.signal(signal.SIGINT, _ctrl_c)
    try:
        try:
            main()
        except KeyboardInterrupt:  # before or after a command, where `Group` does not see it
            _interrupted()
    except Interrupted:
        _exit_interrupted()
    finally:
        gc.freeze()


def _without_pandas(read: SourceOptions, engine: EngineOptions) -> None:
    """For a source read in this process without `datasets`, pandas kept out of the process
    (see `transcript_clean.pandas_free`): before the source is opened, as opening a JSON file
    converts rows already (its open pass)."""
    from transcript_clean.sources import reads_itself

    if engine.engine != "ray" and isinstance(read.spec, str) and reads_itself(read.spec):
        from transcript_clean.pandas_free import keep_pandas_out

        keep_pandas_out()


def _apply(options: list[Callable[[F], F]], f: F) -> F:
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


class _Echo(logging.Handler):
    """Log records on stderr as `transcript-clean: info: ...`, through click: the stderr of the
    moment, as click's test runner swaps it."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"transcript-clean: {record.levelname.lower()}: {record.getMessage()}", err=True)


def set_log_level(level: str) -> None:
    """The one place the program's logging is set up: the `transcript_clean` logger's records
    of `level` and above go to stderr."""
    logger = logging.getLogger("transcript_clean")
    for handler in [h for h in logger.handlers if isinstance(h, _Echo)]:
        logger.removeHandler(handler)
    logger.addHandler(_Echo())
    logger.setLevel(level.upper())


def log_options(f: F) -> F:
    """`-v` / `--verbose` and `--log-level`, on every command: what the library logs (the
    source and format read, the blocks, each block done) goes to stderr."""

    @functools.wraps(f)
    def command(*args: Any, verbose: int, log_level: str | None, **kwargs: Any) -> Any:
        set_log_level(log_level or {0: "warning", 1: "info"}.get(verbose, "debug"))
        return f(*args, **kwargs)

    return _apply(  # type: ignore[return-value]
        [
            click.option(
                "--verbose",
                "-v",
                count=True,
                help="Log what the run does on stderr: -v the source, format and blocks, -vv "
                "each block too (as --log-level info, debug).",
            ),
            click.option(
                "--log-level",
                type=click.Choice(LOG_LEVELS),
                default=None,
                help="What to log on stderr (default warning; wins over -v).",
            ),
        ],
        command,
    )


def gate_options(f: F) -> F:
    """The gates on a run's shares (`clean` and `audit`): `--max-error-rate` and `--max`."""
    return _apply(
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


def _said_briefly(
    as_json: bool, quiet: bool, failed: list[str], document: Callable[[], Any]
) -> bool:
    """What `--json` and `--quiet` print of a run, for clean and audit alike: the document as
    JSON on stdout with the failed gates on stderr, or the failed gates alone. False when
    neither was asked for, and the run's words are still to be printed."""
    if as_json:
        import json

        click.echo(json.dumps(document(), indent=2))
        for line in failed:
            click.echo(line, err=True)
    elif quiet:
        for line in failed:
            click.echo(line)
    return as_json or quiet


def _limit(value: str | None, hint: str) -> float | None:
    """A gate's limit as typed, or a usage error naming the option."""
    if value is None:
        return None
    from transcript_clean.audit.measure import parse_fraction

    try:
        return parse_fraction(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint=hint) from None


def _share_limits(
    max_error_rate: str | None, max_codes: tuple[str, ...]
) -> tuple[float | None, dict[str, float]]:
    """`--max-error-rate` and `--max CODE=R` parsed, before the run: a mistyped code or limit
    is a usage error, not a failed run."""
    max_share: dict[str, float] = {}
    if not max_codes:
        return _limit(max_error_rate, "'--max-error-rate'"), max_share
    from transcript_clean.audit.measure import parse_code_limit

    for text in max_codes:
        try:
            code, share = parse_code_limit(text)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="'--max'") from None
        max_share[code] = share
    return _limit(max_error_rate, "'--max-error-rate'"), max_share


def source_options(f: F) -> F:
    """The options that say how to read SOURCE, shared by every command that reads one."""
    return _apply(
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


def token_options(f: F) -> F:
    """Token lengths with a local tokenizer (`clean` and `audit`): the profile's tokens, and
    the `too_long` rule."""
    return _apply(
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


def _profile_limits(texts: list[str]) -> list[Any]:
    """`--max-drift NAME=LIMIT` gates on the profile's figures."""
    from transcript_clean.audit.profile_drift import parse_drift_limit

    try:
        return [parse_drift_limit(text) for text in texts]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'--max-drift'") from None


def template_options(f: F) -> F:
    """Rows rendered with a model's chat template (`clean`, `audit` and `explain`)."""
    return _apply(
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


def run_options(f: F) -> F:
    """The options of a run over SOURCE (`clean` and `audit`): how much to read, in what
    batches, and on which engine."""
    return _apply(
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


def _options(
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


@contextmanager
def _workers(engine: EngineOptions) -> Iterator[ProcessPoolExecutor | None]:
    """The other workers' processes for `--workers N` on the local engine, started first thing:
    they import the cleaner while this process does."""
    if engine.workers <= 1 or engine.engine != "local":
        yield None
        return
    from transcript_clean.engine.workers import start_workers

    with start_workers(engine.workers - 1, "transcript_clean.engine.local") as pool:
        yield pool


class Progress:
    """What a long command shows on stderr: the source and format it read, and a tqdm bar (rows,
    rows/s) when stderr is a terminal. `start` and `update` are the library's callbacks."""

    def __init__(self, quiet: bool, bar: bool = True) -> None:
        self.quiet = quiet
        self.want_bar = bar
        self.bar: Any = None
        self.to: str | None = None
        """The format the kept rows are written in (`--to`), said after the one read."""
        self.arguments = False
        """Whether `--arguments-as` was given to a run that writes rows."""

    def start(self, src: Any, fmt: Any, total: int | None) -> None:
        _dropped_ctrl_c()
        if not self.quiet:
            note = "" if src.note is None else f"; {src.note}"
            from transcript_clean.shapes import ShapedFormat

            if isinstance(fmt, ShapedFormat):
                click.echo(f"reading {src.name} as {fmt.describe()}{note}", err=True)
            else:
                words = getattr(fmt, "words", None)
                words = "" if words is None else f"; {words}"
                click.echo(
                    f"reading {src.name} as {fmt.name} (column {fmt.column!r}{words}{note})",
                    err=True,
                )
            if self.to is not None:
                click.echo(f"writing the kept rows as {self.to}, tools in 'tools'", err=True)
            from transcript_clean.formats import get_format

            written = get_format(self.to) if self.to is not None else fmt
            if self.arguments and written.with_arguments("object") is None:
                click.echo(
                    f"note: --arguments-as decides how the rows are rendered; {written.name} "
                    "rows keep their calls' arguments in their own form",
                    err=True,
                )
        if self.quiet or not self.want_bar or not sys.stderr.isatty():
            return  # no bar: tqdm is not even imported (it starts a monitor thread)
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, unit=" rows", unit_scale=True, file=sys.stderr, dynamic_ncols=True
        )

    def update(self, rows: int) -> None:
        _dropped_ctrl_c()
        if self.bar is not None:
            self.bar.update(rows)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


@contextmanager
def _resumable(output: str) -> Iterator[None]:
    """Ctrl-C during a run: say how to finish it, and exit 130 as an interrupted program does."""
    try:
        yield
    except KeyboardInterrupt:
        from transcript_clean.storage import is_remote

        if is_remote(output):
            _interrupted(
                f"interrupted: {output.rstrip('/')}/_temporary/ keeps the finished shards; run "
                "the same command with --resume to finish it"
            )
        partial = Path(output).absolute()
        partial = partial.with_name(partial.name + ".partial")
        if partial.exists():
            _interrupted(
                f"interrupted: {partial} keeps the finished shards; run the same command "
                "with --resume to finish it"
            )
        _interrupted()


@main.command()
@click.argument("source")
@click.argument("output", type=click.Path(file_okay=False))
@source_options
@click.option(
    "--rows-per-shard",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Input rows per output shard (a shard holds the kept rows of that many input rows).",
)
@click.option(
    "--output-format",
    type=click.Choice(["parquet", "jsonl"]),
    default="parquet",
    show_default=True,
    help="Write data/ and rejects/ as Parquet shards or as JSON Lines (unchanged JSON Lines rows "
    "byte for byte).",
)
@click.option(
    "--compression",
    default=None,
    help="Compress the shards: for parquet none, snappy, gzip, brotli, lz4 or zstd (default "
    "zstd); for jsonl none, gzip or zstd (default none).",
)
@click.option(
    "--to",
    "to",
    type=click.Choice(["openai", "sharegpt", "anthropic", "rig"]),
    default=None,
    help="Write the kept rows in this conversation format, declared tools in its 'tools' "
    "column (openai: TRL's messages + tools); a row it cannot hold whole is a "
    "lossy_conversion reject. Every row takes the per-row path.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace OUTPUT if an earlier run wrote it (never a folder of other files).",
)
@click.option("--resume", is_flag=True, help="Finish a run that was killed (same options).")
@run_options
@token_options
@template_options
@gate_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run's summary (summary.json, with the output and the gates) as one JSON "
    "document on stdout, and nothing else there.",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar, no table: only errors and failed gates."
)
@log_options
def clean(
    source: str,
    output: str,
    rows_per_shard: int,
    output_format: str,
    compression: str | None,
    to: str | None,
    overwrite: bool,
    resume: bool,
    max_error_rate: str | None,
    max_codes: tuple[str, ...],
    as_json: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Clean SOURCE into OUTPUT: data/, rejects/, stats.parquet, stats.csv, summary.json, README.md.

    SOURCE is a Parquet file, folder or glob, a JSON or JSONL file or a folder of them, a
    folder written by datasets' save_to_disk, or a Hugging Face Hub dataset id. OUTPUT is a
    folder (a name such as out.jsonl is refused; out.jsonl/ is not). Every input row ends up in
    exactly one of data/ (kept, repaired where the config says) and rejects/ (with its codes).

    Exit status: 0 when the run is done and every gate holds, 1 when a gate is exceeded (the
    output is written all the same), 2 for usage errors and unreadable input, config or OUTPUT.

    \b
    Examples:
      transcript-clean clean raw/ clean/
      transcript-clean clean 'raw/*.parquet' clean/ --config strict --workers 2
      transcript-clean clean HuggingFaceH4/ultrachat_200k clean/ --split train_sft
      transcript-clean clean train.jsonl clean/ --output-format jsonl --compression gzip
      transcript-clean clean session.jsonl sft/ --to openai --output-format jsonl
      transcript-clean clean raw/ clean/ --max-error-rate 5% --max unknown_tool=0 --json
    """
    config, read, engine = _options(source, options)
    error_limit, max_share = _share_limits(max_error_rate, max_codes)
    with ExitStack() as stack:
        pool = stack.enter_context(_workers(engine))  # first: they import as this process does
        from transcript_clean.run import clean as run_clean
        from transcript_clean.stats import render_accounting, render_table

        progress = stack.enter_context(Progress(quiet, bar=not as_json))
        progress.to = to
        progress.arguments = getattr(config, "arguments_as", None) is not None
        stack.enter_context(_resumable(output))
        _without_pandas(read, engine)
        result = run_clean(
            read,
            output,
            config=config,
            engine=engine,
            rows_per_shard=rows_per_shard,
            overwrite=overwrite,
            resume=resume,
            progress=progress.update,
            on_start=progress.start,
            pool=pool,
            output_format=output_format,
            compression=compression,
            to=to,
        )
    gates = []
    if error_limit is not None or max_share:
        from transcript_clean.audit.measure import share_gates

        gates = share_gates(result.stats, error_limit, max_share)
    failed = [gate.describe() for gate in gates if gate.exceeded]

    def document() -> dict[str, Any]:
        return {
            **result.summary,
            "output_path": str(result.output),
            "gates": [gate.to_dict() for gate in gates],
            "failed_gates": failed,
            "passed": not failed,
        }

    if not _said_briefly(as_json, quiet, failed, document):
        if result.already_complete:
            click.echo(f"{result.output} is already complete: removed the run's partial folder")
        click.echo(render_table(result.stats.records()))
        click.echo()
        click.echo(render_accounting(result.stats) + "  (checked)")
        if gates:
            from transcript_clean.audit.render import render_gates

            click.echo("\ngates:\n" + "\n".join(render_gates(gates)))
        if "hint" in result.summary:
            click.echo(f"hint: {result.summary['hint']}")
        click.echo(f"wrote {result.output}")
    if failed:  # after everything is written and said: the data is there, and bad
        click.echo(f"clean failed: {len(failed)} gate(s) exceeded; the output is written", err=True)
        raise click.exceptions.Exit(1)


@main.command()
@click.argument("source")
@click.option("--row", "row_number", type=int, required=True, help="The row number, from 0.")
@source_options
@template_options
@log_options
def explain(source: str, row_number: int, **options: Any) -> None:
    """Show what the cleaner does to one row: its canonical transcript, its violations with
    message indexes, and each repair's before and after.

    \b
    Example:
      transcript-clean explain raw/train.parquet --row 1234
    """
    from transcript_clean.explain import explain_row, render_explanation
    from transcript_clean.policy import Config, load_config

    config, read, _ = _options(source, options)
    src, fmt = read.resolve()
    cfg = config if isinstance(config, Config) else load_config(config)
    click.echo(render_explanation(explain_row(src, row_number, fmt, cfg)))


@main.command()
@click.argument("source")
@source_options
@run_options
@token_options
@template_options
@click.option(
    "--stats-out",
    type=click.Path(file_okay=False),
    metavar="DIR",
    default=None,
    help="Write stats.parquet, stats.csv and summary.json into DIR, as a clean run does.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the stats files already in --stats-out DIR, and the --report FILE.",
)
@gate_options
@click.option(
    "--baseline",
    type=click.Path(),
    default=None,
    help="A previous clean or audit run's summary.json, or its stats folder: show each code's "
    "share then and now.",
)
@click.option(
    "--max-drift",
    metavar="R|NAME=LIMIT",
    multiple=True,
    help="Gate (needs --baseline): fail when any code's share moved by more than R, in absolute "
    "terms (0.02 or 2% means two percentage points). Repeatable with NAME=LIMIT for a figure "
    "of the profile: turns.reasoning_only=2pp, chars.p95=1.25x, tools.search=2x.",
)
@click.option(
    "--history",
    type=click.Path(file_okay=False),
    default=None,
    help="A folder of earlier summary.json files (or of stats folders): the HTML report draws "
    "each headline figure across them, with the gate limits.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a report to FILE.md (Markdown) or FILE.html (one self-contained page with a "
    "chart): stats, drift, gates and samples.",
)
@click.option(
    "--samples",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Example rows per code in the report and the JSON (the first ones in input order).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document with everything on stdout."
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress bar; print only the gates that failed."
)
@log_options
def audit(
    source: str,
    stats_out: str | None,
    overwrite: bool,
    max_error_rate: str | None,
    max_codes: tuple[str, ...],
    baseline: str | None,
    max_drift: tuple[str, ...],
    history: str | None,
    report: str | None,
    samples: int,
    as_json: bool,
    quiet: bool,
    **options: Any,
) -> None:
    """Audit SOURCE: the error stats a clean run would report, checked against gates and a
    previous run, without writing any data.

    Exit status: 0 when every gate holds, 1 when a gate is exceeded (each is printed with its
    measured value and limit), 2 for usage errors and unreadable input, config or baseline.

    The audit runs on the engine a clean run would, in the same blocks (at most 100,000 rows
    of one file each), and reports the same for any --workers and --engine.

    \b
    Examples:
      transcript-clean audit raw/ --config strict --max-error-rate 5%
      transcript-clean audit raw/ --max orphan_tool_result=0.01 --report audit.html
      transcript-clean audit raw/ --baseline stats/yesterday --max-drift 2% --stats-out stats/today
      transcript-clean audit raw/ --baseline stats/yesterday --max-drift turns.reasoning_only=2pp \
          --max-drift chars.p95=1.25x --history stats/ --report audit.html
      transcript-clean audit 'raw/*.parquet' --workers 4
    """

    config, read, engine = _options(source, options)
    error_limit, max_share = _share_limits(max_error_rate, max_codes)
    if max_drift and baseline is None:
        raise click.UsageError("--max-drift needs --baseline")
    share_drift = [text for text in max_drift if "=" not in text]
    if len(share_drift) > 1:
        raise click.BadParameter("one limit for the codes' shares", param_hint="'--max-drift'")
    drift_limit = _limit(share_drift[0] if share_drift else None, "'--max-drift'")
    profile_limits = _profile_limits([text for text in max_drift if "=" in text])
    if report is not None:
        from transcript_clean.audit.report import check_report

        check_report(report, overwrite=overwrite)  # before the run, as every other output

    with ExitStack() as stack:
        pool = stack.enter_context(_workers(engine))  # first: they import as this process does
        from transcript_clean.audit import audit as run_audit
        from transcript_clean.audit.render import render_json, render_text
        from transcript_clean.audit.report import write_report

        progress = stack.enter_context(Progress(quiet or as_json))
        _without_pandas(read, engine)

        def started(src: Any, fmt: Any, rows: int | None) -> None:
            if report is not None:  # the source's files are known now: never one of them
                check_report(report, overwrite=overwrite, roots=src.local_roots())
            progress.start(src, fmt, rows)

        result = run_audit(
            read,
            config=config,
            engine=engine,
            samples=samples,
            baseline=baseline,
            max_error_rate=error_limit,
            max_share=max_share,
            max_drift=drift_limit,
            max_profile_drift=profile_limits,
            history=history,
            stats_out=stats_out,
            overwrite=overwrite,
            progress=progress.update,
            on_start=started,
            pool=pool,
        )
    if report is not None:
        write_report(result, report, overwrite=overwrite)
    failed = [gate.describe() for gate in result.failed]
    if not _said_briefly(as_json, quiet, failed, lambda: render_json(result)):
        click.echo(render_text(result))
        for path in (stats_out, report):
            if path is not None:
                click.echo(f"wrote {path}")
    if failed:
        click.echo(f"audit failed: {len(failed)} gate(s) exceeded", err=True)
        raise click.exceptions.Exit(1)
