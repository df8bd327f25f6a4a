#!/usr/bin/env python
"""Write configs/default.toml and configs/strict.toml from the rules registry.

Run after adding or changing a rule; tests/test_rules.py fails while they are out of date.
"""

from __future__ import annotations

from transcript_clean.policy import CONFIG_DIR
from transcript_clean.rules import config_toml

if __name__ == "__main__":
    for name in ("default", "strict"):
        path = CONFIG_DIR / f"{name}.toml"
        path.write_text(config_toml(name), encoding="utf-8")
        print(f"wrote {path}")
