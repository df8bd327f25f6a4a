#!/usr/bin/env python3
"""jsonschema against fastjsonschema on the bench's tools: which validates calls faster.

Validates the arguments of every call in generated rows (`synthetic.generate_rows`, the tools
mode's rates) against its declared tool's schema, once with each library, validators compiled
once per schema, in one run, and prints the time per call and the ratio:

    .venv/bin/python scripts/bench_schemas.py --rows 20000
"""

from __future__ import annotations

import json
import time
from typing import Any

import click
import fastjsonschema
from jsonschema import Draft7Validator
from synthetic import TOOLS_RATES, generate_rows


def _fast(validate: Any, arguments: Any) -> bool:
    try:
        validate(arguments)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


@click.command()
@click.option("--rows", type=int, default=20_000, show_default=True)
@click.option("--repeat", type=int, default=3, show_default=True)
def main(rows: int, repeat: int) -> None:
    pairs: list[tuple[str, Any]] = []
    for row, _ in generate_rows(rows, format="openai", seed=0, rates=TOOLS_RATES):
        schemas = {
            t["function"]["name"]: json.dumps(t["function"]["parameters"])
            for t in json.loads(row["tools"])
        }
        for message in row["messages"]:
            for call in message.get("tool_calls") or []:
                name = call["function"]["name"]
                if name in schemas:
                    pairs.append((schemas[name], json.loads(call["function"]["arguments"])))
    slow = {s: Draft7Validator(json.loads(s)) for s, _ in pairs}
    fast = {s: fastjsonschema.compile(json.loads(s)) for s, _ in pairs}
    best = {"jsonschema": float("inf"), "fastjsonschema": float("inf")}
    for _ in range(repeat):
        start = time.perf_counter()
        a = [slow[s].is_valid(v) for s, v in pairs]
        best["jsonschema"] = min(best["jsonschema"], time.perf_counter() - start)
        start = time.perf_counter()
        b = [_fast(fast[s], v) for s, v in pairs]
        best["fastjsonschema"] = min(best["fastjsonschema"], time.perf_counter() - start)
        assert a == b, "the two disagree"
    click.echo(f"{len(pairs):,} calls, {sum(not x for x in a):,} invalid, best of {repeat}")
    for name, seconds in best.items():
        click.echo(f"{name:<15} {seconds:8.3f} s  {seconds / len(pairs) * 1e6:7.2f} us/call")
    click.echo(f"fastjsonschema is {best['jsonschema'] / best['fastjsonschema']:.1f}x faster")


if __name__ == "__main__":
    main()
