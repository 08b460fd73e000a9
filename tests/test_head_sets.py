"""Head sets side by side (`studies.head_sets`) and the literature's claims on them (`verdicts.claims.literature`):
the sets' ablation at the last position equals each prompt run by hand with the heads replaced; exclusive
sets are disjoint from the other type's top heads as claimed; overlaps, chance and percentiles are the
numbers written out; the literature's rules give the verdicts their thresholds say on hand-built results."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from html import escape

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.core.heads import top_heads
from icl_helpers.core.passes import Accuracy
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.errors import UsageError
from icl_helpers.stats import spearman
from icl_helpers.studies import function_vectors as fv
from icl_helpers.studies import head_sets as hs
from icl_helpers.studies import recency
from icl_helpers.studies import set_ablations as sa
from icl_helpers.verdicts import claims, evidence, head_report
from icl_helpers.verdicts.claims.literature import induction_fv, sources, task_heads
from icl_helpers.verdicts.claims.registry import EVAL_POOLED, NO_PROMPTS, fewest_prompts
from icl_helpers.verdicts.judgement import FAILS, NOT_TESTED, PARTLY, REPLICATES
from icl_helpers.verdicts.whose import LITERATURE
from tests.conftest import close, exact, logprob_scale, small_model
from tests.test_head_types import fv_prompt_set


@pytest.fixture(scope="module", params=["gpt2", "llama-gqa"])
def model(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def by_hand(m: ICLModel, texts: list[str], heads, fill: torch.Tensor) -> torch.Tensor:
    """[N, V] float64: each prompt's next-token logits, run alone, with the z of `heads` at its last
    position set to fill[l, h] (fill [L, H, dh])."""
    dh, out = m.arch.d_head, []
    for text in texts:
        def replace_at(layer):
            def hook(mod, args):
                z = args[0].clone()
                for l, h in heads:
                    if l == layer:
                        z[0, -1, h * dh:(h + 1) * dh] = fill[l, h]
                return (z, *args[1:])
            return hook
        handles = [m.arch.attn_out(l).register_forward_pre_hook(replace_at(l)) for l in range(m.arch.n_layers)]
        try:
            out.append(m.model(**m.tokenizer(text, return_tensors="pt").to(m.device)).logits[0, -1].double().cpu())
        finally:
            for handle in handles:
                handle.remove()
    return torch.stack(out)


def test_sets_ablated_at_the_last_position_equal_each_prompt_run_by_hand(model, monkeypatch):
    """Several sets and draws on the batch axis, in chunks of 3 rows (ROWS), runs sorted by their first
    layer: every run's logits of the true and false labels, its argmax and the true label's
    probability are those of the prompt run alone with the run's heads replaced."""
    monkeypatch.setattr(sa, "ROWS", 6)  # batch_size 2: 3 runs a pass, several passes of mixed starts
    ps = fv_prompt_set(model)
    ranked = {"a": [(2, 1), (0, 3), (1, 0)], "b": [(1, 2), (2, 0)], "c": [(0, 0)]}
    runs = sa.ablation_plan(ranked, {"a": [1, 3], "b": [2], "c": [1]}, model.arch.n_heads, n_random=2, seed=0)
    assert len(runs) == 3 * (2 + 1 + 1) and {r.set for r in runs} == {"a", "b", "c"}
    fill = torch.randn(model.arch.n_layers, model.arch.n_heads, model.arch.d_head, generator=torch.Generator().manual_seed(1))
    got = sa.set_ablations(model, ps, runs, fill, seed=0, batch_size=2, cache=False)
    true_ids, false_ids = prompt_label_ids(model.tokenizer, ps.prompts)
    rows = torch.arange(len(ps))

    def check(acc: Accuracy, logits: torch.Tensor) -> None:
        scale = logprob_scale(logits)
        close(acc.true_logit, logits[rows, true_ids], scale=scale)
        close(acc.false_logit, logits[rows, false_ids], scale=scale)
        close(acc.true_prob.log(), logits.log_softmax(-1)[rows, true_ids], scale=scale)
        top2 = logits.topk(2).values
        clear = top2[:, 0] - top2[:, 1] > 1e-4 * scale  # an argmax rounding cannot flip
        assert clear.sum() >= len(ps) - 1 and torch.equal(acc.predictions[clear], logits.argmax(-1)[clear])

    check(got.plain, by_hand(model, ps.texts, [], fill))
    moved = 0.0
    for run, acc in zip(runs, got.ablated):
        logits = by_hand(model, ps.texts, run.heads, fill)
        check(acc, logits)
        moved = max(moved, float((acc.true_logit - got.plain.true_logit).abs().max()))
    assert moved > 1e-2  # the replaced heads do move the labels' logits: a test of something
    check(got.zero_shot, by_hand(model, [sa.zero_shot(p) for p in ps.prompts], [], fill))
    check(got.shuffled, by_hand(model, [p.text for p in fv.corrupted_prompts(ps.prompts, 0)], [], fill))
    assert [sa.zero_shot(p) for p in ps.prompts][0] == "one :"


def test_the_plan_matches_each_draw_layer_by_layer_and_nests_the_sizes():
    ranked = {"x": [(5, 0), (5, 1), (2, 3), (7, 2)]}
    runs = sa.ablation_plan(ranked, {"x": [2, 4, 9]}, n_heads=4, n_random=3, seed=7)  # 9 > the ranking: left out
    assert [(r.k, r.draw) for r in runs] == [(k, d) for k in (2, 4) for d in (None, 0, 1, 2)]
    by = {(r.k, r.draw): r.heads for r in runs}
    for d in range(3):
        full = by[(4, d)]
        assert by[(2, d)] == full[:2]  # nested: a draw's first k are the set's first k's match
        assert [l for l, _ in full] == [l for l, _ in ranked["x"]]  # layer by layer
        assert not set(full) & set(ranked["x"])  # outside the set, where its layer allows
    assert by[(4, 0)] != by[(4, 1)]  # seeded draw by draw


def test_exclusive_sets_share_no_head_with_the_other_types_top_heads():
    g = torch.Generator().manual_seed(0)
    scores = {name: torch.rand(6, 5, generator=g) for name in hs.SCORES}
    scores[hs.FV] = scores[hs.IN_CONTEXT] + 0.05 * torch.rand(6, 5, generator=g)  # nearly the same ranking
    ranked = hs.rankings(scores, exclude=8, given=[(0, 1), (3, 3)])
    for a, b in hs.EXCLUSIONS:
        name = hs.exclusive(a, b)
        assert not set(ranked[name]) & set(ranked[b][:8])  # disjoint from every set of b's up to 8
        assert ranked[name] == [h for h in ranked[a] if h not in set(ranked[b][:8])]  # a's order kept
        assert len(ranked[name]) == 30 - 8
    for k in (1, 5, 8):
        sets = hs.heads_at(ranked, k, list(ranked))
        assert all(len(heads) == k for name, heads in sets.items() if name != hs.GIVEN)  # equal sizes
        assert sets[hs.IN_CONTEXT] == top_heads(scores[hs.IN_CONTEXT], k)
    assert ranked[hs.GIVEN] == [(0, 1), (3, 3)]
    assert len(set(ranked[hs.IN_CONTEXT][:8]) & set(ranked[hs.FV][:8])) >= 5  # the overlap exclusion removes


def test_overlap_numbers_are_the_counts_written_out():
    """Shared heads, Jaccard, chance k^2/N, the exact chance of sharing as many (every pair of k-sets
    of N enumerated) and Spearman's rho, on hand-made scores."""
    a = torch.arange(12.0).view(3, 4)  # heads ranked 2-3, 2-2, 2-1, ...
    b = a.flip(1)  # within each layer reversed: top 3 are 2-0, 2-1, 2-2
    table = hs.overlap_table({"a": a, "b": b, "c": -a}, k=3)
    row = table.loc["a / b"]
    assert (row["shared"], row["jaccard"], row["chance"]) == (2, 2 / 4, 9 / 12)
    pairs = list(itertools.combinations(range(12), 3))
    brute = sum(len(set(x) & set(range(3))) >= 2 for x in pairs) / len(pairs)  # one set fixed: the same chance
    assert math.isclose(row["p (chance)"], brute, rel_tol=1e-12)
    assert hs.chance_overlap(0, 3, 12) == 1.0
    assert table.loc["a / c", "shared"] == 0 and math.isclose(table.loc["a / c", "spearman"], -1.0)
    exact(hs.rank_correlations({"a": a, "c": -a}), torch.tensor([[1.0, -1.0], [-1.0, 1.0]]))


def test_membership_percentiles_and_layers():
    ic = torch.tensor([[0.0, 5.0], [4.0, 1.0], [3.0, 2.0]])  # top 2: 0-1, 1-0
    ind = torch.tensor([[9.0, 0.0], [8.0, 1.0], [2.0, 3.0]])  # top 2: 0-0, 1-0
    exact(hs.percentiles(ic), torch.tensor([[0.0, 1.0], [0.8, 0.2], [0.6, 0.4]], dtype=torch.float64))
    exact(hs.percentiles(torch.tensor([[1.0, 1.0], [0.0, 2.0]])), torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64))
    table = hs.membership({hs.IN_CONTEXT: ic, hs.INDUCTION: ind}, k=2)
    assert list(table.index) == ["0-1", "1-0"] and table["induction head"].tolist() == [False, True]
    assert table.loc["1-0", "induction percentile"] == 0.8
    exact(hs.layer_counts({"s": [(0, 1), (2, 0), (2, 1)], "t": [(1, 0)]}, 3), torch.tensor([[1, 0, 2], [0, 1, 0]]))
    row = hs.set_table({"s": [(0, 1), (2, 0), (2, 1)]}).loc["s"]
    assert (row["lowest layer"], row["median layer"], row["highest layer"], row["members"]) == (0, 2.0, 2, "0-1, 2-0, 2-1")


# --- hand-built results for the rules --------------------------------------------------------


def acc(hits: list[bool]) -> Accuracy:
    """An `Accuracy` whose top-1 hits are `hits` (true id 1, a miss predicts 0)."""
    h = torch.tensor(hits)
    return Accuracy(h.float(), torch.zeros(len(h)), h.long(), torch.ones(len(h), dtype=torch.long), torch.full((len(h),), 0.5))


def fake_study(hits: dict[tuple[str, int, int | None], list[bool] | Accuracy], plain: list[bool] | Accuracy,
               zero: list[bool], scores: dict[str, torch.Tensor] | None = None, null: torch.Tensor | None = None,
               sizes: tuple[int, ...] = (2, 3)) -> hs.HeadSetStudy:
    """A study of one word dataset whose runs give the hits given (an `Accuracy` as it is), inputs all
    distinct, every prompt's other label id 2."""
    runs = [sa.Ablation(s, k, d, ()) for s, k, d in hits]
    as_acc = lambda h: h if isinstance(h, Accuracy) else acc(h)  # noqa: E731
    n = len(as_acc(plain).predictions)
    ablations = sa.SetAblations("w", runs, as_acc(plain), [as_acc(h) for h in hits.values()], acc(zero), acc(zero),
                                torch.arange(n), torch.full((n,), 2))
    scores = scores or {name: torch.zeros(3, 4) for name in hs.SCORES}
    L, H = scores[hs.INDUCTION].shape
    return hs.HeadSetStudy("fake", L, H, hs.HeadScores(scores, torch.zeros(L, H) if null is None else null, {}, {}),
                           hs.rankings(scores, max(sizes)), sizes, list(sizes), 1, {"w": ablations}, ["w"], [])


N = 20  # prompts: MIN_CLUSTERS distinct inputs and more


def runs_for(names: dict[str, tuple[int, int]], k_values=(2, 3)) -> dict:
    """Each set's hits (set, k, None) and one random draw (set, k, 0): `correct` of N right each."""
    out = {}
    for name, (top, random) in names.items():
        for k in k_values:
            out[(name, k, None)] = [i < top for i in range(N)]
            out[(name, k, 0)] = [i < random for i in range(N)]
    return out


@pytest.mark.parametrize("fv_right, verdict", [(2, REPLICATES), (18, FAILS)])
def test_fv_over_induction_reads_the_paired_gap(fv_right, verdict):
    """Induction ablated leaves 18 of 20 right; FV ablated leaves 2 (FV hurts more: replicates) or 18 (no gap)."""
    runs = runs_for({hs.INDUCTION: (18, 18), hs.FV: (fv_right, 18)})
    study = fake_study(runs, [True] * N, [False] * N)
    j = claims.CLAIMS["fv_over_induction"].find(study)
    assert j.verdict == verdict and j.n == N
    assert math.isclose(j.ours, (18 - fv_right) / N)  # induction-ablated minus FV-ablated: a flipped sign fails here
    lo, hi = j.ci
    assert lo <= j.ours <= hi


def test_fv_over_induction_holds_at_one_size_partly():
    runs = runs_for({hs.INDUCTION: (18, 18), hs.FV: (2, 18)}, (2,)) | runs_for({hs.INDUCTION: (18, 18), hs.FV: (18, 18)}, (3,))
    j = claims.CLAIMS["fv_over_induction"].find(fake_study(runs, [True] * N, [False] * N))
    assert j.verdict == PARTLY and "k = 2: +0.800" in j.why and "k = 3: +0.000" in j.why


def test_excluded_claim_reads_the_exclusive_sets():
    names = {hs.exclusive(hs.INDUCTION, hs.FV): (18, 18), hs.exclusive(hs.FV, hs.INDUCTION): (4, 18),
             hs.INDUCTION: (0, 0), hs.FV: (20, 20)}  # the plain sets say the reverse: only the exclusive ones are read
    j = claims.CLAIMS["fv_over_induction_excluded"].find(fake_study(runs_for(names), [True] * N, [False] * N))
    assert j.verdict == REPLICATES and math.isclose(j.ours, 14 / N)


def test_near_zero_shot_reads_the_gain_lost_and_the_random_draws():
    plain, zero = [True] * N, [i < 4 for i in range(N)]  # gain over zero-shot: 16 of 20
    near = runs_for({hs.PREFIX: (4, 18)})  # all the gain lost, random draws keep 18
    j = claims.CLAIMS["induction_near_zero_shot"].find(fake_study(near, plain, zero))
    assert j.verdict == REPLICATES and math.isclose(j.ours, 1.0)
    mild = runs_for({hs.PREFIX: (16, 20)})  # a quarter lost (4 of 16), yet more than random
    j = claims.CLAIMS["induction_near_zero_shot"].find(fake_study(mild, plain, zero))
    assert math.isclose(j.ours, 0.25) and j.verdict == PARTLY
    none = runs_for({hs.PREFIX: (20, 20)})
    assert claims.CLAIMS["induction_near_zero_shot"].find(fake_study(none, plain, zero)).verdict == FAILS
    flat = head_report.judged(fake_study(none, plain, plain), ["induction_near_zero_shot"])[0]  # zero-shot as good: no gain
    assert flat.verdict == NOT_TESTED and "no few-shot gain" in flat.why


def test_too_few_inputs_is_not_tested():
    runs = runs_for({hs.INDUCTION: (18, 18), hs.FV: (2, 18)})
    study = fake_study(runs, [True] * N, [False] * N)
    few = replace(study, ablations={"w": replace(study.ablations["w"], inputs=torch.arange(N) % 5)})  # 5 inputs
    found = head_report.judged(few, ["fv_over_induction"])[0]
    assert found.verdict == NOT_TESTED and "too few prompts" in found.why


def test_induction_exist_reads_the_threshold_and_the_null():
    def judged(top: float, null: float) -> str:
        scores = {name: torch.zeros(3, 4) for name in hs.SCORES}
        scores[hs.INDUCTION] = torch.full((3, 4), 0.01).index_put((torch.tensor([1]), torch.tensor([2])), torch.tensor(top))
        return claims.CLAIMS["induction_exist"].find(fake_study({}, [True] * N, [False] * N, scores,
                                                                  torch.full((3, 4), null))).verdict
    assert judged(0.6, 0.02) == REPLICATES
    assert judged(0.2, 0.02) == PARTLY  # above the null's bar (0.12), under 0.3
    assert judged(0.6, 0.55) == FAILS  # the null reaches as high: position alone explains it


def test_distinct_and_later_read_the_sets():
    ind = torch.arange(24.0).flip(0).view(6, 4)  # top heads in layers 0, then 1
    fv_scores = torch.arange(24.0).view(6, 4)  # top heads in layers 5, then 4
    scores = {name: torch.zeros(6, 4) for name in hs.SCORES} | {hs.INDUCTION: ind, hs.FV: fv_scores}
    study = fake_study({}, [True] * N, [False] * N, scores, sizes=(4, 5))
    distinct = claims.CLAIMS["induction_fv_distinct"].find(study)
    assert distinct.verdict == REPLICATES and distinct.ours == 0.0
    same = fake_study({}, [True] * N, [False] * N, scores | {hs.FV: ind}, sizes=(4, 5))
    assert claims.CLAIMS["induction_fv_distinct"].find(same).verdict == FAILS
    later = claims.CLAIMS["fv_later_than_induction"].find(study)
    assert later.ours == 5.0 and later.verdict == REPLICATES  # layer 5 against layer 0 at k = 4 (p 1/70), and at 5
    assert claims.CLAIMS["fv_later_than_induction"].find(same).verdict == FAILS
    assert induction_fv.layer_gap_p(torch.tensor([2.0, 2.0]), torch.tensor([0.0, 0.0])) == pytest.approx(1 / 6, abs=0.02)  # 1 of 6 splits


def test_the_literatures_claims_are_in_the_one_registry_and_every_rule_is_written_out():
    literature = claims.ids_of(LITERATURE)
    assert literature == [c.id for c in claims.CLAIMS.values() if c.find.__module__ in (induction_fv.__name__, task_heads.__name__)]
    for id in literature:
        c = claims.CLAIMS[id]
        assert "{" not in c.rule and c.paper.split(" ")[0] in ("Olsson", "Crosbie", "Yin", "Yang,")
        assert c.set_on == (sources.TR_TL_RULES_SET if c.paper.startswith("Yang") else sources.RULES_SET)
        assert (c.notebooks, c.clusters, c.views) == (("09",), EVAL_POOLED, (evidence.ALL,))
    assert not set(literature) & set(claims.reported())
    every = {name: (18, 18) for name in (*hs.SCORES, *(hs.exclusive(a, b) for a, b in hs.EXCLUSIONS))}
    findings = head_report.judged(fake_study(runs_for(every), [True] * N, [False] * N))
    assert [f.id for f in findings] == literature and NOT_TESTED not in {f.verdict for f in findings}
    assert {f.whose for f in findings} == {LITERATURE} and [f.to_dict()["whose"] for f in findings] == [LITERATURE] * 8
    text = claims.markdown(findings)  # on all prompts alone: no column names the view
    assert text.startswith("| id | claim | paper | ours (95% CI) | N | verdict |\n") and "judged on" not in text


def test_the_literatures_fewest_prompts_count_the_word_eval_halves_pooled():
    """Its claims' intervals resample the distinct inputs of both word datasets' EVAL halves together: the fewest
    prompts is the first n where those number MIN_CLUSTERS, counted here by hand."""
    from icl_helpers.data.setting import MAIN
    from icl_helpers.data.split import input_halves
    from icl_helpers.stats import MIN_CLUSTERS

    def pooled(n: int) -> int:
        held = set()
        for d in evidence.WORD:
            records = MAIN.records(d, n, 0)
            held |= {(d, r.input) for r, score in zip(records, input_halves(records, 0).tolist()) if not score}
        return len(held)
    need = fewest_prompts("fv_over_induction")["word"]
    assert pooled(need) >= MIN_CLUSTERS > pooled(need - 1)
    assert fewest_prompts("fig6")["word"] == MIN_CLUSTERS != need  # a paper's claim counts each dataset apart
    assert fewest_prompts("induction_exist") == {} and claims.CLAIMS["induction_exist"].reads == NO_PROMPTS


def labelled(n: int, inside: int, ranked: int) -> Accuracy:
    """An `Accuracy` of n prompts (gold id 1, other 2): prompt i ranks the gold label above the other
    where i < ranked, and its argmax is a label where i < inside (the gold one where also i < ranked,
    else the other), a token outside the labels (0) elsewhere."""
    i = torch.arange(n)
    predictions = torch.where(i < inside, torch.where(i < ranked, 1, 2), 0)
    return Accuracy((i < ranked).float(), torch.zeros(n), predictions, torch.ones(n, dtype=torch.long), torch.full((n,), 0.5))


def test_the_tr_ratio_counts_the_predictions_inside_the_label_set():
    """Yang et al.'s TR ratio: an argmax on the gold (1) or the other label (2) counts, any other token
    not; per prompt against the random draws as `effect` reads top-1; in the curves and the effect table."""
    plain = Accuracy(torch.zeros(6), torch.zeros(6), torch.tensor([1, 2, 0, 1, 3, 2]), torch.ones(6, dtype=torch.long),
                     torch.full((6,), 0.5))
    runs = [sa.Ablation(hs.TR, 1, None, ()), sa.Ablation(hs.TR, 1, 0, ()), sa.Ablation(hs.TR, 1, 1, ())]
    ablated = [labelled(6, 2, 1), labelled(6, 6, 0), labelled(6, 3, 3)]  # TR ratios 2/6, 6/6, 3/6
    a = sa.SetAblations("w", runs, plain, ablated, plain, plain, torch.arange(6), torch.full((6,), 2))
    assert a.hits(plain, sa.TR_RATIO).tolist() == [True, True, False, True, False, True] and a.tr_ratio(plain) == 4 / 6
    assert a.hits(plain).tolist() == [True, False, False, True, False, False]  # top-1: the gold label only
    exact(a.effect(hs.TR, 1, sa.TR_RATIO), torch.tensor([0.0, 0.0, -1.0, -0.5, -0.5, -0.5], dtype=torch.float64))
    exact(a.effect(hs.TR, 1, sa.RANKED), torch.tensor([0.5, -0.5, -0.5, 0.0, 0.0, 0.0], dtype=torch.float64))  # ranked: 1, 0, 3
    row = a.effect_table([hs.TR], [1]).loc[(hs.TR, 1)]
    assert (row["TR ratio ablated"], row["TR ratio random"]) == (2 / 6, (1 + 3 / 6) / 2)
    assert math.isclose(row["TR ratio beyond random"], 2 / 6 - 0.75)
    curves = a.curves()
    assert curves.loc[curves["k"] == 0, "tr_ratio"].tolist() == [4 / 6] * 3
    assert curves.loc[(curves["k"] == 1) & (curves["heads"] == "set"), "tr_ratio"].tolist() == [2 / 6]
    with pytest.raises(UsageError, match="Unknown readout"):
        a.hits(plain, "top-5")


M = 100  # prompts of the TR/TL rules' studies: intervals narrow enough to test the minimum effects


def tr_tl_study(tr: tuple[int, int], tl: tuple[int, int], sizes=(2, 3)) -> hs.HeadSetStudy:
    """Every prompt right plainly and under each random draw; with the top TR heads ablated `labelled(M, *tr)`,
    with the top TL heads `labelled(M, *tl)`, at each size."""
    full = labelled(M, M, M)
    runs = {(name, k, d): (labelled(M, *kept) if d is None else full)
            for name, kept in ((hs.TR, tr), (hs.TL, tl)) for k in sizes for d in (None, 0)}
    return fake_study(runs, full, [False] * M, sizes=sizes)


@pytest.mark.parametrize("tr, tl, verdict", [
    ((20, 60), (90, 30), REPLICATES),  # TR ratio 100% -> 20% (TL: 90%); TL ablated ranks the gold label first on 30%
    ((20, 60), (90, 100), PARTLY),  # the recognition branch alone
    ((100, 100), (90, 30), PARTLY),  # the learning branch alone
    ((100, 100), (100, 100), FAILS),
    ((85, 100), (100, 92), FAILS),  # both below their minimum effects (-0.15 of 0.2; -0.08 of 0.1), intervals below 0
    ((20, 60), (25, 30), PARTLY),  # TL ablated drops the TR ratio nearly as much (+0.05 of 0.1): recognition fails
])
def test_tr_tl_roles_reads_each_branch_and_its_minimum(tr, tl, verdict):
    study = tr_tl_study(tr, tl)
    j = claims.CLAIMS["tr_tl_roles"].find(study)
    assert j.verdict == verdict and j.n == M, j.why
    assert math.isclose(j.ours, tr[0] / M - 1)  # the TR ratio beyond random (not ranked): a flipped sign fails here
    assert j.ci[1] < 0 if tr[0] < M else j.ci == (0.0, 0.0)
    assert "plain: TR ratio 100.0%" in j.why
    recognition, learning = task_heads.tr_tl_branches(study, 2)
    assert math.isclose(learning[0], tl[1] / M - 1)


def test_tr_tl_roles_holds_at_one_size_partly():
    runs = tr_tl_study((20, 60), (90, 30), (2,)).ablations["w"]
    other = tr_tl_study((100, 100), (100, 100), (3,)).ablations["w"]
    both = sa.SetAblations("w", runs.runs + other.runs, runs.plain, runs.ablated + other.ablated, runs.zero_shot,
                           runs.shuffled, runs.inputs, runs.false_ids)
    study = replace(tr_tl_study((20, 60), (90, 30)), ablations={"w": both})
    j = claims.CLAIMS["tr_tl_roles"].find(study)
    assert j.verdict == PARTLY and j.why.count("(holds)") == 2 and j.why.count("(does not hold)") == 2


def test_tr_overlaps_induction_reads_the_sets_and_the_rank_correlation():
    """24 heads, induction ranking head 0 first: TR follows it (head 2 last), TL mostly reverses it."""
    ind = torch.arange(24.0).flip(0)
    tr = ind.clone()
    tr[2] = -1.0  # top 3: heads 0, 1, 3
    tl = torch.arange(24.0)
    tl[2], tl[0] = 100.0, 99.0  # top 2: heads 2, 0 (one induction head of the top 2); top 3: 2, 0, 23

    def judge(tr_scores, tl_scores):
        scores = {name: torch.zeros(24) for name in hs.SCORES} | {hs.INDUCTION: ind, hs.TR: tr_scores, hs.TL: tl_scores}
        scores = {name: s.view(6, 4) for name, s in scores.items()}
        return claims.CLAIMS["tr_overlaps_induction"].find(fake_study({}, [True] * N, [False] * N, scores))
    j = judge(tr, tl)
    assert j.verdict == PARTLY and "top-2 induction set shares 2 heads with the TR set, 1 with the TL set" in j.why
    assert "top-3 induction set shares 2 heads with the TR set, 2 with the TL set" in j.why
    assert math.isclose(j.ours, spearman(tr, ind) - spearman(tl, ind)) and j.ours > 1
    assert judge(tr, -ind).verdict == REPLICATES
    assert judge(tl, tr).verdict == FAILS
    assert judge(tr, tr + 0.01 * torch.arange(24.0)).verdict == FAILS  # the same sets: neither shares more


# --- the pieces on a small model ---------------------------------------------------------------


def test_a_study_on_a_small_model(model):
    """End to end at a tiny size: a random model answers nothing right, so the gold-reading scores
    average every SCORE prompt; the ablations of the study are `set_ablations` of its own runs."""
    study = hs.head_set_study(model, ["sentiment_number"], 12, sizes=(2, 3), ks=(1,), n_sequences=2, length=7,
                              n_random=2, batch_size=4)
    assert set(study.scores.scores) == set(hs.SCORES) and study.scores.scored == study.scores.total
    for name, heads in study.sets(3, list(study.ranked)).items():
        assert len(heads) == 3 == len(set(heads)), name
    assert not set(study.sets(3, [hs.exclusive(hs.IN_CONTEXT, hs.FV)])[hs.exclusive(hs.IN_CONTEXT, hs.FV)]) \
        & set(study.ranked[hs.FV][:3])
    curves = study.curves()
    assert set(curves["k"]) == {0, 1, 2, 3}  # the exclusive sets at the sizes alone
    assert set(curves[curves["set"] == hs.exclusive(hs.FV, hs.INDUCTION)]["k"]) == {0, 2, 3}
    pooled = study.pooled()
    assert len(pooled.inputs) == len(study.ablations["sentiment_number"].inputs)
    effect = pooled.effect(hs.FV, 2)
    top, draws = pooled.at(hs.FV, 2)
    exact(effect, top.top1_hits.double() - (draws[0].top1_hits.double() + draws[1].top1_hits.double()) / 2)


def test_a_sets_recency_cells_are_the_orders_read_in_its_heads(model):
    """`signatures` reads each set's cells from one pass of every head: the same as the recency
    family run in the set's heads."""
    every = [(l, h) for l in range(model.arch.n_layers) for h in range(model.arch.n_heads)]
    index = {h: i for i, h in enumerate(every)}
    orders = recency.recency_orders(model, "sentiment_number", every, 6)
    heads = [(2, 1), (0, 3)]
    rows = torch.tensor([True, False, True, True, False, True])
    want = recency.recency_orders(model, "sentiment_number", heads, 6).cells()[rows]
    exact(hs.set_cells(orders, heads, index, rows), want)  # one pass, indexed: the same numbers


# --- what notebook 09 shows ------------------------------------------------------------------


def test_the_head_explorer_draws_the_chosen_heads_scores_and_attention():
    from icl_helpers.studies.label_attention import PromptAttention
    from icl_helpers.viz import widgets

    g = torch.Generator().manual_seed(3)
    scores = {name: torch.rand(3, 4, generator=g) for name in hs.SCORES}
    rows = PromptAttention([list("abcd"), list("abc")], torch.rand(2, 3, 4, 4, generator=g),
                           torch.tensor([[0, 1, 0, 0], [1, 0, 0, 0]]).bool(), torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0]]).bool())
    ex = widgets.head_type_explorer(scores, {n: hs.percentiles(s) for n, s in scores.items()}, rows, (1, 2), ["p0", "p1"], "toy")
    ex.controls["layer"].value, ex.controls["head"].value, ex.controls["prompt"].value = 2, 3, 1
    left, right = ex.shown.axes[:2]
    widths = [bar.get_width() for bar in left.patches]
    assert widths == pytest.approx([float(hs.percentiles(scores[n])[2, 3]) for n in hs.SCORES])
    heights = [bar.get_height() for bar in right.patches][:3]  # prompt 1 has 3 tokens; its label stubs follow
    assert heights == pytest.approx(rows.pattern[1, 2, 3, :3].tolist())
    assert "head 2-3" in ex.shown.get_suptitle() and ex.label.value == "prompt 1: p1"


def test_the_literature_table_shows_each_claim_and_marks_reconstructions(monkeypatch, capsys):
    from icl_helpers.notebook import ENV, notebook_params, verdict_sizes
    from icl_helpers.viz.verdict_table import VerdictTable

    every = {name: (18, 18) for name in (*hs.SCORES, *(hs.exclusive(a, b) for a, b in hs.EXCLUSIONS))}
    findings = head_report.judged(fake_study(runs_for(every), [True] * N, [False] * N))
    table = VerdictTable(findings)
    html = table._repr_html_()
    for f in findings:
        assert f"<b>{f.id}</b>" in html and escape(f.source) in html
    assert html.count("(our reconstruction)") == sum(claims.CLAIMS[f.id].reconstructed for f in findings) > 0
    assert "judged on" not in html and repr(table) == claims.markdown(findings)
    for name in ENV.values():
        monkeypatch.delenv(name, raising=False)
    verdict_sizes(notebook_params(n_prompts=4), "09")
    need = fewest_prompts("fv_over_induction")["word"]
    reading = [f.id for f in findings if claims.CLAIMS[f.id].reads]
    assert capsys.readouterr().out.splitlines() == [
        f"The verdicts at the end need at least {need} word prompts a dataset (N_PROMPTS).",
        f"Note: N_PROMPTS = 4 is too few for {len(reading)} of its {len(findings)} verdicts ({', '.join(reading)}): "
        "they will read 'not tested: too few prompts'."]


def test_the_ablation_mean_pools_every_score_prompt(model, tmp_path, monkeypatch):
    """One mean over the prompts of every set given (both label mappings, every dataset), not a mean of
    the sets' means nor one set's: the sets here hold 2 and 3 prompts."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = fv_prompt_set(model)
    rest = replace(ps, prompts=ps.prompts[2:], directions=ps.directions[2:], positions=ps.positions[2:])
    z, _ = fv.last_outputs(model, ps.texts)  # [5, L, H, dh]
    got = sa.last_position_means(model, [ps.first(2), rest])
    close(got, z.double().mean(0).float(), scale=float(z.abs().max()))
    assert (got - (z[:2].mean(0) + z[2:].mean(0)) / 2).abs().max() > 1e-3  # the mean of the two means differs


def test_a_half_with_no_record_says_so_and_the_eval_half_stands_alone(model):
    """Two records hold one input a class: the SCORE half (half of each class's inputs, rounded down) is
    empty, which is said; a dataset only evaluated on (the sentence datasets) takes its EVAL half alone."""
    from icl_helpers.errors import UsageError
    from icl_helpers.studies import head_types as ht

    with pytest.raises(UsageError, match="2 records of sentiment_number leave its mapped-score half empty"):
        ht.score_and_eval(model, "sentiment_number", 2)
    alone, (_, held) = ht.eval_half(model, "sentiment_number", 12), ht.score_and_eval(model, "sentiment_number", 12)
    assert alone.texts == held.texts and alone.variant == held.variant == "mapped-eval"
    assert len(ht.eval_half(model, "sentiment_number", 2)) == 2
