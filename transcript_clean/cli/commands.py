"""The commands `clean`, `explain` and `audit`: each parses its options, calls the library
(`run.clean`, `explain.explain_row`, `audit.audit`) and prints what it returns."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import click

from transcript_clean.cli.interrupt import resumable
from transcript_clean.cli.log import log_options
from transcript_clean.cli.options import (
    gate_options,
    run_options,
    source_options,
    template_options,
    token_options,
)
from transcript_clean.cli.parse import (
    command_options,
    gate_limit,
    profile_drift_limits,
    share_limits,
)
from transcript_clean.cli.process import imported, without_pandas, workers
from transcript_clean.cli.progress import Progress, said_briefly


@click.command()
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
    "column (openai: TRL's messages + tools; a dataset type's rows in TRL's layout: prompt, "
    "chosen/rejected or completion); a row it cannot hold whole is a lossy_conversion "
    "reject. Every row takes the per-row path.",
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
    config, read, engine = command_options(source, options)
    error_limit, max_share = share_limits(max_error_rate, max_codes)
    with ExitStack() as stack:
        pool = stack.enter_context(workers(engine))  # first: they import as this process does
        from transcript_clean.run import clean as run_clean
        from transcript_clean.stats import render_accounting, render_table

        imported()
        progress = stack.enter_context(Progress(quiet, bar=not as_json))
        progress.to = to
        progress.arguments = getattr(config, "arguments_as", None) is not None
        stack.enter_context(resumable(output))
        without_pandas(read, engine)
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

    if not said_briefly(as_json, quiet, failed, document):
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


@click.command()
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

    imported()
    config, read, _ = command_options(source, options)
    src, fmt = read.resolve()
    cfg = config if isinstance(config, Config) else load_config(config)
    click.echo(render_explanation(explain_row(src, row_number, fmt, cfg)))


@click.command()
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

    config, read, engine = command_options(source, options)
    error_limit, max_share = share_limits(max_error_rate, max_codes)
    if max_drift and baseline is None:
        raise click.UsageError("--max-drift needs --baseline")
    share_drift = [text for text in max_drift if "=" not in text]
    if len(share_drift) > 1:
        raise click.BadParameter("one limit for the codes' shares", param_hint="'--max-drift'")
    drift_limit = gate_limit(share_drift[0] if share_drift else None, "'--max-drift'")
    profile_limits = profile_drift_limits([text for text in max_drift if "=" in text])
    if report is not None:
        from transcript_clean.audit.report import check_report

        check_report(report, overwrite=overwrite)  # before the run, as every other output

    with ExitStack() as stack:
        pool = stack.enter_context(workers(engine))  # first: they import as this process does
        from transcript_clean.audit import audit as run_audit
        from transcript_clean.audit.render import render_json, render_text
        from transcript_clean.audit.report import write_report

        imported()
        progress = stack.enter_context(Progress(quiet or as_json))
        without_pandas(read, engine)

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
    if not said_briefly(as_json, quiet, failed, lambda: render_json(result)):
        click.echo(render_text(result))
        for path in (stats_out, report):
            if path is not None:
                click.echo(f"wrote {path}")
    if failed:
        click.echo(f"audit failed: {len(failed)} gate(s) exceeded", err=True)
        raise click.exceptions.Exit(1)
