"""Samples: the first rows of each code, in input order, with what the cleaner did to them.

Each block keeps its own first rows of each code (`SampleCollector`); merged in block order
(`merge_samples`), they are the input's first rows, whichever worker or Ray task did each block.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from transcript_clean.audit.measure import by_code
from transcript_clean.fastpath import Verdicts
from transcript_clean.formats.base import Format, Row
from transcript_clean.model import Message
from transcript_clean.policy import Config
from transcript_clean.rows import RepairStep, RowResult, clean_row
from transcript_clean.rules import TRAILING_TOOL_CALL, UNANSWERED_TOOL_CALL

__all__ = ["Sample", "SampleCollector", "merge_samples"]


@dataclass(slots=True, frozen=True)
class Sample:
    """One row showing a code: where it is, what is wrong, and what the cleaner did about it."""

    code: str
    action: str
    source: str
    row: int
    violations: tuple[str, ...]
    """This code's violations in the row, in words."""
    outcome: str
    """unchanged, repaired or rejected: the row's fate."""
    reject_message: str | None
    steps: tuple[RepairStep, ...]
    """The repairs of this code: before and after."""
    transcript: tuple[Message, ...]
    """The decoded transcript (empty when the row could not be decoded)."""


class SampleCollector:
    """Keeps the first `n` rows of each code, in input order: the per-row path's, as
    `clean_batch`'s `on_row`, and the fast path's (`settled`), batch by batch."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[tuple[str, int], Row] = {}
        self.picked: dict[str, list[tuple[tuple[int, int], str, int, RowResult | None]]] = {}
        """Per code, the rows chosen so far, by (batch, row number), in that order."""
        self.source = ""
        self.batch = 0
        """The batch being looked at, counted from 0 in input order."""

    def __call__(self, number: int, row: Row, result: RowResult) -> None:
        for code in result.actions:
            if self._wants(code, number):
                self._add(code, number, row, result)

    def settled(self, table: pa.Table, verdicts: Verdicts, first_row: int) -> None:
        """Offer the rows of `table` (which starts at row `first_row`) the fast path settled."""
        for code, rows in verdicts.coded():
            for i in np.flatnonzero(rows)[: self.n].tolist():
                if self._wants(code, first_row + i):
                    self._add(code, first_row + i, table.slice(i, 1).to_pylist()[0], None)

    def _wants(self, code: str, number: int) -> bool:
        chosen = self.picked.get(code, [])
        return len(chosen) < self.n or (self.batch, number) < chosen[-1][0]

    def _add(self, code: str, number: int, row: Row, result: RowResult | None) -> None:
        chosen = self.picked.setdefault(code, [])
        bisect.insort(chosen, ((self.batch, number), self.source, number, result))
        self.rows[(self.source, number)] = row
        del chosen[self.n :]

    def samples(self, fmt: Format, config: Config) -> dict[str, list[Sample]]:
        traced: dict[tuple[str, int], RowResult] = {}
        out: dict[str, list[Sample]] = {}
        for code, chosen in by_code(self.picked):
            out[code] = []
            for _, source, number, result in chosen:
                key = (source, number)
                if key not in traced:
                    traced[key] = _traced(self.rows[key], fmt, config, result)
                out[code].append(_sample(code, source, number, traced[key]))
        return out


def merge_samples(blocks: Iterable[dict[str, list[Sample]]], n: int) -> dict[str, list[Sample]]:
    """The first `n` samples of each code from blocks' samples given in input order."""
    merged: dict[str, list[Sample]] = {}
    for samples in blocks:
        for code, chosen in samples.items():
            kept = merged.get(code, [])
            if chosen and len(kept) < n:
                merged[code] = kept + chosen[: n - len(kept)]
    return dict(by_code(merged))


def _traced(row: Row, fmt: Format, config: Config, result: RowResult | None) -> RowResult:
    """The row cleaned again with `trace`, for the repairs' before and after. A conversation
    column of JSON text is parsed first, as `clean_batch` does; if it does not parse, the row was
    rejected for it and `result` (the per-row path's: the fast path leaves JSON text alone)
    already says all there is."""
    value = row.get(fmt.column)
    if isinstance(value, str):
        try:
            row = {**row, fmt.column: json.loads(value)}
        except (json.JSONDecodeError, RecursionError):
            assert result is not None
            return result
    return clean_row(row, fmt, config, trace=True)


def _sample(code: str, source: str, number: int, result: RowResult) -> Sample:
    action = result.actions.get(code, "")
    steps = [s for s in result.steps if s.code == code]
    if not steps and code == TRAILING_TOOL_CALL:  # repaired along with unanswered calls
        steps = [s for s in result.steps if s.code == UNANSWERED_TOOL_CALL]
    if not steps and action in ("repaired", "dropped"):  # uncovered by another repair
        steps = list(result.steps)
    return Sample(
        code=code,
        action=action,
        source=source,
        row=number,
        violations=tuple(v.message for v in result.violations if v.code == code),
        outcome=result.status,
        reject_message=result.reject_message,
        steps=tuple(steps),
        transcript=tuple(result.decoded.messages) if result.decoded is not None else (),
    )
