#!/usr/bin/env bash
# Set up (with the test extras) and run every test, notebooks included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# Notebooks at their parameters cells' defaults: the bundled model on small samples (CI size).
.venv/bin/python -m pytest -q tests --nbmake notebooks --nbmake-timeout=900 --durations=10 "$@"
