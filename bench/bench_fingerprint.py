"""What the weights' key costs (issue 59): `ICLModel.fingerprint` (one pass over every weight,
`model.weights.weights_hash`) and the eval-mode switch around each pass (`loading.evaluating`),
against one forward pass of 64 word prompts, on the real models at hand.

    .venv/bin/python bench/bench_fingerprint.py --models smollm2-135m qwen2.5-coder-0.5b gemma3-270m

Each timing is the median of `--repeats` runs after a warm-up. A cached study takes the key once
to read (a hit) and once more after computing, before it stores (a miss); a study run uncached,
or `locate` called directly, takes it once, for the kept readout. Prints one table row a model.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import load_model
from icl_helpers.model.loading import evaluating
from icl_helpers.studies.runner import prompt_set


def seconds(run: Callable[[], object], repeats: int) -> float:
    """The median of `repeats` timed runs of run(), after one untimed."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m"])
    parser.add_argument("--n", type=int, default=64, help="prompts in the forward pass (default 64)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"CPU, {torch.get_num_threads()} torch threads; median of {args.repeats} runs\n")
    print(f"| model | parameters | key s | eval switch ms | forward pass of {args.n} prompts s | key / forward |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        m = load_model(name, device="cpu")
        enc = m.encode(prompt_set(m, "sentiment_number", n=args.n).texts)

        def forward() -> None:
            with torch.no_grad():
                m.model(**enc)

        def switch() -> None:
            with evaluating(m.model):
                pass

        key, mode, pass_s = seconds(m.fingerprint, args.repeats), seconds(switch, args.repeats), seconds(forward, args.repeats)
        params = sum(p.numel() for p in m.model.parameters())
        print(f"| {name} | {params / 1e6:,.0f} M | {key:.3f} | {mode * 1e3:.2f} | {pass_s:.2f} | {key / pass_s:.1%} |",
              flush=True)


if __name__ == "__main__":
    main()
