#!/usr/bin/env python
"""Write the golden inputs and the digests of what cleaning them gives (tests/test_golden.py).

Run once before a change that must leave every output file byte-identical; the test then holds
every later commit to the digests. `--update` rewrites the digests alone (the inputs stay), for a
change that means to alter the output: say why in its commit.

What is held: the data and rejects shards, stats.csv, profile.json, the dataset card and
summary.json (without what varies from run to run: its timings and the versions), for each
format and config, for JSON Lines output, for generated preference rows and for the real files.
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
PREFERENCE = ("openai", "sharegpt")  # generated preference (openai) and ranking (sharegpt) rows
REAL = (
    "openai/toy_chat_fine_tuning.jsonl",
    "openai/functionary_test_case.json",
    "openai/msfoundry_zava_toolsft_valid.jsonl",
    "sharegpt/glaive_toolcall_en_demo.json",
    "sharegpt/fastchat_dummy_conversation.json",
    "sharegpt/axolotl_conversation_missingturns.json",
    "preference/llamafactory_dpo_en_demo.json",
    "preference/llamafactory_kto_en_demo.json",
)
# summary.json's fields that differ between two runs of the same input
VARYING = ("seconds", "rows_per_second", "versions")


def output_digests(output: Path) -> dict[str, str]:
    """The sha256 of every file a run writes that must not change: the shards, stats.csv,
    profile.json, the card (its version named as such) and summary.json less `VARYING`."""
    from transcript_clean import __version__

    shards = [output.glob(f"{folder}/*.{ext}") for folder in ("data", "rejects")
              for ext in ("parquet", "jsonl", "jsonl.gz", "jsonl.zst")]  # fmt: skip
    files = sorted(f for found in shards for f in found)
    files += [output / "stats.csv", output / "profile.json"]
    digests = {str(f.relative_to(output)): _sha256(f.read_bytes()) for f in files}
    card = (output / "README.md").read_text().replace(__version__, "VERSION")
    digests["README.md"] = _sha256(card.encode())
    summary = json.loads((output / "summary.json").read_text())
    for key in VARYING:
        summary.pop(key)
    digests["summary.json"] = _sha256(json.dumps(summary, sort_keys=True).encode())
    return digests


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_for(name: str) -> object:
    from transcript_clean.policy import config_from_dict, load_config

    return config_from_dict(VARIANT, name="variant") if name == "variant" else load_config(name)


def cases(shared: Path) -> list[tuple[str, Path, str, str]]:
    """(case name, input path, config name, output format) for every golden case."""
    out = []
    for fmt in FORMATS:
        for config in CONFIGS:
            out.append((f"{fmt}-{config}", GOLDEN / f"{fmt}.parquet", config, "parquet"))
        out.append((f"{fmt}-default-jsonl", GOLDEN / f"{fmt}.parquet", "default", "jsonl"))
    for fmt in PREFERENCE:
        source = GOLDEN / f"preference-{fmt}.parquet"
        for config in ("default", "strict"):
            out.append((f"preference-{fmt}-{config}", source, config, "parquet"))
    for rel in REAL:
        for config in ("default", "strict"):
            out.append((f"{rel.replace('/', '-')}-{config}", shared / rel, config, "parquet"))
        if rel.endswith(".jsonl"):  # a JSON Lines source written as JSON Lines: lines kept
            out.append((f"{rel.replace('/', '-')}-default-jsonl", shared / rel, "default", "jsonl"))
    return out


def run_case(
    source: Path, config: str, output_format: str = "parquet", batch_size: int = 256
) -> dict[str, str]:
    """Clean `source` and digest the output. The source is named by its file name alone (run
    from its folder), since the rejects' `_source` and stats.csv record it as given: the
    digests must not depend on where the checkout is."""
    from transcript_clean.run import clean

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(source.parent):
        out = Path(tmp) / "out"
        clean(
            source.name,
            out,
            config=config_for(config),  # type: ignore[arg-type]
            output_format=output_format,
            batch_size=batch_size,
        )
        return output_digests(out)


@click.command()
@click.option("--update", is_flag=True, help="Rewrite the digests only; keep the inputs.")
def main(update: bool) -> None:
    from synthetic import generate_preference_rows, preference_schema

    if not update:
        from synthetic import arrow_schema, default_rates, generate_rows

        GOLDEN.mkdir(parents=True, exist_ok=True)
        for fmt in FORMATS:
            # Three times the usual defects: about a third of the rows carry one.
            rates = {code: rate * 3 for code, rate in default_rates(fmt).items()}
            rows = [row for row, _ in generate_rows(ROWS, format=fmt, seed=13, rates=rates)]
            table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
            pq.write_table(table, GOLDEN / f"{fmt}.parquet", compression="zstd")
    for fmt in PREFERENCE:  # added after the first inputs: written when missing
        path = GOLDEN / f"preference-{fmt}.parquet"
        if not update or not path.exists():
            rows = [row for row, _ in generate_preference_rows(ROWS // 3, fmt, seed=13)]
            table = pa.Table.from_pylist(rows, schema=preference_schema(fmt))
            pq.write_table(table, path, compression="zstd")
    expected = {name: run_case(path, config, out) for name, path, config, out in cases(SHARED)}
    (GOLDEN / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    click.echo(f"{len(expected)} cases written to {GOLDEN / 'expected.json'}")


if __name__ == "__main__":
    main()
