"""Label-anchor saliency (`studies.label_anchors`, Wang et al. 2023): every head's I = A * dLoss/dA is the
gradient of a ones-multiplier put on each layer's attention probabilities (Wang et al.'s route, here a
second autograd route through the model's own softmax); the three means equal sums over pairs written out
with the label positions read off the tokens; batching changes nothing beyond rounding; and on saliencies
written by hand each part averages its own pairs, of |I|."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.data.positions import LabelPositions
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.studies import label_anchors as la
from icl_helpers.studies.runner import prompt_set_from_texts
from tests.conftest import MIXED_TEXTS, close, small_model
from tests.test_head_types import fv_prompt_set


@pytest.fixture(scope="module", params=["gpt2", "llama-gqa", "qwen2", "gemma3"])
def model(request, gpt2_tokenizer) -> ICLModel:
    """The small model in float64. A gradient's backward subtracts nearly equal terms (the norms' backward
    takes out the mean): in float32 two routes differ by up to 72 ulps of a layer's largest |I| in these
    models, where the terms, not the result, set the rounding. In float64 every route's rounding stays far
    below `close`'s float32 tolerance: the results differ by their float32 rounding (the study keeps its means
    in float32; Llama's, Qwen's and Gemma's softmax works in float32), under 1 ulp seen."""
    return ICLModel(small_model(request.param).double(), gpt2_tokenizer, name=request.param)


def multiplier_gradients(m: ICLModel, text: str, gold: int, monkeypatch) -> list[torch.Tensor]:
    """Per layer, [H, T, T] float64: dLoss/dM at M = 1 for a ones tensor M multiplying the layer's softmax
    output (the attention probabilities), Loss = -log p(gold) at the last position of the model's own
    logits, the prompt run alone."""
    ones: list[torch.Tensor] = []
    softmax = torch.nn.functional.softmax

    def times_ones(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        probs = softmax(x, *args, **kwargs)
        ones.append(torch.ones_like(probs, requires_grad=True))
        return probs * ones[-1]

    with monkeypatch.context() as patch, torch.enable_grad():
        patch.setattr(torch.nn.functional, "softmax", times_ones)
        logits = m.model(**m.tokenizer(text, return_tensors="pt").to(m.device)).logits[0, -1]
        grads = torch.autograd.grad(-logits.log_softmax(-1)[gold], ones)
    assert len(ones) == m.arch.n_layers  # one softmax a layer: the attention's, and nothing else
    return [g[0].double() for g in grads]


def means_by_hand(saliency: torch.Tensor, labels: list[int], q: int) -> list[float]:
    """[S_wp, S_pq, S_ww] of one head's saliency [T, T] (or a layer's), the pairs listed one by one."""
    wp = {(p, j) for p in labels for j in range(p)}
    pq = {(q, p) for p in labels}
    ww = {(t, j) for t in range(q + 1) for j in range(t + 1)} - wp - pq
    return [sum(abs(float(saliency[t, j])) for t, j in pairs) / len(pairs) for pairs in (wp, pq, ww)]


def test_saliency_is_the_gradient_of_a_ones_multiplier_and_the_means_sum_their_pairs(model, monkeypatch):
    """Batched (three prompts of 4, 3 and 2 labels, different lengths: padding) against each prompt run
    alone with the multiplier route, its label positions the tokens that are a label word and q its last
    token. Catches every mutation of tests/README.md's LA rows: S_wp and S_pq swapped, the absolute value
    dropped, the wrong label positions (the true ones only, one token late), the label's own diagonal in
    S_wp, the padding's pairs in S_ww, the loss at the padding's last token or of the other label, and the
    layer's heads summed outside the absolute value (LA1-LA9)."""
    ps = prompt_set_from_texts(model, MIXED_TEXTS)
    gold, other = prompt_label_ids(model.tokenizer, ps.prompts)
    got = la.label_anchors(model, ps, batch_size=3, cache=False)
    alone = la.saliencies(model, ps.texts[:1], gold[:1])
    heads, layers = [], []
    for i, text in enumerate(ps.texts):
        want = multiplier_gradients(model, text, int(gold[i]), monkeypatch)
        if i == 0:
            for l in range(model.arch.n_layers):
                close(alone[l][0], want[l])
                assert (want[l] < 0).any() and (want[l] > 0).any()  # signed: the absolute value matters
        ids = model.tokenizer(text)["input_ids"]
        labels, q = [t for t, token in enumerate(ids) if token in (gold[i], other[i])], len(ids) - 1
        heads.append([[means_by_hand(s, labels, q) for s in w] for w in want])
        layers.append([means_by_hand(w.sum(0), labels, q) for w in want])
    heads, layers = torch.tensor(heads), torch.tensor(layers)  # [N, L, H, 3], [N, L, 3]
    for k, part in enumerate(la.PARTS):
        close(getattr(got, f"s_{part}"), heads[..., k])
        close(getattr(got, f"layer_{part}"), layers[..., k])
    assert got.s_pq.std() > 1e-3 and got.s_wp[:, :-1].std() > 1e-4  # heads differ: a test of something


def test_batched_equals_each_prompt_alone(model):
    """Five prompts of different lengths in batches of three (padding) against one at a time. Catches a
    mean over the padding's pairs and the loss read at the padding's last token (LA6, LA7)."""
    ps = fv_prompt_set(model)
    batched = la.label_anchors(model, ps, batch_size=3, cache=False)
    alone = la.label_anchors(model, ps, batch_size=1, cache=False)
    for name in ("s_wp", "s_pq", "s_ww", "layer_wp", "layer_pq", "layer_ww"):
        close(getattr(batched, name), getattr(alone, name))
    close(batched.mean("pq"), alone.s_pq.mean(0))


def test_each_part_averages_its_own_pairs_of_a_saliency_written_out():
    """Two prompts T = 7 tokens long as a right-padded batch: labels at 2 (true) and 5 (false), last token 6;
    a label at 3 (true), last token 4, then two padding tokens whose saliency is huge. I(t, j) alternates in
    sign and grows with t and j, so that every pair counts differently. Catches: S_wp and S_pq swapped,
    the absolute value dropped, the false labels left out, the labels one token late, the label's own
    diagonal in S_wp, the padding's pairs in S_ww (LA1-LA6)."""
    T, H = 7, 2
    t, j, h = torch.arange(T)[:, None], torch.arange(T)[None, :], torch.arange(H)[:, None, None]
    saliency = ((-1.0) ** (t + j + h) * (1 + 7 * t + j) * (h + 1)).tril().expand(2, H, T, T).clone()
    saliency[1, :, 5:], saliency[1, :, :, 5:] = 1e6, 1e6  # the second prompt's padding
    positions = LabelPositions(labels=torch.tensor([[2, 5], [3, -1]]), is_true=torch.tensor([[True, False], [True, False]]),
                               demos=torch.tensor([[[0, 1], [3, 4]], [[0, 2], [-1, -1]]]), last=torch.tensor([6, 4]))
    got = la.part_means(saliency, la.pair_masks(positions, T))  # [2, H, 3]
    want = torch.tensor([[means_by_hand(saliency[b, k], labels, q) for k in range(H)]
                         for b, (labels, q) in enumerate([([2, 5], 6), ([3], 4)])])
    close(got, want)
    close(want[0, 0, :2], [(15 + 16 + 36 + 37 + 38 + 39 + 40) / 7, (45 + 48) / 2])  # |1 + 7t + j|: (2, 0) ... (6, 5)
