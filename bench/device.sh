#!/usr/bin/env bash
# Issue 45's GPU figures in one run on a lent GPU machine, which has PyTorch but reaches no network.
#
#   bash bench/device.sh pack       # here: put what that machine lacks into .device/ (git ignores it)
#   OUT=dir bash bench/device.sh run   # there, from the repository root, with .device/ carried along
#
# pack downloads the pinned transformers and gguf wheels (no dependencies: the machine's own serve), copies the
# real GPT-2 and LLaMA vocabularies the tests read, and, where $ICL_DATA_DIR names a copy of the sentence
# datasets, that copy (the report's suite needs it). run installs the wheels, then measures, most wanted first,
# each step under its own time limit so one that runs long leaves the rest their turn, into $OUT:
#   locate.{md,json}  locate against the forward pass, GPT-2 small (float32) and a Llama-7B shape (bfloat16),
#                     1,024 word prompts (issue 45's targets: at most 2x and 1.5x)
#   tests.txt         the scoring, split-model and decomposition tests with their small models on the GPU
#   suite.{md,json}   the whole report on the Llama-7B shape at 64/16 (target: at most 2x its forward floor)
# A dry run of `run` on a CPU, with a Python that has the project's requirements first on the PATH, before spending
# GPU minutes on it (about 4 minutes on 2 cores; the suite needs 10 word prompts or more):
#   DEVICE=cpu N=32 MODELS=gpt2-small SUITE_MODEL=gpt2-small SUITE_N="10 10" OUT=dir bash bench/device.sh run
# shellcheck disable=SC2086  # MODELS and SUITE_N are lists, split into words where used
set -uo pipefail
cd "$(dirname "$0")/.."
PACK=.device
DEVICE=${DEVICE:-cuda} N=${N:-1024} MODELS=${MODELS:-gpt2-small llama-7b}
SUITE_MODEL=${SUITE_MODEL:-llama-7b} SUITE_N=${SUITE_N:-64 16}

pack() {
    mkdir -p "$PACK/wheels" "$PACK/cache/tokenizers"
    grep -qx "/$PACK/" .git/info/exclude 2>/dev/null || echo "/$PACK/" >> .git/info/exclude
    python3 -m pip download -q --no-deps -d "$PACK/wheels" \
        "$(grep '^transformers==' requirements.txt)" "$(grep '^gguf==' requirements.txt)"
    python3 -c "import sys; sys.path.insert(0, '.'); from tests.conftest import vocab_dir; print(vocab_dir())" \
        | xargs -I{} cp -r {} "$PACK/cache/tokenizers/"
    if [ -n "${ICL_DATA_DIR:-}" ]; then cp -r "$ICL_DATA_DIR" "$PACK/data"; fi
    du -sh "$PACK"
}

run() {
    : "${OUT:?set OUT to the folder the results go to}"
    python3 -m pip install -q --no-deps "$PACK"/wheels/*.whl
    mkdir -p "$OUT"
    export ICL_HELPERS_CACHE="$PWD/$PACK/cache"
    if [ -d "$PACK/data" ]; then export ICL_DATA_DIR="$PWD/$PACK/data"; fi
    python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available()
                 and torch.cuda.get_device_name())"
    timeout 300 python3 bench/bench_locate.py --device "$DEVICE" --models $MODELS --n "$N" --json "$OUT/locate.json" \
        | tee "$OUT/locate.md"
    ICL_TEST_DEVICE=$DEVICE timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_attribution.py \
        tests/test_offload.py tests/test_decompose.py > "$OUT/tests.txt" 2>&1
    tail -3 "$OUT/tests.txt"
    set -- $SUITE_N
    timeout 150 python3 bench/bench_suite.py --model "$SUITE_MODEL" --device "$DEVICE" --n "$1" --sentence-n "$2" \
        --json "$OUT/suite.json" | tee "$OUT/suite.md"
}

case "${1:-}" in
    pack) pack ;;
    run) run ;;
    *) echo "usage: bash bench/device.sh pack|run (see the top of this file)" >&2; exit 2 ;;
esac
