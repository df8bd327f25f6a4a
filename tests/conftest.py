"""Fixtures shared by the test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

# The real datasets live beside the repository, never inside it (see ../shared/data/README.md).
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real conversation data; the test is skipped when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
