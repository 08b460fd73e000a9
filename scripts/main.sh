#!/usr/bin/env bash
# Set up and run the main job: execute every notebook on the bundled offline model.
# Executed copies go to build/notebooks/; with --inplace the committed notebooks are refreshed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ICL_DATA_DIR="${ICL_DATA_DIR:-$(cd .. && pwd)/shared/datasets}"
mkdir -p build
shopt -s nullglob
notebooks=(notebooks/[0-9]*.ipynb)
if [ ${#notebooks[@]} -eq 0 ]; then  # before the notebooks exist: locate on the paper's example
  .venv/bin/python -m icl_helpers locate --model smollm2-135m \
    --prompt "love : bar like : bar eight : foo two : foo one :" --json build/locate_example.json
  exit 0
fi
if [ "${1:-}" = "--inplace" ]; then out=(--inplace); else out=(--output-dir build/notebooks); fi
.venv/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1200 "${out[@]}" "${notebooks[@]}"
