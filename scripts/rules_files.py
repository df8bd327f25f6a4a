#!/usr/bin/env python
"""Write what the rules registry generates: configs/default.toml, configs/strict.toml and the
README's codes table.

    .venv/bin/python scripts/rules_files.py           # rewrite them
    .venv/bin/python scripts/rules_files.py --check   # exit 1 if any is stale

Run it after adding or changing a rule (a module in transcript_clean/rules/);
tests/test_rules.py and tests/test_docs.py fail while these files are stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from transcript_clean.policy import CONFIG_DIR
from transcript_clean.rules import codes_table, config_toml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CODES_BLOCK = re.compile(r"(<!-- codes:start -->\n)(.*?)(<!-- codes:end -->)", re.DOTALL)


def readme_with_codes(text: str) -> str:
    """The README's text with its codes table as the registry writes it."""
    if not CODES_BLOCK.search(text):
        raise SystemExit(f"{README}: no <!-- codes:start --> ... <!-- codes:end --> block")
    return CODES_BLOCK.sub(lambda m: m[1] + codes_table() + m[3], text, count=1)


def generated() -> dict[Path, str]:
    files = {CONFIG_DIR / f"{name}.toml": config_toml(name) for name in ("default", "strict")}
    files[README] = readme_with_codes(README.read_text(encoding="utf-8"))
    return files


def main(argv: list[str]) -> int:
    stale = [p for p, text in generated().items() if p.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path} is stale: run scripts/rules_files.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated().items():
        if path in stale:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
