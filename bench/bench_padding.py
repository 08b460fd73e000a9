"""Padding benchmark (issue 16): one pass of a sentence prompt set, batches in prompt order
against batches of similar length (`core.decompose.length_order`, what every pass does now),
at two batch sizes.

    .venv/bin/python bench/bench_padding.py --dataset agnews --n 200

Every run decomposes the same prompts, recording the attention rows (what the label
attention and locate's pass record), on the bundled model; each is timed once after a
warm-up batch. Prints real tokens, and tokens with padding and seconds for each run.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import ICLModel, load_model  # noqa: E402
from icl_helpers.core.decompose import decompose, length_order  # noqa: E402
from icl_helpers.studies.runner import prompt_set  # noqa: E402


def run(texts: list[str], order: list[int], batch_size: int, m: ICLModel) -> tuple[int, float]:
    """(tokens with padding, seconds) of decomposing texts in batches taken in `order`."""
    padded, start = 0, time.perf_counter()
    for i in range(0, len(order), batch_size):
        dec = decompose(m, [texts[j] for j in order[i : i + batch_size]], record=["pattern"])
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
          "| batches | batch size | tokens with padding | seconds |\n|---|---|---|---|")
    for batch_size in (32, 8):
        for name, order in (("prompt order", list(range(len(texts)))), ("by length", length_order(texts).tolist())):
            padded, seconds = run(texts, order, batch_size, m)
            print(f"| {name} | {batch_size} | {padded} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
