"""Passes that share the blocks before a layer: a resumed pass is the full pass to the bit,
under interventions too, the blocks it skips do not run, and the model is whole afterwards."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.core.interventions import Intervention, ablated, position_free_labels
from icl_helpers.core.passes import accuracies, intervened_accuracies, one_token_groups
from icl_helpers.data.prompts import parse_prompt, prompt_label_ids
from icl_helpers.model.hooks import attached
from icl_helpers.model.prefix import block_inputs, resumed
from icl_helpers.studies.accuracy import accuracy
from tests.conftest import close, exact, small_model
from tests.test_interventions import EXAMPLES, labels_of, some_heads


def logits_of(m, enc) -> torch.Tensor:
    with torch.no_grad():
        return m.model(**enc).logits


def test_a_resumed_pass_is_the_full_pass(small):
    enc = small.encode(EXAMPLES)
    inputs: dict[int, torch.Tensor] = {}
    with block_inputs(small, [1, 2], inputs):
        plain = logits_of(small, enc)
    assert sorted(inputs) == [1, 2] and inputs[1].shape == (3, enc["input_ids"].shape[1], small.arch.d_model)
    heads = [(2, 1), (1, 3)]
    with ablated(small, heads):
        want = logits_of(small, enc)
    calls = []
    blocks = list(small.arch.blocks())
    with attached([(blocks[0], "pre", lambda mod, args: calls.append(0))]):
        with resumed(small, 1, inputs[1]):
            assert torch.equal(logits_of(small, enc), plain)
        with ablated(small, heads), resumed(small, 1, inputs[1]):
            assert torch.equal(logits_of(small, enc), want)
        with ablated(small, heads[:1]), resumed(small, 2, inputs[2]):
            assert not torch.equal(logits_of(small, enc), plain)  # the ablation of layer 2 acts
        with resumed(small, 2, inputs[2].flip(-1)):
            assert (logits_of(small, enc) - plain).abs().max() > 1e-3  # the recorded input is what runs
    assert calls == []  # block 0 never ran
    assert list(small.arch.blocks()) == blocks and torch.equal(logits_of(small, enc), plain)


def test_position_free_keys_resumed(small):
    """GPT-2's position-free keys read the block's input through a pre-hook: it must see x."""
    labels = labels_of(small, EXAMPLES)
    enc = small.encode(EXAMPLES)
    inputs: dict[int, torch.Tensor] = {}
    with block_inputs(small, [1], inputs):
        logits_of(small, enc)
    with position_free_labels(small, [(1, 0)], labels):
        want = logits_of(small, enc)
    with position_free_labels(small, [(1, 0)], labels), resumed(small, 1, inputs[1]):
        assert torch.equal(logits_of(small, enc), want)


def test_runs_share_their_prefix_and_equal_separate_runs(small):
    """`accuracies` equals one `accuracy` a run, and runs blocks before a run's start once a batch."""
    prompts = [parse_prompt(p) for p in EXAMPLES * 3]
    texts = [p.text for p in prompts]
    true_ids, false_ids = prompt_label_ids(small.tokenizer, prompts)
    # the first run changes block 1 on: it may lend its input x_1, never x_2, to the later runs
    runs = [Intervention.ablated(small, [(1, 1), (2, 3)]), None, Intervention.ablated(small, [(2, 0)]),
            Intervention.ablated(small, [(0, 2)])]
    calls = {0: 0, 1: 0, 2: 0}
    blocks = small.arch.blocks()
    hooks = [(blocks[l], "pre", lambda mod, args, l=l: calls.__setitem__(l, calls[l] + 1)) for l in calls]
    with attached(hooks):
        together = accuracies(small, texts, true_ids, false_ids, runs, batch_size=4, bar=None)
    batches = 3  # 9 prompts, 4 a batch
    assert calls == {0: 3 * batches, 1: 3 * batches, 2: 4 * batches}  # only the layer-2 run resumes
    for run, got in zip(runs, together):
        alone = accuracy(small, texts, true_ids, false_ids, batch_size=4, intervention=run, progress=False)
        assert torch.equal(got.true_logit, alone.true_logit) and torch.equal(got.predictions, alone.predictions)
        assert torch.equal(got.true_prob, alone.true_prob)
    assert not torch.equal(together[2].true_logit, together[1].true_logit)


def one_token_equals_whole(m, edit: str) -> None:
    """`intervened_accuracies` of EXAMPLES (three lengths, twice) in 4-prompt batches under `edit` as one-token
    passes (where the edit allows them) equals the whole padded passes to float32 rounding (one quantity in two
    summation orders: attention over kept keys, other batches), the argmax exactly; and the edit acts."""
    prompts = [parse_prompt(p) for p in EXAMPLES * 2]
    run = getattr(Intervention, edit)(m, some_heads(m))
    assert run.last_only == (edit == "balanced_labels" or m.arch.family != "gpt2")
    lengths: list[int] = []
    with attached([(m.model.get_input_embeddings(), "pre", lambda mod, args: lengths.append(args[0].shape[1]))]):
        got = intervened_accuracies(m, prompts, [None, run], batch_size=4)
    assert (1 in lengths) == run.last_only
    want = intervened_accuracies(m, prompts, [None, replace(run, last_only=False)], batch_size=4)
    for g, w in zip(got, want):
        close(torch.stack([g.true_logit, g.false_logit]), torch.stack([w.true_logit, w.false_logit]))
        lse = float(torch.stack([w.true_logit, w.false_logit]).abs().max()) + math.log(len(m.tokenizer))
        close(g.true_prob, w.true_prob, scale=float(w.true_prob.max()) * lse)  # p's rounding: p times its log's scale
        exact(g.predictions, w.predictions)  # an argmax: its top two logits lie far beyond rounding here
    moved = torch.stack([got[1].true_logit - got[0].true_logit, got[1].false_logit - got[0].false_logit])
    assert moved.abs().max() > 1e-3  # the edit does act


@pytest.mark.parametrize("edit", ["balanced_labels", "position_free_labels"])
def test_a_last_position_edit_runs_as_a_one_token_pass_equal_to_the_whole_pass(small, edit):
    """A label edit changes the last position alone: `intervened_accuracies` runs it, and the plain pass, as
    one-token passes over the kept keys and values, prompts of several lengths padded in one batch (not
    GPT-2's position-free keys, which need every position's layer input)."""
    one_token_equals_whole(small, edit)


@pytest.mark.parametrize("edit", ["balanced_labels", "position_free_labels"])
@pytest.mark.parametrize("outgrown, groups", [(1, [2, 4]), (2, [2, 2, 2])], ids=["longest-outgrows", "two-outgrow"])
def test_one_token_passes_under_a_sliding_window_that_some_prompts_outgrow(gpt2_tokenizer, edit, outgrown, groups):
    """Gemma 3 with a window that EXAMPLES' longest (or two longest) lengths reach: the shorter prompts padded
    together, the longer ones a length a batch (a padded one-token pass counts its window from the batch's
    longest prompt, so a shorter one would lose its first key), and every one equal to the whole pass."""
    lengths = sorted({len(ids) for ids in gpt2_tokenizer(EXAMPLES)["input_ids"]})
    m = ICLModel(small_model("gemma3", sliding_window=lengths[-outgrown - 1] + 1), gpt2_tokenizer, name="gemma3-window")
    assert sorted(map(len, one_token_groups(m, [len(ids) for ids in m.tokenizer(EXAMPLES * 2)["input_ids"]], 4))) == groups
    one_token_equals_whole(m, edit)
