"""Fixtures shared by the test modules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Test and bench tooling (synthetic.py, make_golden.py) lives in scripts/, outside the installed
# package; the test modules import it from there.
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

# The real datasets live beside the repository, never inside it (see ../shared/data/README.md).
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real conversation data; the test is skipped when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A word-level tokenizer: a token per word or punctuation run, so counts are known."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = ["Hello there", "Weather in Paris", "one two three four five six"]
    tok.train_from_iterator(words, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


@pytest.fixture(scope="session")
def templates(shared_data: Path) -> Path:
    """The folder of real model chat templates; the test is skipped when it is absent."""
    folder = shared_data / "chat_templates"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    return folder
