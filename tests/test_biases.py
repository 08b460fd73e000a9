"""Biased labels and bias counts."""
import math

import torch

from icl_helpers.data.prompts import VARIANTS, build_prompt, majority_labels, nearest_labels
from icl_helpers.studies.biases import BiasEffect, bias_count, relative_reduction
from tests.test_ablation import RECORDS


def test_biased_labels_of_the_variants():
    imbalanced = build_prompt(RECORDS[0], VARIANTS["imbalanced"])
    reordered = build_prompt(RECORDS[0], VARIANTS["reordered"])
    balanced = build_prompt(RECORDS[0])
    assert majority_labels([imbalanced, balanced]) == ["bar", None]
    assert nearest_labels([reordered, balanced]) == ["bar", "foo"]


def test_bias_count_and_reduction():
    truth = torch.tensor([1, 1, 1, 1, 2])
    biased = torch.tensor([2, 2, 2, -1, 2])  # prompt 3 has no biased label, prompt 4's is right
    predicted = torch.tensor([2, 7, 1, 2, 1])
    count = bias_count(predicted, truth, biased)
    assert (count.exposed, count.biased, count.wrong) == (3, 1, 2)
    assert count.share_of_wrong == 0.5
    after = bias_count(torch.tensor([1, 7, 1, 2, 1]), truth, biased)
    assert relative_reduction(count, after) == 1.0
    assert math.isnan(relative_reduction(after, count))  # no bias before: nothing to reduce, not a ZeroDivisionError
    effect = BiasEffect(after, count, (0.0, 0.0), (0.0, 0.0))
    assert "a relative reduction of nothing (no prompt showed the bias plainly)" in effect.summary("recency", paper=0.17)
