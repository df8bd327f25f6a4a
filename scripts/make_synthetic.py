#!/usr/bin/env python
"""Write generated conversation rows, with defects planted at known rates, to Parquet or JSONL.

A thin command over `synthetic.generate_rows` (scripts/synthetic.py); see `--help`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
from synthetic import (
    CODES,
    FORMATS,
    PREFERENCE_CODES,
    ROW_TYPES,
    UNSUPPORTED,
    arrow_schema,
    declares_tools,
    generate_preference_rows,
    generate_rows,
    preference_schema,
)

from transcript_clean.formats.base import Row

if TYPE_CHECKING:
    import pyarrow as pa


def parse_rates(given: tuple[str, ...], codes: tuple[str, ...] = CODES) -> dict[str, float] | None:
    """`CODE=R` options as rates (R a fraction, or a percentage such as `5%`); None if none."""
    if not given:
        return None
    rates: dict[str, float] = {}
    for item in given:
        code, sep, value = item.partition("=")
        if not sep or code not in codes:
            raise click.BadParameter(
                f"{item!r}: expected CODE=R with CODE one of {', '.join(codes)}",
                param_hint="--rate",
            )
        try:
            rate = float(value[:-1]) / 100 if value.endswith("%") else float(value)
        except ValueError:
            raise click.BadParameter(
                f"{item!r}: {value!r} is not a number", param_hint="--rate"
            ) from None
        rates[code] = rate
    return rates


@click.command()
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--rows",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="How many rows to write.",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="openai",
    show_default=True,
    help="The conversation format of the rows.",
)
@click.option(
    "--type",
    "type_",
    type=click.Choice(ROW_TYPES),
    default="conversation",
    show_default=True,
    help="conversation: one conversation column; preference: a prompt and two candidates "
    "(openai: prompt/chosen/rejected; sharegpt: LLaMA-Factory's ranking rows), defects planted "
    "in the prompt and in single candidates (--rate " + "/".join(PREFERENCE_CODES) + ").",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="The same seed gives the same rows."
)
@click.option(
    "--rate",
    "rates",
    multiple=True,
    metavar="CODE=R",
    help="Plant CODE in a share R of the rows (0.05 or 5%). Repeatable; when given, "
    "only the codes named are planted (default: about 10% of rows, all codes).",
)
@click.option(
    "--rows-per-group",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Rows per Parquet row group, generated and written one group at a time.",
)
@click.option(
    "--planted",
    is_flag=True,
    help="Also write OUTPUT's name with .planted.jsonl: per row, its sorted codes.",
)
def main(
    output: Path,
    rows: int,
    format_: str,
    type_: str,
    seed: int,
    rates: tuple[str, ...],
    rows_per_group: int,
    planted: bool,
) -> None:
    """Write ROWS generated rows of FORMAT to OUTPUT: zstd Parquet, or JSON Lines when OUTPUT
    ends in .jsonl.

    Rows are realistic chats with tool calls, parallel calls and their results; a row carries at
    most one planted defect, a code a strict clean run reports.

    \b
    Examples:
      make_synthetic.py sample.parquet --rows 100000 --format openai --seed 7
      make_synthetic.py bad.jsonl --rows 1000 --format sharegpt \\
          --rate orphan_tool_result=0.2 --rate trailing_tool_call=5% --planted
      make_synthetic.py pref.parquet --rows 200000 --type preference
    """
    preference = type_ == "preference"
    chosen = parse_rates(rates, PREFERENCE_CODES if preference else CODES)
    generate = generate_preference_rows if preference else generate_rows
    stream = generate(rows, format_, seed, chosen)
    try:
        first = next(stream, None)  # the generator checks the rates before the first row
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    if first is not None:
        stream = itertools.chain([first], stream)
    output.parent.mkdir(parents=True, exist_ok=True)
    sidecar = output.with_suffix(".planted.jsonl") if planted else None
    started = time.perf_counter()
    schema = (
        preference_schema(format_)
        if preference
        else arrow_schema(format_, tools=declares_tools(format_, chosen))
    )
    counts = write(output, stream, schema, rows_per_group, sidecar)
    seconds = time.perf_counter() - started

    click.echo(f"wrote {rows:,} {format_} rows to {output} in {seconds:.1f}s", err=True)
    for code in CODES:
        if counts[code]:
            click.echo(
                f"  {code:<24} {counts[code]:>9,}  ({counts[code] / max(rows, 1):.2%})", err=True
            )
    if sidecar is not None:
        click.echo(f"planted codes per row: {sidecar}", err=True)
    if not preference and UNSUPPORTED.get(format_):
        missing = sorted(UNSUPPORTED[format_])
        click.echo(f"({format_} rows carry no {', '.join(missing)})", err=True)


def write(
    output: Path,
    rows: Iterator[tuple[Row, frozenset[str]]],
    schema: pa.Schema,
    rows_per_group: int,
    sidecar: Path | None,
) -> Counter[str]:
    """Writes `rows` a group at a time (bounded memory); returns how many carry each code."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    counts: Counter[str] = Counter()
    with contextlib.ExitStack() as stack:
        planted = stack.enter_context(open(sidecar, "w")) if sidecar is not None else None
        if output.suffix == ".jsonl":
            lines = stack.enter_context(open(output, "w", encoding="utf-8"))
        else:
            parquet = stack.enter_context(pq.ParquetWriter(output, schema, compression="zstd"))
        while group := list(itertools.islice(rows, rows_per_group)):
            if output.suffix == ".jsonl":
                lines.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row, _ in group)
            else:
                table = pa.Table.from_pylist([row for row, _ in group], schema=schema)
                parquet.write_table(table, row_group_size=rows_per_group)
            for _, codes in group:
                counts.update(codes)
                if planted is not None:
                    planted.write(json.dumps(sorted(codes)) + "\n")
    return counts


if __name__ == "__main__":
    main()
