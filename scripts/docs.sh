#!/usr/bin/env bash
# Set up (with the dev extras, which carry pdoc) and build the API reference from the docstrings into
# build/docs/ (open build/docs/index.html). It fails on any warning of pdoc's and on a docstring that
# names a module or member of the package that does not exist (scripts/docs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
rm -rf build/docs
.venv/bin/python scripts/docs.py build/docs
