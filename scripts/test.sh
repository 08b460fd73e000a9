#!/usr/bin/env bash
# Set up (with the test extras) and run every test, notebooks included, on all cores in file order.
# Extra arguments go to pytest: e.g. `-p randomly` for a random order (tests/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check .  # the linter first: a second of work, its rules in pyproject.toml
# Notebooks at their parameters cells' defaults: the bundled model on small samples (CI size).
.venv/bin/python -m pytest -q -p no:randomly tests --nbmake notebooks --nbmake-timeout=900 --durations=10 "$@"
