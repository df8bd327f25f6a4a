#!/usr/bin/env bash
# The README's first command: set up .venv, generate a sample dataset with planted defects,
# clean it, and print the error-stats table.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .

mkdir -p demo-output
echo "== generating 20,000 OpenAI-format rows (about 10% with planted defects)"
.venv/bin/python scripts/make_synthetic.py demo-output/sample.parquet --rows 20000 --format openai --seed 7

echo "== transcript-clean clean demo-output/sample.parquet demo-output/clean"
.venv/bin/transcript-clean clean demo-output/sample.parquet demo-output/clean --overwrite --rows-per-shard 10000

echo
echo "== the output"
ls -R demo-output/clean | sed 's/^/  /'
echo
echo "== one repaired row, explained: transcript-clean explain demo-output/sample.parquet --row N"
row=$(.venv/bin/python - <<'PY'
import pyarrow.parquet as pq
stats = pq.read_table("demo-output/clean/stats.parquet").to_pylist()
repaired = [r for r in stats if r["action"] == "repaired"]
print(repaired[0]["example_row"] if repaired else 0)
PY
)
.venv/bin/transcript-clean explain demo-output/sample.parquet --row "$row"
