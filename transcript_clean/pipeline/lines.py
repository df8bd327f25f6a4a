"""JSON Lines rows the fast path repaired while their lines are written: each line written
anew (`relined`), edited as the repair says where the view tells how, else re-encoded by the
per-row path."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, flattened, rows_with
from transcript_clean.fastpath import Verdicts
from transcript_clean.fastpath.base import FastRepair, Origins
from transcript_clean.formats.base import Format, put
from transcript_clean.pipeline.stored import as_stored, clean_stored_row, row_values
from transcript_clean.pipeline.verdicts import repairs_in_arrow
from transcript_clean.policy import Config, for_format
from transcript_clean.sources import RAW_LINE, jsontypes


def relined(
    table: pa.Table, fmt: Format, config: Config, as_json: bool, verdicts: Verdicts
) -> tuple[Verdicts, list[str], list[int]]:
    """The lines of the rows `verdicts` repaired (`stale_lines`): the verdicts without the rows
    the per-row path takes back, the others' lines in order, and the rows taken back.

    The Arrow side settles these rows' stats, profile and typed values as for Parquet output;
    only their lines are written here, byte for byte what the per-row path alone would write.
    Where the view says where each repaired message came from (`repaired_origins`), a line is
    its line with the repair's edits made (`_edited`): no row becomes Python objects. The
    others are re-encoded by the per-row path, as `fit_repaired` writes them (its typed row
    is not built: the Arrow side's repaired values fit the schema by construction); a row it
    does not repair as the Arrow side did goes back to it whole (none, unless the two
    disagree)."""
    config = for_format(config, fmt)  # as the verdicts read it: `auto` settled for `fmt`
    positions = np.flatnonzero(verdicts.repaired)
    fixes = [(f.code, f.action, f.rows[positions]) for f in verdicts.repairs]
    lines: list[str | None] = [None] * len(positions)
    origins = verdicts.repaired_origins
    if (origins is not None or fmt.edits_line_value) and verdicts.repaired_column is not None:
        # Edited only where this config repairs the row's codes as the verdicts did (verdicts
        # worked out for another config are the per-row path's to check).
        fits = np.ones(len(positions), dtype=bool)
        for code, _, mask in fixes:
            if not repairs_in_arrow(config, code):
                fits &= ~mask
        raws = table.column(RAW_LINE).take(pa.array(positions)).to_pylist()
        if origins is None:  # the conversation column's value set, the rest as it came
            lines = _valued(raws, fits, verdicts.repaired_column, fmt.column)
        else:
            lines = _edited(raws, fits, origins, verdicts.repaired_column, fmt.column)
    slow = [k for k, line in enumerate(lines) if line is None]
    agree = np.ones(len(positions), dtype=bool)
    if slow:
        unreadable: dict[int, str] = {}
        rows = row_values(table.take(pa.array(positions[slow])), set(), unreadable)
        for j, (k, row) in enumerate(zip(slow, rows, strict=True)):
            result = (
                None if j in unreadable else clean_stored_row(row, fmt, config, as_json=as_json)
            )
            arrow = {code: action for code, action, mask in fixes if mask[k]}
            if result is None or result.status != "repaired" or result.actions != arrow:
                agree[k] = False
                continue
            assert result.row is not None
            lines[k] = jsontypes.dumps(as_stored(result.row, fmt.column if as_json else None))
    written = [line for line in lines if line is not None]
    if agree.all():
        return verdicts, written, []
    demoted = positions[~agree]
    return _without(verdicts, demoted), written, demoted.tolist()


def _edited(
    raws: list[str], fits: Mask, origins: Origins, column: pa.Array, name: str
) -> list[str | None]:
    """Each repaired row's line with the Arrow side's edits made: its messages (`name`) those
    the repair kept, in order, each as it came in but for the text of those it rewrote (R4's
    merge), set as the per-row path's encoder sets it (`put`). Exactly what the per-row path
    writes, whose encoder writes an untouched message as it came (`formats/openai/codec.py`):
    where that is not sure the row is left to it (None): a message made anew (R2's answer),
    content that is a list of parts (a media part's keys are written in the encoder's order),
    a config whose repairs are not the verdicts' (`fits`)."""
    flat, sizes, parent = flattened(origins.messages)
    at = pc.struct_field(flat, "at").to_numpy(zero_copy_only=False).astype(np.int64)
    rewritten = pc.struct_field(flat, "rewritten").to_numpy(zero_copy_only=False)
    bounds = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    changed = np.flatnonzero(rewritten & (at >= 0))
    texts = pc.struct_field(column.flatten(), origins.text).take(pa.array(changed)).to_pylist()
    new_text = dict(zip(changed.tolist(), texts, strict=True))
    fits = fits & ~rows_with(at < 0, parent, len(raws))
    return [
        _edited_line(
            raw,
            name,
            at[bounds[k] : bounds[k + 1]].tolist(),
            int(bounds[k]),
            new_text,
            origins.text,
        )
        if fits[k]
        else None
        for k, raw in enumerate(raws)
    ]


def _valued(raws: list[str], fits: Mask, column: pa.Array, name: str) -> list[str | None]:
    """Each repaired row's line with its `name` set to the repaired value, in its place: what
    the per-row path writes where its encoder sets that text alone (`Format.edits_line_value`).
    None where the line does not hold a text there, or `fits` says the row is not the Arrow
    side's."""
    out: list[str | None] = []
    for raw, ok, value in zip(raws, fits.tolist(), column.to_pylist(), strict=True):
        row = jsontypes.loads(raw) if ok else None
        if type(row) is not dict or type(row.get(name)) is not str:
            out.append(None)
            continue
        row[name] = value
        out.append(jsontypes.dumps(row))
    return out


def _edited_line(
    raw: str, name: str, sources: list[int], first: int, new_text: dict[int, str], text: str
) -> str | None:
    """One line of `_edited`: its messages (`name`) those at `sources` (positions in the row as
    it came in), the `text` of the one at `first + j` set to `new_text`'s where it has one.
    None where the line does not read as the Arrow side read it (no list of objects there, a
    position past its end), or a message's text is a list of parts."""
    row = jsontypes.loads(raw)
    items = row.get(name) if type(row) is dict else None
    if type(items) is not list:
        return None
    messages = []
    for j, source in enumerate(sources, first):
        item = items[source] if source < len(items) else None
        if type(item) is not dict or type(item.get(text)) is list:
            return None
        if j in new_text:
            item = dict(item)
            put(item, text, new_text[j])
        messages.append(item)
    row[name] = messages
    return jsontypes.dumps(row)


def _without(verdicts: Verdicts, rows: npt.NDArray[np.int64]) -> Verdicts:
    """`verdicts` with the repaired `rows` left to the per-row path."""
    repaired = verdicts.repaired.copy()
    repaired[rows] = False
    column = verdicts.repaired_column
    if column is not None:
        column = column.filter(pa.array(repaired[verdicts.repaired]))
    repairs = []
    for fix in verdicts.repairs:
        fixed = fix.rows & repaired
        if fixed.any():
            repairs.append(FastRepair(fix.code, fix.action, fixed, fix.occurrences))
    origins = verdicts.repaired_origins
    if origins is not None:
        origins = origins.filter(repaired[verdicts.repaired])
    return dataclasses.replace(
        verdicts,
        repaired=repaired,
        repairs=repairs,
        repaired_column=column,
        repaired_origins=origins,
    )
