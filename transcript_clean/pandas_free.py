"""Keeping pandas out of a process that never uses it.

pyarrow imports pandas the first time it converts Python objects or NumPy arrays to Arrow, or
Arrow data to NumPy: it asks whether they are pandas objects, and sets up its pandas
conversions. That costs imports and memory, a sizeable share of a short run (docs/performance.md
has the numbers). A run that reads Parquet or JSON files itself never hands pyarrow a pandas
object.

pyarrow looks for pandas once and keeps the answer, in its Python layer and in its C++ one. So
one conversion made while importing pandas fails settles it: pyarrow then goes on as when pandas
is not installed, which it supports and tests. Nothing stays hidden: code that imports pandas
later gets it. But pyarrow keeps its answer for the rest of the process, and would take a pandas
object handed to it later for a plain sequence. So only processes the cleaner owns do this, and
only for sources read without `datasets`: the command's, and its workers'.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["keep_pandas_out"]


def keep_pandas_out() -> bool:
    """Settle pyarrow on running without pandas, unless pandas is imported already.

    Returns whether pandas is still out. Call it before the process's first conversion; after
    one, pandas is in and this does nothing."""
    if "pandas" in sys.modules:
        return False
    import pyarrow as pa

    refusal = _Refusal()
    sys.meta_path.insert(0, refusal)
    try:
        pa.array([0])  # looks for pandas in both layers: the Python one, and type inference's
    finally:
        sys.meta_path.remove(refusal)
    return "pandas" not in sys.modules


class _Refusal(importlib.abc.MetaPathFinder):
    """An import finder that fails every import of pandas."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname == "pandas":
            raise ModuleNotFoundError("left out by transcript_clean", name=fullname)
        return None
