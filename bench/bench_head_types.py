"""Head-type scores benchmark (issue 58, item 8): what each score costs on the bundled model,
against the forward floor of the inputs it reads.

    .venv/bin/python bench/bench_head_types.py --n 64 --sequences 200 --layout-n 16

Times, each once after a warm-up, uncached: the induction and previous-token scores (one pass
of `--sequences` random sequences P + R + R, n = 50), the prefix-matching score (P + 4 copies),
each against one plain pass of the same sequences (`base_model`, no attention read); the
function-vector score of the first `--n` SCORE prompts of sentiment_number (`score_and_eval`,
every prompt scored: correct_only=False, the most it costs), against one plain last-position pass
of those prompts (`core.passes.accuracies`, no intervention). Then three ways of running the
patches on the first `--layout-n` prompts: one-token passes over kept keys and values (the
study's default), the ablations' engine with heads on the batch axis (reuse_keys=False), and the
engine with one intervention a head over the prompts as they are; all must agree to rounding.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_helpers import load_model
from icl_helpers.core.interventions import Intervention
from icl_helpers.core.passes import accuracies
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.studies import function_vectors as fv
from icl_helpers.studies import head_types as ht


def timed(run) -> tuple[object, float]:
    start = time.perf_counter()
    out = run()
    return out, time.perf_counter() - start


def per_head_runs(m, ps) -> torch.Tensor:
    """[n, L, H]: the gold label's log-probability with each head patched, less the plain one: one
    intervention a head over the prompts as they are, every prompt scored, in the study's cells."""
    L, H = m.arch.n_layers, m.arch.n_heads
    z, _ = fv.last_outputs(m, ps.texts)
    cells = [fv.cell_of(p, d) for p, d in zip(ps.prompts, ps.directions)]
    names = sorted(set(cells))
    cell = torch.tensor([names.index(c) for c in cells])
    means = torch.stack([z[cell == c].double().mean(0) for c in range(len(names))]).float()  # [C, L, H, dh]
    texts = [p.text for p in fv.corrupted_prompts(ps.prompts, 0)]
    gold, other = prompt_label_ids(m.tokenizer, ps.prompts)
    last = torch.tensor([len(i) - 1 for i in m.tokenizer(texts)["input_ids"]])

    def at(layer: int, head: int) -> Intervention:
        return Intervention(lambda r: fv.patched(m, layer, torch.full((len(r),), head), last[r],
                                                 means[cell[r], layer, head]), layer)

    runs = accuracies(m, texts, gold, other, [None] + [at(l, h) for l in range(L) for h in range(H)], bar=None,
                      labels=lambda r: torch.tensor(r))
    return torch.stack([r.true_prob.log() for r in runs[1:]], 1).view(len(ps), L, H) - runs[0].true_prob.log()[:, None, None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="SCORE prompts for the function vectors (default 64)")
    parser.add_argument("--sequences", type=int, default=200, help="random sequences (default 200, n = 50)")
    parser.add_argument("--layout-n", type=int, default=16, help="prompts for the layout comparison (default 16; 0: skip)")
    args = parser.parse_args()
    m = load_model("smollm2-135m", device="cpu")
    L, H = m.arch.n_layers, m.arch.n_heads
    print(f"smollm2-135m: {L} layers x {H} heads, {torch.get_num_threads()} torch threads\n")

    ht.repeated_sequence_scores(m, 4, 50, cache=False)  # warm-up
    rows = []
    for name, copies in (("induction + previous-token", 2), ("prefix-matching", 4)):
        ids = ht.random_sequences(m, args.sequences, 50, copies)
        _, scored = timed(lambda: ht.repeated_sequence_scores(m, args.sequences, 50, copies, cache=False))

        def plain(ids=ids) -> None:
            with torch.no_grad():
                for batch in ids.split(32):
                    m.model.base_model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False)
        _, floor = timed(plain)
        rows.append((f"{name}: {args.sequences} sequences of {ids.shape[1]} tokens", scored, floor))

    score, _ = ht.score_and_eval(m, "sentiment_number", 3 * args.n)
    ps = score.first(args.n)
    gold, other = prompt_label_ids(m.tokenizer, ps.prompts)
    accuracies(m, ps.texts[:8], gold[:8], other[:8], [None], bar=None)  # warm-up
    _, floor = timed(lambda: accuracies(m, ps.texts, gold, other, [None], bar=None))
    result, scored = timed(lambda: fv.function_vector_scores(m, ps, correct_only=False, cache=False))
    rows.append((f"function vectors: {len(ps)} prompts x {H} heads a layer, {L} layers", scored, floor))
    print("| score | s | forward floor s | x floor |\n|---|---|---|---|")
    for name, s, f in rows:
        print(f"| {name} | {s:.1f} | {f:.2f} | {s / f:.1f}x |", flush=True)
    right = fv.last_outputs(m, ps.texts)[1] == gold
    print(f"\n{int(right.sum())} of {len(ps)} prompts answered correctly (the study's default scores those only); "
          f"largest |AIE|: {result.prob.abs().max():.4f} (probability), {result.logprob.abs().max():.4f} (log)")

    if args.layout_n:
        few = ps.first(args.layout_n)
        cells = [fv.cell_of(p, d) for p, d in zip(few.prompts, few.directions)]
        names = sorted(set(cells))
        one_token, one_s = timed(lambda: fv.function_vector_scores(m, few, correct_only=False, cache=False))
        engine, engine_s = timed(lambda: fv.function_vector_scores(m, few, correct_only=False, reuse_keys=False,
                                                                    cache=False))
        per_head, head_s = timed(lambda: per_head_runs(m, few))
        aie = torch.stack([per_head[[c == n for c in cells]].mean(0) for n in names]).mean(0)
        _, few_floor = timed(lambda: accuracies(m, few.texts, gold[:len(few)], other[:len(few)], [None], bar=None))
        print(f"\nThe patches on {len(few)} prompts ({len(few) * L * H:,} patched prompts; forward floor {few_floor:.2f} s):\n")
        print("| patched passes | s | x floor | largest difference of the log-probability AIE from the one-token passes' |")
        print("|---|---|---|---|")
        for name, s, other_aie in (("one-token passes over kept keys and values (the default)", one_s, one_token.logprob),
                                   ("engine, heads on the batch axis, one intervention a layer", engine_s, engine.logprob),
                                   ("engine, one intervention a head", head_s, aie)):
            gap = float((other_aie - one_token.logprob).abs().max())
            print(f"| {name} | {s:.1f} | {s / few_floor:.0f}x | {gap:.1e} |", flush=True)
        print(f"\nlargest |log p| of the gold label on these prompts: {float(one_token.corrupted_prob.log().abs().max()):.1f} "
              "(the tolerance policy's scale is the logits' log-sum-exp, at least log V)")

if __name__ == "__main__":
    main()
