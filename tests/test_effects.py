"""Biased labels, label mixing, and accuracy under a per-batch intervention."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.accuracy import accuracy, prompt_label_ids
from icl_helpers.effects import (
    ablation_curves,
    intervened_accuracy,
    majority_labels,
    mixed_label_prompts,
    nearest_labels,
)
from icl_helpers.interventions import balanced_labels
from icl_helpers.prompts import VARIANTS, Record, build_prompt
from tests.conftest import small_model

RECORDS = [
    Record("one", "number", "sentiment", ("eight", "two"), ("love", "like")),
    Record("happy", "sentiment", "number", ("glad", "fine"), ("six", "ten")),
    Record("nine", "number", "sentiment", ("four", "five"), ("sad", "good")),
    Record("calm", "sentiment", "number", ("joy", "kind"), ("three", "seven")),
]


def test_biased_labels_of_the_variants():
    imbalanced = build_prompt(RECORDS[0], VARIANTS["imbalanced"])
    reordered = build_prompt(RECORDS[0], VARIANTS["reordered"])
    balanced = build_prompt(RECORDS[0])
    assert majority_labels([imbalanced, balanced]) == ["bar", None]
    assert nearest_labels([reordered, balanced]) == ["bar", "foo"]


def test_mixed_labels_swap_every_other_pair():
    prompts = mixed_label_prompts(RECORDS, VARIANTS["reordered"])
    assert [p.true_label for p in prompts] == ["foo", "foo", "bar", "bar"]
    assert prompts[2].text == "four : bar five : bar sad : foo good : foo nine :"


@pytest.fixture(scope="module")
def llama(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("llama-gqa"), gpt2_tokenizer, name="llama-gqa")


def test_accuracy_under_an_identity_intervention_is_the_plain_accuracy(llama):
    prompts = mixed_label_prompts(RECORDS)
    plain = accuracy(llama, [p.text for p in prompts], *prompt_label_ids(llama.tokenizer, prompts))
    heads = [(2, 1), (1, 3)]
    edited = intervened_accuracy(llama, prompts, lambda labels: balanced_labels(llama, heads, labels), batch_size=3)
    torch.testing.assert_close(edited.true_logit, plain.true_logit, rtol=0, atol=1e-4)
    assert torch.equal(edited.top, plain.top)


def test_ablation_curves_rows(llama):
    prompts = mixed_label_prompts(RECORDS[:2])
    curves = ablation_curves(llama, prompts, [(2, 1), (1, 3)], ks=[1, 2], n_random=2)
    assert len(curves) == 3 * 3 and set(curves["k"]) == {0, 1, 2}
    assert curves.groupby("k")["accuracy"].nunique()[0] == 1  # k = 0 is the plain model for every set
