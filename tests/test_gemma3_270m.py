"""The released Gemma 3 270M (its 4-bit GGUF, dequantised to float32 as it loads) decomposes
exactly, as the tiny random Gemma 3 does: word prompts, and a prompt longer than its
512-token sliding window. Runs only where its weight packages are installed
(`scripts/setup.sh --models`; about a minute and a half to convert on first use).
"""
from __future__ import annotations

import random

import pytest
import torch

from icl_helpers import ICLModel, UsageError, load_model
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import balanced_labels, position_free_labels
from icl_helpers.core.locate import locate
from icl_helpers.model.offline import OFFLINE_MODELS
from tests.hand import assert_exact
from tests.test_attribution import naive_increase
from tests.test_interventions import EXAMPLES, labels_of, last_logits

WORDS = ["love : bar like : bar eight : foo two : foo one :", "happy : bar seven : foo three : foo ten :",
         "a rather long demonstration here : bar fine : bar twelve : foo nine : foo six :"]


def long_prompt(n: int = 200, seed: int = 0) -> str:
    """n word : label demonstrations and a query: about 3 tokens each."""
    rng = random.Random(seed)
    words = "apple river seven happy stone cloud nine green table sunny four dark".split()
    return " ".join(f"{rng.choice(words)} : {rng.choice(['foo', 'bar'])}" for _ in range(n)) + " five :"


@pytest.fixture(scope="module")
def gemma() -> ICLModel:
    try:
        OFFLINE_MODELS["gemma3-270m"].part_paths()
    except UsageError:
        pytest.skip("the Gemma 3 270M weight packages are not installed (scripts/setup.sh --models)")
    return load_model("gemma3-270m", device="cpu")


def test_the_released_model_is_gemma3_with_sliding_windows(gemma):
    cfg = gemma.model.config
    assert (gemma.arch.family, cfg.model_type, cfg.sliding_window, gemma.arch.W_U().shape) == (
        "gemma3", "gemma3_text", 512, (262144, 640))
    assert cfg.layer_types.count("sliding_attention") == 15 and cfg.layer_types.count("full_attention") == 3


@pytest.mark.parametrize("prompts", [WORDS, [long_prompt(), WORDS[0]]], ids=["words", "longer-than-the-window"])
def test_the_decomposition_is_exact(gemma, prompts):
    if len(prompts) == 2:
        assert len(gemma.tokenizer(prompts[0])["input_ids"]) > gemma.model.config.sliding_window
    assert_exact(gemma, prompts)


def test_the_window_binds_on_the_long_prompt(gemma):
    """The last position of a 600-token prompt gives no weight past 512 tokens back in a
    sliding layer, and some in a global one."""
    dec = decompose(gemma, [long_prompt()], record=["pattern"])
    window, kinds = gemma.model.config.sliding_window, gemma.model.config.layer_types
    outside = dec.pattern[0, :, :, : int(dec.last[0]) + 1 - window]  # [L, H, positions before the window]
    for l, kind in enumerate(kinds):
        assert (outside[l].max() == 0) == (kind == "sliding_attention")


def test_located_scores_equal_full_vocabulary_increases(gemma):
    result = locate(gemma, WORDS, progress=False)
    dec = decompose(gemma, WORDS)
    r, heads, w = Readout(gemma.arch), dec.heads(), dec.predictions
    for l in range(gemma.arch.n_layers):
        torch.testing.assert_close(result.head[:, l], naive_increase(r, dec.resid[:, l], heads[:, l], w, dec.scale),
                                   rtol=0, atol=1e-4)
        torch.testing.assert_close(result.attn[:, l], naive_increase(r, dec.resid[:, l], dec.attn[:, l, None], w,
                                                                     dec.scale)[:, 0], rtol=0, atol=1e-4)


def test_label_edits_change_nothing_where_they_should_and_something_where_not(gemma):
    heads = [(5, 0), (11, 2), (17, 3), (3, 1)]  # heads of the three global layers and of a sliding one

    def same(a: torch.Tensor, b: torch.Tensor) -> None:
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4 * float(b.abs().max()))

    balanced = [EXAMPLES[0], EXAMPLES[2]]  # two foo and two bar labels each
    labels = labels_of(gemma, balanced)
    assert labels.class_masks(64).sum(-1).tolist() == [[2, 2], [2, 2]]
    plain = last_logits(gemma, balanced)
    with balanced_labels(gemma, heads, labels):
        same(last_logits(gemma, balanced), plain)
    one_label = ["love : foo one :", "a rather long demonstration here : bar six :"]
    labels = labels_of(gemma, one_label)
    assert labels.valid.sum(1).tolist() == [1, 1]
    plain = last_logits(gemma, one_label)
    with position_free_labels(gemma, heads, labels):  # rotated to its own position
        same(last_logits(gemma, one_label), plain)
    with position_free_labels(gemma, heads, labels, target=torch.tensor([0, 0])):  # rotated to the start
        assert (last_logits(gemma, one_label) - plain).abs().max() > 1e-3
