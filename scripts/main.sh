#!/usr/bin/env bash
# Set up and run the main job: execute every notebook on the bundled offline model.
# Executed copies go to build/notebooks/; with --inplace the committed notebooks are refreshed, at 64 word and 16
# sentence prompts unless ICL_N_PROMPTS / ICL_N_SENTENCE_PROMPTS say otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Sentence datasets: $ICL_DATA_DIR, else the copy `python -m icl_helpers data fetch` made in
# the cache, else the Hugging Face hub; with none of them those sections say what they
# skipped and the rest runs.
# No progress bars and no saved widget state in the executed copies: both would show frozen
# at the moment of saving. Each explorer carries a static image of its first view instead.
export TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
mkdir -p build
notebooks=(notebooks/[0-9]*.ipynb)
if [ "${1:-}" = "--inplace" ]; then
  # The committed outputs at the committed quick report's sizes (results/report-smollm2-135m-n64.json): each
  # notebook's closing table then shows that report's numbers, which its title cell quotes
  # (tests/test_committed_notebooks.py holds the two together).
  export ICL_N_PROMPTS=${ICL_N_PROMPTS:-64} ICL_N_SENTENCE_PROMPTS=${ICL_N_SENTENCE_PROMPTS:-16}
  out=(--inplace); executed=("${notebooks[@]}"); else
  out=(--output-dir build/notebooks); executed=("${notebooks[@]/#notebooks/build/notebooks}"); fi
.venv/bin/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1200 \
  --ExecutePreprocessor.store_widget_state=False "${out[@]}" "${notebooks[@]}"
.venv/bin/python - "${executed[@]}" <<'EOF'
import json, sys
for path in sys.argv[1:]:  # widget state an earlier run saved
    nb = json.load(open(path))
    if nb["metadata"].pop("widgets", None) is not None:
        json.dump(nb, open(path, "w"), indent=1, ensure_ascii=False)
        open(path, "a").write("\n")
EOF
