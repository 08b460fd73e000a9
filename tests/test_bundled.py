"""The bundled SmolLM2-135M: exact decomposition on the paper's example prompt."""
from __future__ import annotations

import torch

from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate
from tests.conftest import close

EXAMPLE = "love : bar like : bar eight : foo two : foo one :"


def test_bundled_model_decomposes_exactly(smollm):
    arch = smollm.arch
    assert (arch.n_layers, arch.n_heads, arch.n_kv_heads, arch.d_model) == (30, 9, 3, 576)
    dec = decompose(smollm, [EXAMPLE], record=["neurons"])
    terms = dec.resid[:, 0].abs() + dec.attn.abs().sum(1) + dec.ffn.abs().sum(1)  # the scales: sums of |terms|
    close(dec.resid[:, 0] + dec.attn.sum(1) + dec.ffn.sum(1), dec.resid[:, -1], scale=float(terms.max()))
    heads = dec.heads()
    close(heads.sum(2), dec.attn, scale=float(heads.abs().sum(2).max()))  # no output bias in Llama
    W_out = torch.stack([arch.W_out(l) for l in range(30)])
    neurons = torch.einsum("blk,lkd->bld", dec.neurons.abs(), W_out.abs())
    close(torch.einsum("blk,lkd->bld", dec.neurons, W_out), dec.ffn, scale=float(neurons.max()))
    readout = Readout(arch)
    logits = (dec.resid[:, -1].abs() @ readout.G.abs().T) / dec.scale[:, None]
    close(readout.logits(dec.resid[:, -1], dec.scale), dec.logits, scale=float(logits.max()))  # RMSNorm: no bias left out
    assert smollm.tokenizer.decode(dec.predictions) == " foo"


def test_example_prompt_top_heads_are_deep(smollm):
    result = locate(smollm, [EXAMPLE])
    top = result.top_heads(10)
    assert all(layer >= 15 for layer, _ in top), top  # all in the deeper half of 30 layers
    assert result.head_scores(top)[0] > 0.5  # the best head alone raises log p(" foo") by over half a nat
