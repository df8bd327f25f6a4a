"""Token counts with a local tokenizer (`--tokenizer PATH`, a `tokenizer.json`): the optional
`tokens` extra, the `tokenizers` package. Nothing is ever downloaded."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from transcript_clean.errors import ConfigError, option, option_name

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["check_tokenizer", "count_text_tokens", "load_tokenizer", "token_counts"]


@cache
def load_tokenizer(path: str) -> Tokenizer:
    """The tokenizer in the `tokenizer.json` at `path`, loaded once per process."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError(
            f"{option_name('tokenizer')} needs the tokenizers package: "
            "pip install 'transcript-clean[tokens]'"
        ) from None
    if not Path(path).is_file():
        raise ConfigError(f"{option('tokenizer', path)}: no such file (give a tokenizer.json)")
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as err:  # the Rust side raises plain Exceptions for a bad file
        raise ConfigError(f"{option('tokenizer', path)}: not a tokenizer.json ({err})") from None
    try:
        # Text of every kind a row may hold, none of it in a small vocabulary: a tokenizer that
        # cannot encode what it does not know (its unknown token missing from its vocabulary)
        # fails here, before the run, not on the first such row.
        tokenizer.encode_batch([_STRANGER, ""], add_special_tokens=False)
    except Exception as err:  # the Rust side's plain Exception, again
        raise ConfigError(
            f"{option('tokenizer', path)}: it cannot encode text it does not know ({err}); give a "
            "tokenizer whose vocabulary holds its unknown token, or a byte-level one"
        ) from None
    return tokenizer


_STRANGER = "zqxjv Qwpfk 0x7f3a ⟦∮⟧ 𝔷 🦄 ¿ñ? 中文"


def check_tokenizer(path: str) -> None:
    """Fail before a run starts when the tokenizer cannot be loaded."""
    load_tokenizer(path)


def token_counts(path: str, texts: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each text's tokens, without special tokens (a text is a piece of a transcript)."""
    if not texts:
        return np.zeros(0, dtype=np.int64)
    try:
        encoded = load_tokenizer(path).encode_batch(list(texts), add_special_tokens=False)
    except Exception as err:  # what the check at load did not foresee: the Rust side's
        raise ConfigError(
            f"{option('tokenizer', path)}: cannot encode a row's text ({err})"
        ) from None
    return np.array([len(e.ids) for e in encoded], dtype=np.int64)


def count_text_tokens(path: str, texts: Sequence[str]) -> int:
    """The tokens of all `texts`, each counted alone."""
    return int(token_counts(path, texts).sum())
