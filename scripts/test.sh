#!/usr/bin/env bash
# Set up (with the test extras) and run every test, notebooks included, on all cores (a worker each), in file order.
# Extra arguments go to pytest: e.g. `-p randomly` for a random order (tests/README.md).
# --quick [FILE...]: the quick tier instead (the tests marked quick, QUICK in tests/conftest.py: the core's
# exactness tests and cheap tests of the rest, under a minute on 2 cores), then the test files named in full.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check .  # the linter first: a second of work, its rules in pyproject.toml
if [ "${1:-}" = --quick ]; then
  shift
  # One thread unless told otherwise: the small test models gain nothing from more, and on 2 cores shared with
  # other work, OpenMP's waiting threads made the tier 11x slower (396 s against 35 s).
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  .venv/bin/python -m pytest -q -p no:randomly -m quick tests --durations=5
  if [ $# -gt 0 ]; then .venv/bin/python -m pytest -q -p no:randomly "$@"; fi
  exit
fi
# Notebooks at their parameters cells' defaults: the bundled model on small samples (CI size). One worker process a
# core, up to 4 (ICL_TEST_WORKERS sets it), each on one thread, a test file or notebook at a time: on 2 cores the small
# models' passes are bound by Python, which one process with two threads leaves one core idle for.
workers=${ICL_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))')}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
.venv/bin/python -m pytest -q -p no:randomly -n "$workers" --dist loadfile tests --nbmake notebooks --nbmake-timeout=900 \
  --durations=10 "$@"
