"""Section 5, Figs. 8-11: imbalanced and re-ordered prompts move the attention on the labels; our
control, distance at equal truth; our extension to the sentence datasets; and the EMNLP abstract's
prediction shift: where a prompt variant moves the prediction to the other label, the attention
on the label it left falls and on the label it moved to rises."""
from __future__ import annotations

from typing import Sequence

import torch

from ...core.heads import Head
from ...errors import Unjudgeable
from ...stats import bootstrap_ci, mean_ci
from ...studies import label_attention
from ...studies.label_attention import label_shift
from ...studies.recency import Effects
from ...studies.runner import PromptSet, prompt_set
from ..evidence import FIRST, NO_SENTENCE_DATA, WORD, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold, not_tested, together
from ..rules import Clusters, judge_at_least
from .claim import ABSTRACT_ONLY, EMNLP, FLOW, ISSUE_44, ISSUE_57, SENTENCE_ONLY, V1, Claim, register


def _change(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]):
    """Per prompt, the mean change over heads of true- and of false-label attention, [N] each;
    before and after are (true, false) [N, S] on the same records."""
    return (after[0] - before[0]).mean(1), (after[1] - before[1]).mean(1)


VARIANTS = ("imbalanced", "reordered")  # Figs. 8 and 10; Figs. 9 and 11

FIG8 = {"min_change": 0.01}


def judge_fig8(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               per_label: tuple[torch.Tensor, torch.Tensor], clusters: Clusters = None) -> Judgement:
    """Balanced (true, false) [N, S] against imbalanced prompts of the same records;
    per_label: the mean attention a true-label position gets, [N, S], balanced then imbalanced
    (described: our row fig10_per_label judges it in the shared heads)."""
    dt, df = _change(before, after)
    ci_t, ci_f = mean_ci(dt, clusters=clusters), mean_ci(df, clusters=clusters)
    least = FIG8["min_change"]
    verdict = all_hold(ci_t[1] < 0 and float(dt.mean()) <= -least, ci_f[0] > 0 and float(df.mean()) >= least)
    return Judgement(float(dt.mean()), ci_t, len(dt), verdict,
                     f"ours: mean change of summed true-label attention; false-label change {float(df.mean()):+.3f} "
                     f"(CI {ci_f[0]:+.3f} to {ci_f[1]:+.3f}); per true-label position {float(per_label[0].mean()):.3f} "
                     f"-> {float(per_label[1].mean()):.3f}: the sum covers one true label instead of two")


FIG9 = {"heads": 0.9, "min_change": 0.01}


def judge_fig9(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               clusters: Clusters = None) -> Judgement:
    """Balanced (true, false) [N, S] against re-ordered prompts of the same records."""
    dt, _ = _change(before, after)
    ci = mean_ci(dt, clusters=clusters)
    least = FIG9["min_change"]
    heads = (after[0] - before[0]).mean(0)  # [S]: each head's mean change
    down = int((heads <= -least).sum())
    verdict = all_hold(ci[1] < 0 and float(dt.mean()) <= -least, down >= FIG9["heads"] * len(heads))
    return Judgement(float(dt.mean()), ci, len(dt), verdict,
                     f"ours: mean change of summed true-label attention; it drops by at least {least} in "
                     f"{down}/{len(heads)} heads")


def variant_finding(s: Evidence, variant: str, datasets: Sequence[str]) -> Judgement:
    """The fig8 (imbalanced) or fig9 (re-ordered) judgement over `datasets` pooled, each in its own heads."""
    summed: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"balanced": [], variant: []}
    per_label: dict[str, list[torch.Tensor]] = {"balanced": [], variant: []}
    for d in datasets:
        rows = s.rows(d)
        for v in summed:
            ps = prompt_set(s.m, d, v, s.size(d), s.seed, s.data_dir, s.setting)
            true, false = label_attention.attention_on_labels(s.m, ps).at(s.heads(d))
            summed[v].append((true[rows], false[rows]))
            per_label[v].append(label_attention.true_label_weight(s.m, ps, s.heads(d))[rows])
    before, after = (tuple(torch.cat(x) for x in zip(*summed[v])) for v in summed)
    clusters = s.clusters(datasets)
    if variant == "imbalanced":
        return judge_fig8(before, after, tuple(torch.cat(per_label[v]) for v in per_label), clusters)
    return judge_fig9(before, after, clusters)


def fig8(s: Evidence) -> Judgement:
    return variant_finding(s, "imbalanced", WORD)


register(Claim(id="fig8", claim="Imbalanced prompts: summed attention on true labels drops, on false labels rises (Fig. 8)",
               paper="true down, false up (heads 19-11 and 20-11; 'other in-context heads have similar trends')",
               rule="replicates: the mean change of summed true-label attention has its 95% CI below 0 and is at most "
                    "-{min_change}, and that of false-label attention has its CI above 0 and is at least {min_change}; partly: "
                    "one of the two, with its minimum; does not replicate: neither",
               source=f"{V1}, Section 5.1, Fig. 8: 'The sum of attention weights on true labels decrease on the imbalanced "
                      "dataset. On the contrary, the attention weights on false labels increase' (l. 540)",
               set_on=ISSUE_44, unit="change of summed true-label attention", find=fig8, notebooks=("05",), thresholds=FIG8, views=FLOW))


def fig9(s: Evidence) -> Judgement:
    return variant_finding(s, "reordered", WORD)


register(Claim(id="fig9", claim="Re-ordered prompts: summed attention on true labels drops in the in-context heads (Fig. 9)",
               paper="much smaller on re-ordered prompts (heads 19-11 and 20-11; 'other heads have similar trends')",
               rule="replicates: the mean change of true-label attention has its 95% CI below 0 and is at most -{min_change}, "
                    "and each head's mean change is at most -{min_change} in >= {heads:.0%} of heads; partly: one of the two; "
                    "does not replicate: neither",
               source=f"{V1}, Section 5.2, Fig. 9: 'The sum of attention weights on re-order dataset are much smaller than "
                      "those on the origin dataset' (l. 640)",
               set_on=f"{ISSUE_57}; its data had been shown by the earlier reports (the heads then counted without a minimum)",
               unit="change of summed true-label attention", find=fig9, notebooks=("06",), thresholds=FIG9, views=FLOW))


FIG9_CONTROL = {"min_attention": 0.01}  # attention a label position gets


def judge_distance_control(effects: Effects) -> Judgement:
    """The recency family's distance effect: attention a label position gets for being nearest the
    input, at equal truth, judged by its size (`rules.judge_at_least`, FIG9_CONTROL's minimum)."""
    return judge_at_least(effects.distance, effects.distance_ci, effects.n, effects.text(), FIG9_CONTROL["min_attention"])


def fig9_control(s: Evidence) -> Judgement:
    return judge_distance_control(s.effects(tuple(WORD)))


register(Claim(id="fig9_control", claim="Our control: a label gets more attention for being nearest the input, at equal "
                                        "truth (the recency family)",
               paper="the paper's account of the order effect: labels also take in adjacent tokens (l. 549-551)",
               rule="replicates: the distance effect (nearest minus farthest label position, at equal truth) is at least "
                    "{min_attention} with its 95% CI above 0; partly: it is at least {min_attention}, its CI reaching 0; "
                    "does not replicate: below {min_attention}",
               source=f"ours, beside {V1} Section 5.2", set_on=f"{ISSUE_57}; its data had been shown by the earlier reports",
               unit="attention a label position: distance effect", find=fig9_control, notebooks=("06",),
               thresholds=FIG9_CONTROL, views=FLOW))


FIG10 = {"heads": 2 / 3, "min_change": 0.01}  # the text: down in most shared heads, up in one (21-19)

FIG11 = {"heads": 0.9, "min_change": 0.01}  # the text: down in all shared heads


def judge_per_head_drop(before: torch.Tensor, after: torch.Tensor, heads: Sequence[Head], rule: dict[str, float],
                        which: str, clusters: Clusters = None) -> Judgement:
    """Figs. 10 and 11: before, after: [N, S] a true-label attention measure (`which` names it and
    the prompts) in each of S heads on the same records; replicates where it drops (CI of the change
    below 0, the change at most -rule["min_change"]) in at least rule["heads"] of the heads; partly
    where its mean over the heads drops so."""
    change = after - before  # [N, S]
    cis = [mean_ci(c, clusters=clusters) for c in change.T]
    least = rule["min_change"]
    down = [(l, h) for (l, h), c, ci in zip(heads, change.T, cis) if ci[1] < 0 and float(c.mean()) <= -least]
    up = [(l, h) for (l, h), c, ci in zip(heads, change.T, cis) if ci[0] > 0 and float(c.mean()) >= least]
    mean, pooled = float(change.mean()), mean_ci(change.mean(1), clusters=clusters)
    verdict = (REPLICATES if len(down) >= rule["heads"] * len(heads) else
               PARTLY if pooled[1] < 0 and mean <= -least else FAILS)
    name = lambda hs: ", ".join(f"{l}-{h}" for l, h in hs) or "none"  # noqa: E731
    return Judgement(mean, pooled, len(change), verdict,
                     f"ours: mean change over the {len(heads)} heads of {which}; down in {len(down)} ({name(down)}), "
                     f"up in {len(up)} ({name(up)}): each head's change at least {least} with its 95% CI clear of 0")


def shared_head_finding(s: Evidence, variant: str, rule: dict[str, float], per_label: bool = False) -> Judgement:
    """Figs. 10 and 11: on FIRST, in the heads both word datasets rank top (the paper's 'rank top20 on
    both sentiment/number dataset and animal/country dataset'), balanced against the variant, head by
    head: the summed attention on the true labels (Fig. 8's measure), or per_label the attention a
    true-label position gets."""
    heads, which = s.word_shared()

    def measure(ps: PromptSet) -> torch.Tensor:  # [N, S]
        if per_label:
            return label_attention.true_label_weight(s.m, ps, heads)
        return label_attention.attention_on_labels(s.m, ps).at(heads)[0]
    weight = [measure(prompt_set(s.m, FIRST, v, s.size(FIRST), s.seed, s.data_dir, s.setting))[s.rows(FIRST)]
              for v in ("balanced", variant)]
    what = "the attention a true-label position gets" if per_label else "the summed attention on the true labels"
    return judge_per_head_drop(*weight, heads, rule, f"{what} ({which}, balanced -> {variant})", s.clusters([FIRST]))


def fig10(s: Evidence) -> Judgement:
    return shared_head_finding(s, "imbalanced", FIG10)


SHARED_HEADS_RULE = ("replicates: it drops (the change's 95% CI below 0, the change at most -{min_change}) in >= {heads:.0%} "
                     "of the heads; partly: its mean change over the heads has its CI below 0 and is at most -{min_change}; "
                     "does not replicate: otherwise")

register(Claim(id="fig10", claim="Imbalanced prompts: the attention on the true labels drops in most heads both word "
                                 "datasets rank top, rises in few (Fig. 10)",
               paper="heads of layers 18-29 in both word datasets' top 20, on sentiment/number: up only in 21-19; down 'a lot' "
                     "in 19-11, 20-11, 22-0, 24-13, 27-16",
               rule="in the heads in both word datasets' top {K}, on sentiment/number, the summed attention on the true labels: "
                    f"{SHARED_HEADS_RULE}. The text does not say whether 'the true labels' attention weights' (l. 644) are "
                    "their sum or each label's; the headline reads the sum, Fig. 8's measure (l. 540), which this section "
                    "follows: its softmax argument (l. 540: with a true demonstration removed, the other labels get more) "
                    "predicts the drop the text reports for the sum and a rise for each remaining true label. The per-label "
                    "reading is the next row",
               source=f"{V1}, Section 5.2, Fig. 10: 'the average attention weight of imbalanced dataset only increases on head "
                      "21-19. In other in-context heads ... the attention weights decrease a lot' (l. 644, 649)",
               set_on=f"{ISSUE_57}; the summed measure in these heads had not been computed on any model (fig8's sum in "
                      "each dataset's top heads had been shown by the earlier reports)",
               unit="change of summed true-label attention", find=fig10, notebooks=("05",), thresholds=FIG10, views=FLOW))


def fig10_per_label(s: Evidence) -> Judgement:
    return shared_head_finding(s, "imbalanced", FIG10, per_label=True)


register(Claim(id="fig10_per_label", claim="Our row: imbalanced prompts, the attention a true-label position gets, in the "
                                           "heads both word datasets rank top (Fig. 10 read per label)",
               paper="as fig10, if 'the true labels' attention weights' (l. 644) are each label's: up only in 21-19; down 'a "
                     "lot' in 19-11, 20-11, 22-0, 24-13, 27-16",
               rule="the fig10 rule on the attention a true-label position gets (the summed true-label attention divided by "
                    f"the prompt's true labels: one fewer on the imbalanced prompt): {SHARED_HEADS_RULE}",
               source=f"ours, beside {V1} Fig. 10 (l. 644)",
               set_on=f"{ISSUE_57}; its data had been shown by the earlier reports (fig10's headline then)",
               unit="change of a true-label position's attention", find=fig10_per_label, notebooks=("05",), thresholds=FIG10,
               views=FLOW))


def fig11(s: Evidence) -> Judgement:
    return shared_head_finding(s, "reordered", FIG11)


register(Claim(id="fig11", claim="Re-ordered prompts: the attention on the true labels drops in every head both word "
                                 "datasets rank top (Fig. 11)",
               paper="drops in all of them, most in 21-19 and 22-0",
               rule=f"the fig10 measure (the summed attention on the true labels) on re-ordered prompts: {SHARED_HEADS_RULE}. "
                    "A re-ordered prompt keeps its true labels, so the attention a true-label position gets is this sum over "
                    "the same count on both prompts: the two readings move together, and need no row apart",
               source=f"{V1}, Section 5.2, Fig. 11: 'On re-order dataset, the attention weights on all incontext heads drop, "
                      "especially in 21-19 and 22-0' (l. 644, 654)",
               set_on=f"{ISSUE_57}; the summed measure in these heads had not been computed on any model, but the same change "
                      "over the count of true labels had been shown by the earlier reports",
               unit="change of summed true-label attention", find=fig11, notebooks=("06",), thresholds=FIG11, views=FLOW))


def judge_fig8_9_sentences(imbalanced: Judgement, reordered: Judgement) -> Judgement:
    """The fig8 and fig9 judgements made on the sentence datasets."""
    return Judgement(f"imbalanced: {imbalanced.verdict}; re-ordered: {reordered.verdict}", None, imbalanced.n,
                     together([imbalanced, reordered]), f"imbalanced: {imbalanced.why}. Re-ordered: {reordered.why}")


def fig8_9_sentences(s: Evidence) -> Judgement:
    if not s.sentence:
        return not_tested(NO_SENTENCE_DATA)
    return judge_fig8_9_sentences(*(variant_finding(s, v, s.sentence) for v in VARIANTS))


register(Claim(id="fig8_9_sentences", claim="Our extension: Figs. 8 and 9 on the sentence datasets",
               paper="not in the paper: its Figs. 8-11 are on sentiment/number",
               rule="the fig8 and fig9 rules, each with its minimum effects, on the sentence datasets pooled: replicates if "
                    "both replicate; does not replicate if neither does at least partly; partly otherwise",
               source=f"ours, beside {V1} Sections 5.1 and 5.2",
               set_on=f"{ISSUE_57}; its data had been shown by the earlier reports (fig9's part then counted the heads "
                      "without a minimum)",
               unit="verdict of each prompt variant", find=fig8_9_sentences, notebooks=("05", "06"), reads=SENTENCE_ONLY,
               views=FLOW))


PREDICTION_SHIFT = {"min_change": 0.01}


def judge_prediction_shift(change: torch.Tensor, moved: torch.Tensor, clusters: Clusters = None, which: str = ""
                           ) -> Judgement:
    """change: [M, 2] per (record, prompt variant) whose balanced and variant prompts both predict a
    label word, the change (balanced -> variant) of the summed attention, mean over the in-context
    heads, on the positions of the label the balanced prompt predicts, then on the other label's
    (`label_shift`); moved: [M] bool the variant predicts the other label. Replicates where, on
    the moved pairs, the first falls (CI below 0, at most -min_change) and the second rises (CI
    above 0, at least min_change); partly: one of the two. The unmoved pairs are shown beside."""
    least = PREDICTION_SHIFT["min_change"]
    inputs = lambda rows: None if clusters is None else clusters[rows]  # noqa: E731
    left, arrived = (float(c.mean()) for c in change[moved].T)
    toward = change[:, 1] - change[:, 0]  # [M]: toward the other label
    try:
        ci_left, ci_arrived = (mean_ci(c, clusters=inputs(moved)) for c in change[moved].T)
        contrast = bootstrap_ci([toward[moved], toward[~moved]], lambda a, b: a.double().mean() - b.double().mean(),
                                clusters=[inputs(moved), inputs(~moved)])
    except Unjudgeable as why:
        raise Unjudgeable(f"{why} (of {len(moved)} pairs, {int(moved.sum())} moved)") from why
    verdict = all_hold(ci_left[1] < 0 and left <= -least, ci_arrived[0] > 0 and arrived >= least)
    stay = change[~moved].mean(0)
    gap = float(toward[moved].mean() - toward[~moved].mean())
    return Judgement(left, ci_left, int(moved.sum()), verdict,
                     f"ours: {which}. Where the prediction moved ({int(moved.sum())} of {len(moved)} pairs), the summed "
                     f"attention on the label it left changed by {left:+.3f}, on the label it moved to by {arrived:+.3f} "
                     f"(CI {ci_arrived[0]:+.3f} to {ci_arrived[1]:+.3f}); where it did not move, on the predicted label "
                     f"{float(stay[0]):+.3f}, on the other {float(stay[1]):+.3f}; the change toward the other label, moved "
                     f"minus unmoved pairs, {gap:+.3f} (CI {contrast[0]:+.3f} to {contrast[1]:+.3f})")


def label_moves(s: Evidence, dataset: str, variant: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The dataset's judged records, balanced against `variant`, in its in-context heads: ([M, 2]
    `label_shift` of the summed label attention (mean over the heads), [M] bool the variant's
    prediction names the other label, of the M records whose two predictions both name a label;
    [R] bool which of the R judged records those are)."""
    rows, heads = s.rows(dataset), s.heads(dataset)
    summed, predicted = [], []
    for v in ("balanced", variant):
        ps = prompt_set(s.m, dataset, v, s.size(dataset), s.seed, s.data_dir, s.setting)
        summed.append(torch.stack(label_attention.attention_on_labels(s.m, ps).at(heads), -1).mean(1)[rows])  # [R, 2]
        predicted.append(label_attention.predicted_labels(s.m, ps)[rows])
    named = (predicted[0] >= 0) & (predicted[1] >= 0)
    change = label_shift(summed[0][named], summed[1][named], predicted[0][named])
    return change, predicted[1][named] != predicted[0][named], named


def prediction_shift_finding(s: Evidence, datasets: Sequence[str]) -> Judgement:
    """The prediction-shift rule on the (record, variant) pairs of `datasets`, imbalanced and
    re-ordered, each dataset in its own heads; a record's two pairs share its input's cluster."""
    inputs = s.clusters(datasets).split([int(s.rows(d).sum()) for d in datasets])
    change, moved, clusters, counts = [], [], [], []
    for v in VARIANTS:
        parts = [label_moves(s, d, v) for d in datasets]
        change += [c for c, _, _ in parts]
        moved += [m for _, m, _ in parts]
        clusters += [ids[named] for ids, (_, _, named) in zip(inputs, parts)]
        counts.append(f"{v}: {sum(int(m.sum()) for _, m, _ in parts)} of {sum(len(m) for _, m, _ in parts)} moved")
    which = f"{', '.join(datasets)}, each in its in-context heads; pairs whose two prompts both predict a label: " + \
        ", ".join(counts)
    return judge_prediction_shift(torch.cat(change), torch.cat(moved), torch.cat(clusters), which)


def prediction_shift(s: Evidence) -> Judgement:
    if not s.sentence:
        return not_tested(NO_SENTENCE_DATA)
    return prediction_shift_finding(s, s.sentence)


PREDICTION_SHIFT_RULE = ("the (record, variant) pairs whose balanced prompt and imbalanced or re-ordered prompt both predict a "
                         "label word; where the prediction moved to the other label, the change of the summed attention "
                         "(mean over the heads) on the label it left and on the label it moved to: replicates: the first "
                         "has its 95% CI below 0 and is at most -{min_change}, and the second has its CI above 0 and is at "
                         "least {min_change}; partly: one of the two; does not replicate: neither")

register(Claim(id="prediction_shift", claim="The prediction shift from 'foo' to 'bar' is due to the in-context heads' "
                                            "attention falling at 'foo' positions and rising at 'bar' positions (EMNLP "
                                            "abstract)",
               paper="no number; the abstract's sentence is not at hand word for word: its wording here is reconstructed",
               rule=f"on the sentence datasets, each in its top {{K}} heads, {PREDICTION_SHIFT_RULE}. The pairs whose "
                    "prediction did not move are shown beside, their change toward the other label against the moved "
                    "pairs'. The rule judges the attention moving with the prediction, not the cause the abstract names; "
                    "the prompt variants that move the predictions are ours (the abstract does not say what moved them)",
               source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}",
               set_on=f"{ISSUE_57}; the attention split by whether the prediction moved had not been computed on any model "
                      "(fig8's and fig9's sums over all records had been shown by the earlier reports)",
               unit="change of summed attention on the label the prediction left", find=prediction_shift,
               notebooks=("05", "06"), reads=SENTENCE_ONLY, thresholds=PREDICTION_SHIFT, views=FLOW))


def prediction_shift_word(s: Evidence) -> Judgement:
    return prediction_shift_finding(s, WORD)


register(Claim(id="prediction_shift_word", claim="Our row: the prediction shift on the word datasets",
               paper="not in the abstract: its claims are on sentence classification",
               rule=f"the prediction_shift rule on the word datasets, each in its top {{K}} heads: {PREDICTION_SHIFT_RULE}",
               source=f"ours, beside {EMNLP}, abstract; {ABSTRACT_ONLY}",
               set_on=f"{ISSUE_57}; the attention split by whether the prediction moved had not been computed on any model",
               unit="change of summed attention on the label the prediction left", find=prediction_shift_word,
               notebooks=("05", "06"), thresholds=PREDICTION_SHIFT, views=FLOW))
