"""Every output file byte-identical to the one the code made before a refactor, for each format.

The inputs and digests in tests/data/golden were written by `scripts/make_golden.py` on the code
as it stood; a change that means to alter the output rewrites the digests (`--update`) and says
why in its commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import make_golden
import pytest

EXPECTED = json.loads((make_golden.GOLDEN / "expected.json").read_text())
CASES = make_golden.cases(make_golden.SHARED)


@pytest.mark.parametrize(("name", "source", "config", "output"), CASES, ids=[c[0] for c in CASES])
def test_output_files_are_byte_identical(name: str, source: Path, config: str, output: str) -> None:
    if not source.exists():
        pytest.skip(f"{source} not found")
    assert make_golden.run_case(source, config, output) == EXPECTED[name]


def test_every_case_has_digests() -> None:
    assert sorted(EXPECTED) == sorted(c[0] for c in CASES)
