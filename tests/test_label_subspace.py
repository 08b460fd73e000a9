"""Task-recognition and task-learning scores (`studies.label_subspace`): each head's output at the last
position taken by a hook on one prompt at a time, read through the frozen final norm and projected onto
the labels' plane by least squares, equals the batched scores; swapping the labels keeps TR and flips TL."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.studies import label_subspace as ls
from tests.conftest import close, small_model
from tests.test_head_types import fv_prompt_set


@pytest.fixture(scope="module", params=["gpt2", "llama-gqa", "gemma3"])
def model(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def by_hand(m: ICLModel, text: str, gold: int, other: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(TR, TL) [L, H] float64 of one prompt run alone: each head's output o_proj(z with the other heads
    zeroed) - o_proj(0) at the last position, taken by hooks (where a norm ends the attention branch,
    Gemma's, times its gain over the rms of the whole branch there: its scale frozen), normed as the
    final norm would with the full residual's scale frozen (gamma * (a - mean a) / std for LayerNorm,
    gamma * a / rms for RMSNorm), projected onto span(W_U[gold], W_U[other]) by least squares."""
    arch, dh = m.arch, m.arch.d_head
    z, final, branch = {}, {}, {}
    hooks = [arch.attn_out(l).register_forward_pre_hook(lambda mod, args, l=l: z.update({l: args[0][0, -1].clone()}))
             for l in range(arch.n_layers)]
    hooks += [arch.branch_norm("attn", l).register_forward_pre_hook(lambda mod, args, l=l: branch.update({l: args[0][0, -1]}))
              for l in range(arch.n_layers) if arch.branch_norm("attn", l) is not None]
    hooks.append(arch.final_norm().register_forward_pre_hook(lambda mod, args: final.update(f=args[0][0, -1].clone())))
    try:
        m.model(**m.tokenizer(text, return_tensors="pt").to(m.device))
    finally:
        for h in hooks:
            h.remove()
    f, norm = final["f"].double(), arch.final_norm()
    layer_norm = isinstance(norm, torch.nn.LayerNorm)
    sigma = ((f.var(unbiased=False) if layer_norm else f.pow(2).mean()) + arch.norm_eps()).sqrt()
    W = arch.W_U()[[gold, other]].double()  # [2, d]
    tr, tl = torch.empty(arch.n_layers, arch.n_heads, dtype=torch.float64), torch.empty(arch.n_layers, arch.n_heads, dtype=torch.float64)
    for l in range(arch.n_layers):
        out = arch.attn_out(l)
        for h in range(arch.n_heads):
            alone = torch.zeros_like(z[l])
            alone[h * dh:(h + 1) * dh] = z[l][h * dh:(h + 1) * dh]
            a = (out(alone) - out(torch.zeros_like(alone))).double()  # the head's share of the attention output
            if l in branch:
                norm = arch.branch_norm("attn", l)
                a = a * arch.norm_gain(norm).double() / (branch[l].double().pow(2).mean() + arch.norm_eps(norm)).sqrt()
            a = a - a.mean() if layer_norm else a
            u = arch.norm_weight().double() * a / sigma
            coef = torch.linalg.lstsq(W.T, u[:, None]).solution  # [2, 1]
            tr[l, h] = (W.T @ coef).norm()
            tl[l, h] = u @ (W[0] - W[1]) / tr[l, h]
    return tr, tl


def test_scores_equal_each_head_projected_by_hand(model):
    """GPT-2 (LayerNorm: centred), Llama (RMSNorm) and Gemma 3 (a norm ending the attention branch),
    batched (two prompts of different lengths a batch: padding) against each prompt alone."""
    ps = fv_prompt_set(model)
    gold, other = prompt_label_ids(model.tokenizer, ps.prompts)
    got = ls.label_subspace_scores(model, ps, batch_size=2, cache=False)
    with torch.no_grad():
        want = [by_hand(model, t, int(g), int(o)) for t, g, o in zip(ps.texts, gold, other)]
    tr, tl = torch.stack([w[0] for w in want]), torch.stack([w[1] for w in want])
    bound = (model.arch.W_U()[gold] - model.arch.W_U()[other]).double().norm(dim=-1)  # [N]: |TL| at most this
    assert (tl.abs() <= bound[:, None, None] * (1 + 1e-9)).all() and (tl.abs() > 0.5 * bound[:, None, None]).any()
    close(got.tr, tr, scale=float(tr.max()))
    close(got.tl, tl, scale=float(bound.max()), ulps=64)  # a ratio: its rounding grows where TR is small
    assert got.tr.std() > 1e-3 and got.tl.std() > 1e-2  # heads differ: a test of something


def test_batched_equals_each_prompt_alone_and_swapping_the_labels_flips_tl(model):
    ps = fv_prompt_set(model)
    batched = ls.label_subspace_scores(model, ps, batch_size=3, cache=False)
    alone = ls.label_subspace_scores(model, ps, batch_size=1, cache=False)
    close(batched.tr, alone.tr)
    close(batched.tl, alone.tl, scale=float(alone.tl.abs().max()) * 4)
    gold, other = prompt_label_ids(model.tokenizer, ps.prompts)
    W_U = model.arch.W_U()
    rows = torch.arange(len(ps))
    with torch.no_grad():
        dec = next(iter(ls.decomposed(model, ps.first(1), 1)))[1]
        logits = ls.label_logits(model, dec, gold[:1], other[:1])
        swapped = ls.label_logits(model, dec, other[:1], gold[:1])
    close(swapped, logits.flip(-1))
    tr, tl = ls.subspace_scores(logits, W_U[torch.stack([gold, other], 1)[:1]])
    tr2, tl2 = ls.subspace_scores(swapped, W_U[torch.stack([other, gold], 1)[:1]])
    close(tr2, tr)
    close(tl2, -tl, scale=float(tl.abs().max()))
    close(tr[0], batched.tr[rows[0]])  # the cached study's first prompt: the same numbers


def test_subspace_scores_on_a_plane_written_out():
    """Labels along the first two axes (lengths 2 and 1): TR is the length of the vector's first two
    coordinates, TL its gold-minus-other component over TR; a head with no output scores 0, not NaN."""
    W = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # [1, 2, 3]
    u = torch.tensor([[3.0, 4.0, 12.0], [0.0, 0.0, 5.0]])  # two heads' normed outputs
    logits = (u @ W[0].T)[None]  # [1, 2 heads, 2]
    tr, tl = ls.subspace_scores(logits, W)
    close(tr, torch.tensor([[5.0, 0.0]]))
    close(tl, torch.tensor([[(6.0 - 4.0) / 5.0, 0.0]]))
