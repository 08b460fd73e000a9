"""Bias counts: exposed prompts, biased and wrong predictions, relative reduction."""
from __future__ import annotations

import torch

from icl_helpers.bias import bias_count, relative_reduction


def test_bias_count_and_reduction():
    truth = torch.tensor([1, 1, 1, 1, 2])
    biased = torch.tensor([2, 2, 2, -1, 2])  # prompt 3 has no biased label, prompt 4's is right
    predicted = torch.tensor([2, 7, 1, 2, 1])
    count = bias_count(predicted, truth, biased)
    assert (count.exposed, count.biased, count.wrong) == (3, 1, 2)
    assert count.share_of_wrong == 0.5
    after = bias_count(torch.tensor([1, 7, 1, 2, 1]), truth, biased)
    assert relative_reduction(count, after) == 1.0
