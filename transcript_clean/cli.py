"""The `transcript-clean` command: thin click wrappers over the library."""

from __future__ import annotations

import click

from transcript_clean import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="transcript-clean")
def main() -> None:
    """Clean chat and tool-calling conversation datasets.

    Reads Hugging Face or Parquet conversation datasets, drops empty assistant turns, validates
    every row as a canonical transcript, repairs what a live agent loop would have recorded, and
    writes cleaned Parquet shards, a rejects shard and an error-stats table.
    """
