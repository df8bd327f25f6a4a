"""Conversations held as plain strings: Anthropic's hh-rlhf transcripts (`\\n\\nHuman: ...
\\n\\nAssistant: ...` in one text), Alpaca rows (`instruction` / `input` / `output`, LLaMA-Factory
and ms-swift), Dolly rows (`instruction` / `context` / `response`), ms-swift's `query` /
`response` rows, TRL's `prompt` / `completion` strings and Guanaco's transcripts (`### Human:
...### Assistant: ...` in one text)."""

from transcript_clean.formats.text.codec import (
    AlpacaFormat,
    CompletionFormat,
    DollyFormat,
    GuanacoFormat,
    HHFormat,
    PairsFormat,
    QueryResponseFormat,
)
from transcript_clean.formats.text.hh import parse_hh, render_hh

__all__ = [
    "AlpacaFormat",
    "CompletionFormat",
    "DollyFormat",
    "GuanacoFormat",
    "HHFormat",
    "PairsFormat",
    "QueryResponseFormat",
    "parse_hh",
    "render_hh",
]
