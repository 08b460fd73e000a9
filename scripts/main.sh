#!/usr/bin/env bash
# Set up and run the main job: execute every notebook on the bundled offline model.
# Executed copies go to build/notebooks/; with --inplace the committed notebooks are refreshed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Sentence datasets: $ICL_DATA_DIR, else ../shared/datasets beside the checkout, else the
# Hugging Face hub; with none of them those sections say what they skipped and the rest runs.
mkdir -p build
notebooks=(notebooks/[0-9]*.ipynb)
if [ "${1:-}" = "--inplace" ]; then out=(--inplace); else out=(--output-dir build/notebooks); fi
.venv/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1200 "${out[@]}" "${notebooks[@]}"
