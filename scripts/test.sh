#!/usr/bin/env bash
# The one command that checks everything: ruff, mypy --strict (the package and scripts/) and
# pytest, in the project's .venv.
# The [s3] extra always: the tests run SOURCE and OUTPUT on a local S3 server (tests/test_s3.py).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c scripts/test-constraints.txt -e ".[dev,s3${TEST_EXTRAS:+,$TEST_EXTRAS}]"

echo "== ruff check";          .venv/bin/ruff check .
echo "== ruff format --check"; .venv/bin/ruff format --check .
echo "== mypy --strict";       .venv/bin/mypy --strict transcript_clean scripts
# On every core (pytest-xdist); `scripts/test.sh -n 0 ...` runs in one process.
echo "== pytest";              .venv/bin/pytest -n auto "$@"
