#!/usr/bin/env python
"""Write the golden inputs and the digests of what cleaning them gives (tests/test_golden.py).

Run once before a change that must leave every output file byte-identical; the test then holds
every later commit to the digests. `--update` rewrites the digests alone (the inputs stay), for a
change that means to alter the output: say why in its commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden"
SHARED = ROOT.parent / "shared" / "data"

FORMATS = ("openai", "sharegpt", "anthropic", "rig")
ROWS = 1500
# The repair chain's other branches: R5 by error results, trailing calls repaired, empty turns
# kept, and every orphan result dropped (R3), even one a later turn may use.
VARIANT = {
    "actions": {"trailing_tool_call": "repair", "empty_assistant_turn": "keep"},
    "repair": {"interrupted_call": "error_result", "orphan_result": "drop"},
}
CONFIGS = ("default", "strict", "variant")
REAL = (
    "openai/toy_chat_fine_tuning.jsonl",
    "openai/functionary_test_case.json",
    "openai/msfoundry_zava_toolsft_valid.jsonl",
    "sharegpt/glaive_toolcall_en_demo.json",
    "sharegpt/fastchat_dummy_conversation.json",
    "sharegpt/axolotl_conversation_missingturns.json",
)


def output_digests(output: Path) -> dict[str, str]:
    """The sha256 of every file a run writes that must not change: the shards and stats.csv."""
    files = sorted([*output.glob("data/*.parquet"), *output.glob("rejects/*.parquet")])
    files.append(output / "stats.csv")
    return {str(f.relative_to(output)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def config_for(name: str) -> object:
    from transcript_clean.policy import config_from_dict, load_config

    return config_from_dict(VARIANT, name="variant") if name == "variant" else load_config(name)


def cases(shared: Path) -> list[tuple[str, Path, str]]:
    """(case name, input path, config name) for every golden case."""
    out = []
    for fmt in FORMATS:
        for config in CONFIGS:
            out.append((f"{fmt}-{config}", GOLDEN / f"{fmt}.parquet", config))
    for rel in REAL:
        for config in ("default", "strict"):
            out.append((f"{rel.replace('/', '-')}-{config}", shared / rel, config))
    return out


def run_case(source: Path, config: str, batch_size: int = 256) -> dict[str, str]:
    """Clean `source` and digest the output. The source is named by its file name alone (run
    from its folder), since the rejects' `_source` and stats.csv record it as given: the
    digests must not depend on where the checkout is."""
    from transcript_clean.run import clean

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(source.parent):
        out = Path(tmp) / "out"
        clean(source.name, out, config=config_for(config), batch_size=batch_size)  # type: ignore[arg-type]
        return output_digests(out)


@click.command()
@click.option("--update", is_flag=True, help="Rewrite the digests only; keep the inputs.")
def main(update: bool) -> None:
    if not update:
        from synthetic import arrow_schema, default_rates, generate_rows

        GOLDEN.mkdir(parents=True, exist_ok=True)
        for fmt in FORMATS:
            # Three times the usual defects: about a third of the rows carry one.
            rates = {code: rate * 3 for code, rate in default_rates(fmt).items()}
            rows = [row for row, _ in generate_rows(ROWS, format=fmt, seed=13, rates=rates)]
            table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
            pq.write_table(table, GOLDEN / f"{fmt}.parquet", compression="zstd")
    expected = {name: run_case(path, config) for name, path, config in cases(SHARED)}
    (GOLDEN / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    click.echo(f"{len(expected)} cases written to {GOLDEN / 'expected.json'}")


if __name__ == "__main__":
    main()
