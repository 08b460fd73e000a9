"""Padding benchmark (issue 16): one pass of a sentence prompt set in batches of 32 in
prompt order (the passes before) against `core.batching.length_batches` (every pass now:
similar lengths together, at most 32 prompts and BATCH_TOKENS tokens with padding a batch).

    .venv/bin/python bench/bench_padding.py --dataset agnews --n 200

Both runs decompose the same prompts, recording the attention rows (what the label
attention and locate's pass record), on the bundled model; each is timed once after a
warm-up batch. Prints real tokens, and for each run its batches, tokens with padding and
seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import ICLModel, load_model
from icl_helpers.core.batching import BATCH_TOKENS, length_batches
from icl_helpers.core.decompose import decompose
from icl_helpers.studies.runner import prompt_set

BATCH = 32


def run(texts: list[str], batches: list[torch.Tensor], m: ICLModel) -> tuple[int, float]:
    """(tokens with padding, seconds) of decomposing texts in `batches` of prompt indices."""
    padded, start = 0, time.perf_counter()
    for rows in batches:
        dec = decompose(m, [texts[i] for i in rows], record=["pattern"])
        padded += dec.input_ids.numel()
    return padded, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="agnews")
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    m = load_model("smollm2-135m", device="cpu")
    texts = prompt_set(m, args.dataset, "balanced", args.n).texts
    real = int(m.encode(texts)["attention_mask"].sum())
    decompose(m, texts[:8], record=["pattern"])  # warm-up
    print(f"{args.dataset}, N = {args.n}, {torch.get_num_threads()} torch threads; {real} real tokens\n\n"
          "| batches | count | tokens with padding | seconds |\n|---|---|---|---|")
    runs = {f"{BATCH} a batch, prompt order": list(torch.arange(len(texts)).split(BATCH)),
            f"length_batches ({BATCH}, {BATCH_TOKENS} tokens)": length_batches(m, texts, BATCH)}
    for name, batches in runs.items():
        padded, seconds = run(texts, batches, m)
        print(f"| {name} | {len(batches)} | {padded} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
