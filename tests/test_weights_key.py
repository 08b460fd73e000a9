"""The weights' key (issue 59): the fingerprint hashes what the weights hold, however they were
edited; the kept readout and the results cache follow it; every pass runs in eval mode."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from icl_helpers import ICLModel, UsageError, load_model
from icl_helpers.core.interventions import head_means
from icl_helpers.core.locate import locate
from icl_helpers.model import weights
from icl_helpers.studies.accuracy import accuracy, prompt_accuracy
from icl_helpers.studies.runner import prompt_set_from_texts
from tests.conftest import DEVICE, MIXED_TEXTS, PROMPTS, exact, small_model

REPO = Path(__file__).resolve().parents[1]


def _scaled_copy(module: torch.nn.Module) -> torch.nn.Module:
    new = copy.deepcopy(module)
    new.weight.data.mul_(1.5)
    return new


def _swap(m: ICLModel, module: torch.nn.Module, new: torch.nn.Module) -> None:
    """Put `new` where `module` is in m's model."""
    name = next(n for n, mod in m.model.named_modules() if mod is module)
    parent, _, leaf = name.rpartition(".")
    setattr(m.model.get_submodule(parent), leaf, new)


def _edited_state(m: ICLModel) -> dict[str, torch.Tensor]:
    """m's state dict, layer 1's W_O edited in one element (a weight no other one is tied to)."""
    state = {k: v.clone() for k, v in m.model.state_dict().items()}
    name = next(n for n, p in m.model.named_parameters() if p is m.arch.attn_out(1).weight)
    state[name][0, 0] += 1.0
    return state


EDITS = {  # how a user edits weights: each must key a new result
    "data, final norm": lambda m: m.arch.final_norm().weight.data.mul_(1.5),
    "data, W_O": lambda m: m.arch.attn_out(1).weight.data.zero_(),
    "data, embedding": lambda m: m.model.get_input_embeddings().weight.data.mul_(0.5),  # tied in some models
    "in place, no_grad": lambda m: torch.no_grad()(lambda: m.arch.attn_out(2).weight.mul_(1.5))(),
    "load_state_dict": lambda m: m.model.load_state_dict(_edited_state(m)),
    "swapped module": lambda m: _swap(m, m.arch.attn_out(0), _scaled_copy(m.arch.attn_out(0))),
}


@pytest.mark.parametrize("edit", EDITS)
def test_an_edit_changes_the_fingerprint_and_rebuilds_the_readout(small, edit):
    """locate after an edit, on the model whose readout was kept, gives the scores of a fresh
    copy of the edited model: bit for bit (the same computation, the readout made afresh in both)."""
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer, name=small.name)
    before, key = locate(m, PROMPTS, progress=False), m.fingerprint()
    EDITS[edit](m)
    got = locate(m, PROMPTS, progress=False)
    want = locate(ICLModel(copy.deepcopy(m.model), small.tokenizer), PROMPTS, progress=False)
    assert m.fingerprint() != key
    exact(got.head, want.head)
    exact(got.attn, want.attn)
    exact(got.ffn, want.ffn)
    assert (got.head - before.head).abs().max() > 1e-3  # the edit matters


def test_every_one_element_edit_changes_the_fingerprint(small):
    """One element of each weight moved by one ulp, then put back: a new fingerprint each time,
    the first one again after."""
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer)
    key = m.fingerprint()
    for name, t in m.model.state_dict().items():
        flat = t.view(-1)
        i = flat.numel() * 2 // 3
        old = flat[i].clone()
        flat[i] = torch.nextafter(old, old + 1)
        assert m.fingerprint() != key, name
        flat[i] = old
    assert m.fingerprint() == key


def test_chunk_sums_are_the_sums_mod_2_32():
    """`chunk_sums` against numpy's uint32 arithmetic (which wraps by definition), a tail
    included, for 4- and 2-byte elements; the same on DEVICE as on the CPU."""
    g = torch.Generator().manual_seed(59)
    a = weights._MULTIPLIERS.astype(np.uint32)
    for dtype in (torch.float32, torch.bfloat16):
        t = torch.randn(3 * weights._CHUNK + 5, generator=g).to(dtype)
        b = t.view({4: torch.int32, 2: torch.int16}[t.element_size()]).numpy().astype(np.int32).view(np.uint32)
        chunks = [b[s : s + weights._CHUNK] for s in range(0, len(b), weights._CHUNK)]
        want = [int((c * a[: len(c)]).sum(dtype=np.uint32)) for c in chunks]
        got = weights.chunk_sums(t).numpy().view(np.uint32).tolist()
        assert got == want
        assert torch.equal(weights.chunk_sums(t.to(DEVICE)).cpu(), weights.chunk_sums(t))


def test_a_held_key_is_checked_before_a_result_is_kept(small):
    """A result whose weights change while it is computed is refused, not stored under the old key."""
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer)
    with m.held() as key:
        assert m.fingerprint() == key
        assert m.computed_from(key, lambda: 1) == 1
        with pytest.raises(UsageError, match="changed while a result was being computed"):
            m.computed_from(key, lambda: m.arch.final_norm().weight.data.mul_(2))


def test_a_data_edit_is_not_read_from_the_cache_in_the_same_process(small, tmp_path, monkeypatch):
    """Accuracy through the cache after `.data.zero_()` of one layer's W_O: the edited model's
    numbers (those of a fresh copy of it, bit for bit: the same batches), not the cached ones."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer, name=small.name)
    ps = prompt_set_from_texts(m, MIXED_TEXTS)
    before = prompt_accuracy(m, ps)
    m.arch.attn_out(1).weight.data.zero_()
    got = prompt_accuracy(m, ps)
    want = prompt_accuracy(ICLModel(copy.deepcopy(m.model), small.tokenizer), ps, batch_size=32)
    exact(got.true_logit, want.true_logit)
    assert (got.true_logit - before.true_logit).abs().max() > 1e-3


_EDIT_AND_STORE = """
import json, sys
from icl_helpers import load_model
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.studies.runner import prompt_set_from_texts
m = load_model(sys.argv[1], device="cpu")
ps = prompt_set_from_texts(m, json.loads(sys.argv[2]))
prompt_accuracy(m, ps.first(1))  # a study before the edit: the untouched key is taken (and was kept)
m.arch.final_norm().weight.data.mul_(0.25)
print(json.dumps(prompt_accuracy(m, ps).true_logit.tolist()))
"""


def test_a_data_edit_in_one_process_leaves_another_the_untouched_numbers(gpt2_tokenizer, tmp_path, monkeypatch):
    """Process 1 edits a weight through `.data` and stores a study in the cache; this process,
    with the untouched model and the same cache, gets the untouched model's numbers: those of
    a fresh, empty cache, bit for bit (the same computation)."""
    saved = tmp_path / "model"
    ICLModel(small_model("gpt2").cpu(), gpt2_tokenizer).model.save_pretrained(saved)
    gpt2_tokenizer.save_pretrained(saved)
    env = {"ICL_HELPERS_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", _EDIT_AND_STORE, str(saved), json.dumps(MIXED_TEXTS)], env=env,
                         capture_output=True, text=True, check=True)
    edited = torch.tensor(json.loads(run.stdout.splitlines()[-1]))
    m = load_model(str(saved), device="cpu")
    ps = prompt_set_from_texts(m, MIXED_TEXTS)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    got = prompt_accuracy(m, ps)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "fresh"))
    want = prompt_accuracy(m, ps)
    exact(got.true_logit, want.true_logit)
    exact(got.predictions, want.predictions)
    assert (edited - want.true_logit).abs().max() > 1e-3  # process 1 did store other numbers


def test_a_model_in_train_mode_gives_the_eval_numbers_and_stays_in_train_mode(gpt2_tokenizer):
    """GPT-2's dropout (0.1) never reaches a number: locate, accuracy and the head means of a
    model left in train mode (one module back in eval) equal the eval model's bit for bit (the
    same computation), and every module is left in its own mode."""
    m = ICLModel(small_model("gpt2"), gpt2_tokenizer)
    assert m.model.config.resid_pdrop > 0
    ids = torch.tensor([13, 14])
    want = (locate(m, PROMPTS, progress=False).head, accuracy(m, PROMPTS, *ids, progress=False).true_logit,
            head_means(m, PROMPTS))
    m.model.train()
    m.arch.attn_out(0).eval()
    modes = [module.training for module in m.model.modules()]
    for _ in range(2):
        got = (locate(m, PROMPTS, progress=False).head, accuracy(m, PROMPTS, *ids, progress=False).true_logit,
               head_means(m, PROMPTS))
        for g, w in zip(got, want):
            exact(g, w)
    assert [module.training for module in m.model.modules()] == modes
