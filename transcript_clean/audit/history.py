"""Earlier nights (`audit --history DIR`): their summary.json files, for the report's charts.

DIR holds summary.json files of earlier clean or audit runs, by any name (`2026-11-30.json`),
or folders holding one each (`stats/2026-11-30/summary.json`, as `--stats-out` writes them, or
an OUTPUT); DIR itself may be such a folder. The nights are ordered by when they were audited
(else by name), and each gives its headline figures: the error rate, the rows, and the
profile's (`audit.profile_drift.headline_figures`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transcript_clean.audit.baseline import DAMAGED, BaselineError
from transcript_clean.audit.profile_drift import headline_figures

__all__ = ["Night", "figures_of", "load_history"]


@dataclass(slots=True, frozen=True)
class Night:
    """One earlier run: a label (when it was audited, or its file's name) and its figures."""

    label: str
    figures: dict[str, float]


def figures_of(summary: dict[str, Any]) -> dict[str, float]:
    """A summary's headline figures, by name: `error_rate`, `rows_in` and the profile's."""
    out: dict[str, float] = {}
    if isinstance(summary.get("rows_in"), int):
        out["rows_in"] = float(summary["rows_in"])
    rate = summary.get("error_rate")
    if isinstance(rate, int | float):
        out["error_rate"] = float(rate)
    elif isinstance(summary.get("rows_in"), int) and summary["rows_in"]:
        clean = summary.get("counts", {}).get("rows_clean")
        if isinstance(clean, int):
            out["error_rate"] = 1 - clean / summary["rows_in"]
    if isinstance(summary.get("profile"), dict):
        out.update(
            {name: value for name, (value, _) in headline_figures(summary["profile"]).items()}
        )
    return out


def _set_aside(summary: Path) -> bool:
    """Whether `summary` is in `NAME.old/`, an OUTPUT that `--overwrite` set aside for the
    `NAME/` beside it: the same night run again, not one more night."""
    folder = summary.parent
    return (
        folder.name.endswith(".old")
        and (folder.with_name(folder.name.removesuffix(".old")) / "summary.json").is_file()
    )


def load_history(folder: str | os.PathLike[str]) -> list[Night]:
    """The nights in `folder`, oldest first. Raises `BaselineError` for a folder that is not
    there or holds none; a file that is not a summary is skipped."""
    root = Path(folder)
    if not root.is_dir():
        raise BaselineError(f"history {folder}: no such folder")
    candidates = [root / "summary.json", *sorted(root.glob("*.json"))]
    candidates += sorted(path for path in root.glob("*/summary.json") if not _set_aside(path))
    nights: list[tuple[str, str, Night]] = []
    seen: set[Path] = set()
    for path in candidates:
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("stats"), list):
            continue
        name = path.parent.name if path.name == "summary.json" else path.stem
        when = data.get("audited_at")
        label = when[:10] if isinstance(when, str) else name
        try:
            figures = figures_of(data)
        except DAMAGED as err:  # a summary, by its stats, with parts not of their kinds
            raise BaselineError(
                f"history {path}: a damaged summary.json, not as a run writes it ({err!r})"
            ) from None
        nights.append((when if isinstance(when, str) else "", name, Night(label, figures)))
    if not nights:
        raise BaselineError(f"history {folder}: no summary.json files in it")
    return [night for _, _, night in sorted(nights, key=lambda n: (n[0], n[1]))]
