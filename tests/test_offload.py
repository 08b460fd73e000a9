"""A model split by a device map, its layers offloaded: accelerate keeps an offloaded layer's
parameters on the meta device and loads them for each forward pass (what `device="auto"` does
to a model too large for the GPUs, and any map naming "cpu" or "disk" beside a GPU). Every
family, with half its blocks, its embedding and its unembedding offloaded to disk and the
rest on DEVICE (a GPU with ICL_TEST_DEVICE=cuda), gives the numbers of the same model held
whole: the weights are read from accelerate's store (`icl_helpers.model.weights`)."""
from __future__ import annotations

import copy

import pytest
import torch
from accelerate import dispatch_model

from icl_helpers import ICLModel, UsageError
from icl_helpers.core.interventions import Intervention, ablated, applied, balanced_labels, position_free_labels
from icl_helpers.core.locate import locate
from icl_helpers.core.passes import accuracies
from icl_helpers.data.prompts import parse_prompt, prompt_label_ids
from icl_helpers.model.adapters import architectures
from icl_helpers.model.weights import weight
from icl_helpers.studies import towers
from icl_helpers.studies.runner import prompt_set_from_texts
from tests.conftest import DEVICE, MIXED_TEXTS, PROMPTS, exact
from tests.hand import assert_exact
from tests.test_families import tiny_model
from tests.test_interventions import EXAMPLES, labels_of, last_logits


def device_map(model: torch.nn.Module, blocks: list[torch.nn.Module]) -> dict[str, str]:
    """Each module holding weights of its own -> "disk" (the odd blocks' modules, the embedding
    and the unembedding) or DEVICE (the rest)."""
    offloaded = {id(model.get_input_embeddings()), id(model.get_output_embeddings())}
    offloaded |= {id(module) for block in blocks[1::2] for module in block.modules()}
    return {name: "disk" if id(module) in offloaded else str(DEVICE) for name, module in model.named_modules()
            if any(True for _ in module.parameters(recurse=False)) or any(True for _ in module.buffers(recurse=False))}


@pytest.fixture(scope="module", params=list(architectures()))
def pair(request, gpt2_tokenizer, tmp_path_factory) -> tuple[ICLModel, ICLModel]:
    """(the model held whole on DEVICE, the same model loaded with its layers offloaded)."""
    whole = ICLModel(tiny_model(request.param), gpt2_tokenizer, name=request.param)
    split = dispatch_model(copy.deepcopy(whole.model), device_map(whole.model, whole.arch.blocks()),
                           offload_dir=tmp_path_factory.mktemp(request.param))
    return whole, ICLModel(split, gpt2_tokenizer, name=request.param)


def test_an_offloaded_model_is_split_as_asked(pair):
    whole, split = pair
    assert not any(p.is_meta for p in whole.model.parameters())
    assert split.model.get_output_embeddings().weight.is_meta
    assert [next(block.parameters()).is_meta for block in split.arch.blocks()] == [False, True, False]
    assert split.arch.W_O(1).device.type == DEVICE.type and not split.arch.W_O(1).is_meta  # read onto the device
    assert split.device.type == DEVICE.type and split.fingerprint() == whole.fingerprint()


def test_an_offloaded_model_decomposes_exactly_and_locates_as_the_whole_one(pair):
    whole, split = pair
    assert_exact(split, PROMPTS)
    got, want = (locate(m, PROMPTS, progress=False) for m in (split, whole))
    for field in ("head", "attn", "ffn", "targets"):
        exact(getattr(got, field), getattr(want, field))


def test_interventions_on_an_offloaded_model_are_the_whole_ones(pair):
    def run(m):
        heads, labels = [(1, 0), (2, 3)], labels_of(m, EXAMPLES)
        with applied(ablated(m, [(1, 1)]), balanced_labels(m, heads, labels), position_free_labels(m, heads, labels)):
            return last_logits(m, EXAMPLES)

    whole, split = pair
    exact(run(split), run(whole))


def test_the_two_towers_of_an_offloaded_model_are_the_whole_ones(pair):
    """The key and query projections (W_K, the readout) and the embedding similarity."""
    def of(m):
        ps = prompt_set_from_texts(m, MIXED_TEXTS)
        return {"similarity": towers.similarity(m, ps), **towers.tower_ranks(m, ps, [(1, 0), (2, 3)], cache=False)}

    whole, split = pair
    got, want = of(split), of(whole)
    for name in want:
        exact(got[name], want[name])


def test_interventions_resumed_from_a_shared_prefix_on_an_offloaded_model_are_the_whole_ones(pair):
    """`accuracies`: the blocks below an intervention computed once, the rest resumed from them."""
    prompts = [parse_prompt(p) for p in EXAMPLES]

    def run(m):
        runs = [None, Intervention.ablated(m, [(1, 1), (2, 3)]), Intervention.ablated(m, [(2, 0)])]
        return accuracies(m, [p.text for p in prompts], *prompt_label_ids(m.tokenizer, prompts), runs, bar=None)

    whole, split = pair
    for got, want in zip(run(split), run(whole)):
        exact(got.true_logit, want.true_logit)
        exact(got.predictions, want.predictions)


def test_a_weight_without_values_or_store_is_one_clear_line():
    module = torch.nn.Linear(2, 2, device="meta")
    with pytest.raises(UsageError, match="no values .* no offload store"):
        weight(module)
