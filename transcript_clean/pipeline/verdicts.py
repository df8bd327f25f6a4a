"""What the Arrow fast path settles in a batch (`batch_verdicts`): the rows it cannot read set
aside, the codes it may repair chosen by the config, a conversation format's or a dataset
type's view asked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from transcript_clean.columnar.arrays import whole
from transcript_clean.columnar.edits import replaced
from transcript_clean.fastpath import Verdicts, fast_verdicts
from transcript_clean.formats.base import Format
from transcript_clean.pipeline.stored import (
    holds_json_text,
    line_errors,
    oversized,
    prepared,
    stored_as_json,
)
from transcript_clean.policy import DEFAULT, Config, for_format
from transcript_clean.rules import TRAILING_TOOL_CALL, UNANSWERED_TOOL_CALL, Rule, rules
from transcript_clean.shapes import ShapedFormat
from transcript_clean.sources import RAW_LINE
from transcript_clean.utf8 import invalid_text


def batch_verdicts(
    batch: pa.RecordBatch | pa.Table,
    config: Config = DEFAULT,
    *,
    format: Format | str = "auto",
    codes: bool = True,
    exact_lines: bool = True,
    reencode: bool = False,
) -> Verdicts | None:
    """What the Arrow fast path settles in `batch`: the first step of `clean_batch`, which can
    run ahead of it (on the thread that reads the batches, say) and be handed to it as
    `verdicts`. None when the fast path settles nothing here (the format has none, or the
    column holds JSON text).

    Rows the fast path settles never become Python objects: clean ones are kept as they are,
    and, where the config keeps or repairs them, rows whose only code is calls pending at the
    end or one the format's Arrow side repairs. `codes=False` settles the clean rows
    alone: `clean_batch`'s `on_row` must see every row with a code. `exact_lines=False` says
    a JSON Lines row's line (`_raw_line`) is not written (Parquet output drops it), so the
    Arrow side may repair those rows too. `reencode=True` lets it repair them where the lines
    are written as well, and marks the verdicts `stale_lines`: `clean_batch_parts` then writes
    just those rows' lines anew (`relined`: each line edited as the repair says, else
    re-encoded by the per-row path), while the Arrow side settles their stats and the rows it
    rejects (a reject's line is the row as it came in). The per-row path's rows cost far more
    than the Arrow side's, and about a third of those a repair would send it turn out
    rejected.
    """
    table, fmt = prepared(batch, format)
    config = for_format(config, fmt)
    enabled = [rule for rule in rules() if rule.enabled(config)]
    # Rows with text that is not UTF-8, and lines that are not rows: unread here, rejected by
    # the per-row path.
    unread = sorted(
        set(invalid_text(table))
        | set(line_errors(table))
        | set(oversized(table, config.max_row_bytes))
    )
    # A repaired JSON Lines row written as JSON Lines is its line re-encoded, which an Arrow
    # repair would leave stale: it takes the per-row path, or with `reencode` has its line
    # re-encoded by it once the Arrow side has settled it.
    lines = exact_lines and RAW_LINE in table.schema.names
    in_arrow = not lines or reencode
    repair = [
        r.code for r in enabled if codes and in_arrow and repairs_in_arrow(config, r.code, fmt)
    ]
    verdicts = _verdicts(table, fmt, config, enabled, unread, repair, codes)
    if verdicts is not None and lines and verdicts.repaired.any():
        verdicts.stale_lines = True
    return verdicts


def _verdicts(
    table: pa.Table,
    fmt: Format,
    config: Config,
    enabled: list[Rule],
    unread: list[int],
    repair: list[str],
    codes: bool,
) -> Verdicts | None:
    """`batch_verdicts` once it knows which codes the Arrow side may repair."""
    if isinstance(fmt, ShapedFormat):
        return _shaped_verdicts(table, fmt, config, unread, repair)
    if stored_as_json(table.schema, fmt):
        return None
    column = whole(table.column(fmt.column))
    if unread:
        at = np.array(unread, dtype=np.int64)
        column = replaced(column, at, pa.nulls(len(at), column.type))
    return fast_verdicts(
        fmt,
        column,
        keep_trailing=codes and config.action(TRAILING_TOOL_CALL) == "keep",
        repair=repair,
        reject=[r.code for r in enabled if codes and config.action(r.code) == "reject"],
        schema=table.schema,
        enabled=enabled,
        tools=declaring_columns(table, fmt),
        side=fmt.side(table),
        config=config,
    )


def _shaped_verdicts(
    table: pa.Table,
    fmt: ShapedFormat,
    config: Config,
    unread: list[int],
    repair: list[str],
) -> Verdicts | None:
    """`batch_verdicts` for a dataset type: the rows clean for every candidate, and those
    whose parts are repaired in Arrow (`shapes.arrow`), for the codes of `repair`."""
    from transcript_clean.shapes.arrow import shape_declarations, shaped_verdicts

    if any(holds_json_text(table.schema, c) for c in fmt.shape.columns):
        return None
    tools = declaring_columns(table, fmt.inner)
    if fmt.shape.prompt is not None and "." in fmt.shape.prompt:  # OpenAI's `input.tools`
        nested = shape_declarations(table, fmt.shape.prompt)
        if nested is None:
            return None  # declarations the fast path cannot read: every row goes per-row
        tools += nested
    return shaped_verdicts(table, fmt, config, unread, repair, tools)


def declaring_columns(table: pa.Table, fmt: Format) -> list[pa.Array]:
    """The batch's columns of declared tools that the format reads, each in one chunk."""
    names = [n for n in fmt.declaring_columns if n in table.schema.names]
    return [whole(table.column(n)) for n in names]


def repairs_in_arrow(config: Config, code: str, fmt: Format | None = None) -> bool:
    """Whether the config repairs `code` as the fast path can: an unanswered call by a cut,
    or by an error result in a format that writes new results (`fmt.result_holders`)."""
    if config.action(code) != "repair":
        return False
    if code != UNANSWERED_TOOL_CALL or config.interrupted_call == "cut":
        return True
    return config.interrupted_call == "error_result" and fmt is not None and fmt.writes_results
