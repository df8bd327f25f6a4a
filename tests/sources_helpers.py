"""What the `tests/test_sources*.py` modules share: writing inputs, reading every row of a source,
and keeping `datasets` off the network."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# No test may wait on the network: the Hub is unreachable. Set before `datasets` is imported
# (it reads these once), and patched again by `go_offline` in case another module imported it first.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transcript_clean.sources import DEFAULT_BATCH_SIZE, Part, Source

JSON_ROWS = [
    {"id": 0, "messages": [{"role": "user", "content": "hi"}]},
    {"id": 1, "messages": [{"role": "user", "content": "hello"}], "extra": True},
]


def go_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline, with a fresh cache: nothing reaches the network or the user's cache."""
    import datasets
    import huggingface_hub
    import huggingface_hub.constants  # a lazy submodule: imported here whatever ran before

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def rows(source: Source, part: Part | None = None, **kw: Any) -> list[dict[str, Any]]:
    """Every row `read` gives for `part` (default: each part in turn), checking each batch."""
    out = []
    for each in [part] if part else source.parts():
        for batch in source.read(each, **kw):
            assert batch.schema.equals(source.schema, check_metadata=True)
            assert 0 < batch.num_rows <= kw.get("batch_size", DEFAULT_BATCH_SIZE)
            out.extend(batch.to_pylist())
    return out


def ids(source: Source, **kw: Any) -> list[int]:
    return [row["id"] for row in rows(source, **kw)]


def conversations(first: int, count: int) -> pa.Table:
    numbers = list(range(first, first + count))
    return pa.table(
        {
            "id": numbers,
            "messages": [[{"role": "user", "content": f"question {i}"}] for i in numbers],
        }
    )


def write_parquet(path: Path, table: pa.Table, row_group_size: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path
