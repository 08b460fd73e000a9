"""The EMNLP abstract's prediction shift: where a prompt variant of Section 5 (imbalanced, re-ordered)
moves the prediction to the other label, the attention on the label it left falls and on the label it
moved to rises; on the sentence datasets, and our row on the word datasets."""
from __future__ import annotations

from typing import Sequence

import torch

from ...errors import CannotMeasure
from ...stats import bootstrap_ci, mean_ci
from ...studies import label_attention
from ...studies.label_attention import label_shift
from ...studies.runner import prompt_set
from ..evidence import NO_SENTENCE_DATA, VARIANTS, Evidence
from ..judgement import Judgement, Unjudgeable, all_hold, not_tested
from ..rules import Clusters
from ..whose import OURS
from .registry import SENTENCE_ONLY, Claim, register
from .sources import ABSTRACT_ONLY, EMNLP, FLOW, RESTATED

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
    except CannotMeasure as why:
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
               source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", reconstructed=True,
               set_on=f"{RESTATED}; the attention split by whether the prediction moved had not been computed on any model "
                      "(fig8's and fig9's sums over all records had been shown by the earlier reports)",
               unit="change of summed attention on the label the prediction left", find=prediction_shift,
               notebooks=("05", "06"), reads=SENTENCE_ONLY, thresholds=PREDICTION_SHIFT, views=FLOW))


def prediction_shift_word(s: Evidence) -> Judgement:
    return prediction_shift_finding(s, s.word)


register(Claim(id="prediction_shift_word", whose=OURS, claim="Our row: the prediction shift on the word datasets",
               paper="not in the abstract: its claims are on sentence classification",
               rule=f"the prediction_shift rule on the word datasets, each in its top {{K}} heads: {PREDICTION_SHIFT_RULE}",
               source=f"ours, beside {EMNLP}, abstract; {ABSTRACT_ONLY}", reconstructed=True,
               set_on=f"{RESTATED}; the attention split by whether the prediction moved had not been computed on any model",
               unit="change of summed attention on the label the prediction left", find=prediction_shift_word,
               notebooks=("05", "06"), thresholds=PREDICTION_SHIFT, views=FLOW))
