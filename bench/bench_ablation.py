"""Ablation benchmark (issue 16): the causal check's runs with the blocks before each run's
first ablated layer computed once a batch (`model.prefix`, every ablation now) against every
run from the embeddings (the passes before), on the bundled model.

    .venv/bin/python bench/bench_ablation.py --n-ablation 64 --draws 5

For each word dataset: the top 20 heads located on its first 100 balanced prompts,
mean-ablated on `--n-ablation` prompts of the records after, top-k for
each k of notebook 08 and `--draws` layer-matched random draws, the plain model once. Each
mode is timed once (after a warm-up batch); the two must agree to the bit. Prints, by
dataset, the runs, the layers their ablations start at, and seconds for each mode.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import load_model
from icl_helpers.core import interventions
from icl_helpers.core.passes import intervened_accuracy
from icl_helpers.data.datasets import dataset_records
from icl_helpers.studies import ablation
from icl_helpers.studies.in_context_heads import in_context_heads
from icl_helpers.studies.runner import prompt_set

WORD = ["sentiment_number", "animal_country"]
N_LOCATE, KS = 100, (1, 2, 5, 10, 20)  # heads located on the first 100 prompts; k of notebook 08's curves and all 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-ablation", type=int, default=64, help="prompts ablated a dataset (default 64)")
    parser.add_argument("--draws", type=int, default=5, help="layer-matched random draws (default 5)")
    args = parser.parse_args()
    m = load_model("smollm2-135m", device="cpu")
    first_layer = interventions.first_layer
    print(f"{args.n_ablation} prompts a dataset, ks {KS}, {args.draws} draws, "
          f"{torch.get_num_threads()} torch threads\n")
    print("| dataset | runs | first layers of the top-k runs | shared prefix s | from the embeddings s | speed-up |")
    print("|---|---|---|---|---|---|")
    for d in WORD:
        locating = prompt_set(m, d, "balanced", N_LOCATE)
        top = in_context_heads(m, locating, 20)
        means = ablation.ablation_means(m, locating.texts)
        records = dataset_records(d, N_LOCATE + args.n_ablation)
        prompts = ablation.evaluation_prompts(records, torch.arange(len(records)) < N_LOCATE)  # the records after
        intervened_accuracy(m, prompts[:8])  # warm-up

        def timed() -> tuple[ablation.AblationRuns, float]:
            start = time.perf_counter()
            runs = ablation.ablation_runs(m, prompts, top, KS, args.draws, means=means)
            return runs, time.perf_counter() - start

        shared, shared_s = timed()
        interventions.first_layer = lambda heads: 0  # every run from the embeddings, as before the change
        try:
            full, full_s = timed()
        finally:
            interventions.first_layer = first_layer
        same = all(torch.equal(a.true_logit, b.true_logit) and torch.equal(a.predictions, b.predictions)
                   for a, b in zip([shared.plain, *shared.top.values(), *sum(shared.random.values(), [])],
                                   [full.plain, *full.top.values(), *sum(full.random.values(), [])]))
        if not same:
            raise SystemExit(f"{d}: the shared-prefix runs differ from the full ones")
        starts = [first_layer(top[:k]) for k in KS]
        print(f"| {d} | {1 + len(KS) * (1 + args.draws)} | {starts} | {shared_s:.1f} | {full_s:.1f} | "
              f"{full_s / shared_s:.2f}x |", flush=True)
    print(f"\nBoth modes agree to the bit on every run. Model: {m.arch.n_layers} layers.")


if __name__ == "__main__":
    main()
