"""The offline models beside the bundled one (`scripts/setup.sh --models`), exact through the
public API: residual chain, heads summing to ATTN_l, readout equal to the model's own logits.
Each test skips where its weight packages are not installed."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import UsageError, load_model
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.model.offline import OFFLINE_MODELS
from tests.conftest import close

EXAMPLE = "love : bar like : bar eight : foo two : foo one :"
SHAPES = {"qwen2.5-coder-0.5b": (24, 14, 2, 896), "gemma3-270m": (18, 4, 1, 640)}  # L, H, H_kv, d
PREDICTED = {"qwen2.5-coder-0.5b": " foo", "gemma3-270m": " bar"}  # on EXAMPLE, as measured: a check of the conversion


@pytest.fixture(scope="module", params=list(SHAPES))
def real(request):
    try:
        OFFLINE_MODELS[request.param].part_paths()
    except UsageError:
        pytest.skip(f"{request.param}'s packages are not installed (scripts/setup.sh --models)")
    return load_model(request.param, device="cpu")


def test_real_model_decomposes_exactly(real):
    arch = real.arch
    assert (arch.n_layers, arch.n_heads, arch.n_kv_heads, arch.d_model) == SHAPES[real.name]
    dec = decompose(real, [EXAMPLE, EXAMPLE.replace("love", "hate")])
    close(dec.resid[:, 0] + dec.attn.sum(1) + dec.ffn.sum(1), dec.resid[:, -1])
    close(dec.heads().sum(2) + _bias(real), dec.attn)
    close(Readout(arch).logits(dec.resid[:, -1], dec.scale), dec.logits)
    assert real.tokenizer.decode(dec.predictions[:1]) == PREDICTED[real.name]


def _bias(m):
    """[L, d]: each attention output projection's bias (zeros where it has none)."""
    return torch.stack([b if (b := m.arch.b_O(l)) is not None else torch.zeros(m.arch.d_model)
                        for l in range(m.arch.n_layers)])
