"""Bias-reduction benchmark (issue 77, item 2): the majority and recency reductions with their
label edits run as one-token passes over each prompt's kept keys and values (the edits change the
last position alone, `core.passes.intervened_accuracies`), against the whole padded passes from
the edit's first layer (the passes before), on one model.

    .venv/bin/python bench/bench_biases.py --n 256 --json biases.json

Both measures on the first `--n` sentiment/number records, in 20 heads spread over the upper two
thirds of the layers (what a report's located heads look like), each from an empty results cache,
each mode timed once; the two modes must give the same counts and accuracies. Prints seconds by
measure and mode.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import load_model
from icl_helpers.data.setting import MAIN
from icl_helpers.studies import biases


def whole(intervention):
    """The intervention as the whole padded pass runs it (not as a one-token pass)."""
    return lambda m, heads: replace(intervention(m, heads), last_only=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    m = load_model(args.model, device="cpu")
    L = m.arch.n_layers
    heads = [(l, h) for l in dict.fromkeys(torch.linspace(L // 3, L - 1, 10).round().long().tolist()) for h in (0, 1)]
    records = MAIN.records("sentiment_number", args.n, 0)
    one_token = dict(biases.BIASES)
    rows = []
    for mode, table in (("one-token", one_token), ("whole", {k: (v, f, whole(i)) for k, (v, f, i) in one_token.items()})):
        for measure in ("majority", "recency"):
            os.environ["ICL_HELPERS_CACHE"] = tempfile.mkdtemp()
            biases.BIASES[measure] = table[measure]
            start = time.perf_counter()
            effect = biases.measured_bias(m, measure, records, heads)
            rows.append(dict(mode=mode, measure=measure, seconds=round(time.perf_counter() - start, 1),
                             plain=effect.plain.biased, intervened=effect.intervened.biased,
                             accuracy=[*effect.accuracy_biased, *effect.accuracy_standard]))
    biases.BIASES.update(one_token)
    for measure in ("majority", "recency"):
        a, b = (next(r for r in rows if r["mode"] == mode and r["measure"] == measure) for mode in ("one-token", "whole"))
        assert {k: a[k] for k in ("plain", "intervened", "accuracy")} == {k: b[k] for k in ("plain", "intervened", "accuracy")}
    print(f"{args.model}, {args.n} records, {args.threads} thread(s), heads of layers {heads[0][0]}-{heads[-1][0]}")
    print("| measure | one-token s | whole s | whole / one-token |\n|---|---|---|---|")
    for measure in ("majority", "recency"):
        a, b = (next(r for r in rows if r["mode"] == mode and r["measure"] == measure)["seconds"] for mode in ("one-token", "whole"))
        print(f"| {measure} | {a} | {b} | {b / a:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(model=args.model, n=args.n, threads=args.threads, heads=heads, runs=rows),
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
