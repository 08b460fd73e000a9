"""Interventions: exact where they should change nothing, exact in what they remove,
batched, composable, and gone afterwards."""
from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from icl_helpers import UsageError
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import ablated, applied, balanced_labels, head_means, position_free_labels
from icl_helpers.core.passes import LastRun, last_token_passes
from icl_helpers.data.positions import LabelPositions, find_positions
from icl_helpers.data.prompts import parse_prompt
from icl_helpers.model.adapters import RotaryKeys
from tests.conftest import PROMPTS, close, exact

EXAMPLES = [
    "love : bar like : bar eight : foo two : foo one :",
    "happy : bar seven : foo three : foo ten :",
    "a rather long demonstration here : bar fine : bar twelve : foo nine : foo six :",
]


def labels_of(m, prompts: list[str]) -> LabelPositions:
    """Positions of the labels " foo" (true) and " bar" (false) in each prompt."""
    return find_positions(m.tokenizer, [parse_prompt(p) for p in prompts])


def last_logits(m, prompts: list[str]) -> torch.Tensor:
    """[B, V] logits at each prompt's last real token."""
    enc = m.encode(prompts)
    with torch.no_grad():
        hidden = m.model.base_model(**enc).last_hidden_state
    return m.model.get_output_embeddings()(hidden[torch.arange(len(prompts)), enc["attention_mask"].sum(1) - 1])


def some_heads(m) -> list[tuple[int, int]]:
    return [(1, 0), (1, 3), (m.arch.n_layers - 1, 2)]


def test_balancing_equal_classes_changes_nothing(small):
    balanced = [EXAMPLES[0], EXAMPLES[2]]  # two foo and two bar labels each
    with balanced_labels(small, some_heads(small), labels_of(small, balanced)):
        edited = last_logits(small, balanced)
    close(edited, last_logits(small, balanced))


def test_identity_rotation_changes_nothing(small):
    if small.arch.family == "gpt2":
        pytest.skip("absolute positions: no rotation")
    prompts = ["love : foo one :", "a rather long demonstration here : bar six :"]  # one label each
    with position_free_labels(small, some_heads(small), labels_of(small, prompts)):  # target: that label's own position
        edited = last_logits(small, prompts)
    close(edited, last_logits(small, prompts))


def test_rotary_keys_move_to_the_target_position():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4))
    B, H, T, dh = 2, 3, 7, 16
    raw = torch.randn(B, H, T, dh)
    cos, sin = rotary(raw, torch.arange(T).expand(B, T))
    _, at_own = apply_rotary_pos_emb(raw, raw, cos, sin)
    target = torch.tensor([5, 2])
    cos_t, sin_t = rotary(raw, target[:, None].expand(B, T))
    _, at_target = apply_rotary_pos_emb(raw, raw, cos_t, sin_t)
    close(RotaryKeys(rotary, target)(at_own), at_target)  # the default RoPE has no attention scaling


def test_gpt2_layer0_label_keys_lose_the_position_embedding(small):
    if small.arch.family != "gpt2":
        pytest.skip("GPT-2 only")
    enc = small.encode(EXAMPLES)
    keys = small.arch.position_free_keys(0, torch.zeros(len(EXAMPLES), dtype=torch.long))
    keys.x = small.model.transformer.wte(enc["input_ids"]) + small.model.transformer.wpe.weight[: enc["input_ids"].shape[1]]
    block, d = small.model.transformer.h[0], small.arch.d_model
    expected = block.attn.c_attn(block.ln_1(small.model.transformer.wte(enc["input_ids"])))[..., d : 2 * d]
    B, T = enc["input_ids"].shape
    got = keys(torch.empty(B, small.arch.n_heads, T, small.arch.d_head))
    close(got.transpose(1, 2).flatten(2), expected)


def test_ablation_removes_exactly_the_heads_contribution(small):
    """ATTN_l / attn_scale_l (the attention projection's output, with the gain of a norm
    ending the branch) loses exactly the heads' z W_O: a norm there then rescales the rest."""
    layer = 1
    plain = decompose(small, PROMPTS)
    with ablated(small, [(layer, 0), (layer, 2)]):
        cut = decompose(small, PROMPTS)
    heads = plain.heads()[:, layer]
    unscaled = lambda dec, v: v / dec.attn_scale[:, layer, None]  # noqa: E731
    terms = unscaled(plain, plain.attn[:, layer].abs() + heads[:, 0].abs() + heads[:, 2].abs())
    close(unscaled(cut, cut.attn[:, layer]), unscaled(plain, plain.attn[:, layer] - heads[:, 0] - heads[:, 2]),
          scale=float(terms.max()))
    exact(cut.attn[:, :layer], plain.attn[:, :layer])  # the layers before run the same operations on the same batch


def test_mean_ablation_sets_z_to_the_dataset_mean(small):
    means = head_means(small, PROMPTS)
    assert means.shape == (small.arch.n_layers, small.arch.n_heads, small.arch.d_head)
    with ablated(small, [(2, 1)], means=means):
        cut = decompose(small, PROMPTS)
    exact(cut.z[:, 2, 1], means[2, 1].expand(len(PROMPTS), -1))  # a copy of the mean


def test_balancing_divides_label_weights_by_class_count(small):
    prompts = [EXAMPLES[1]]  # one bar label, two foo labels
    labels = labels_of(small, prompts)
    plain = decompose(small, prompts, record=["pattern"]).pattern[0, 1]  # layer 1: [H, T]
    with balanced_labels(small, [(1, 0)], labels):
        edited = decompose(small, prompts, record=["pattern"]).pattern[0, 1]
    exact(edited[1:], plain[1:])  # other heads untouched: the same softmax of the same scores
    foo, bar = labels.class_masks(plain.shape[-1])[0]
    is_label = foo | bar
    exact(edited[0, ~is_label], plain[0, ~is_label])  # off the labels the edit keeps the weights as they were
    close(edited[0, is_label].sum(), plain[0, is_label].sum())  # label total kept
    ratio = edited[0] / plain[0]
    close(ratio[foo], ratio[bar][0].expand(2) / 2)


def test_interventions_work_in_a_batch_as_one_by_one(small):
    heads = some_heads(small)

    def run(prompts):
        labels = labels_of(small, prompts)
        with applied(ablated(small, [(0, 1)]), balanced_labels(small, heads, labels), position_free_labels(small, heads, labels)):
            return last_logits(small, prompts)

    close(run(EXAMPLES), torch.cat([run([p]) for p in EXAMPLES]))


def _hooks(model: torch.nn.Module) -> list[list]:
    """Every forward (pre-)hook on every module (transformers may keep its own output-capture hooks)."""
    return [list(m._forward_pre_hooks.values()) + list(m._forward_hooks.values()) for m in model.modules()]


def test_model_is_unchanged_afterwards(small):
    state = {k: v.clone() for k, v in small.model.state_dict().items()}
    hooks = _hooks(small.model)
    before = last_logits(small, EXAMPLES)
    labels = labels_of(small, EXAMPLES)
    with pytest.raises(RuntimeError):
        with applied(ablated(small, some_heads(small)), position_free_labels(small, some_heads(small), labels)):
            raise RuntimeError("an error inside the block")
    with balanced_labels(small, some_heads(small), labels), ablated(small, some_heads(small), head_means(small, EXAMPLES)):
        assert not torch.equal(last_logits(small, EXAMPLES), before)
    assert small.model.config._attn_implementation == "eager"
    assert _hooks(small.model) == hooks
    assert all(torch.equal(v, state[k]) for k, v in small.model.state_dict().items())
    assert torch.equal(last_logits(small, EXAMPLES), before)


EDITS = {  # each intervention on some heads, with the label positions of EXAMPLES where it takes them
    "ablated": lambda m, heads: ablated(m, heads),
    "balanced_labels": lambda m, heads: balanced_labels(m, heads, labels_of(m, EXAMPLES)),
    "position_free_labels": lambda m, heads: position_free_labels(m, heads, labels_of(m, EXAMPLES)),
}


@pytest.mark.parametrize("heads, message", [
    ([(-1, 0)], r"^Head -1-0 is not in this model: it has 3 layers x 4 heads \(layer-head from 0-0 to 2-3\)\.$"),
    ([(1, 0), (99, 0)], r"^Head 99-0 is not in this model"),
    ([(1, 0.5)], r"^heads: \(1, 0.5\) is not a head: write layer-head pairs separated by commas, e.g. 19-11,20-11\.$"),
    ("1.1", r"^heads: '1.1' is not a head"),
    ([], r"^heads: no heads given"),
])
@pytest.mark.parametrize("edit", EDITS)
def test_interventions_check_their_heads_as_the_command_line_does(small, edit, heads, message):
    with pytest.raises(UsageError, match=message):
        with EDITS[edit](small, heads):
            pytest.fail("entered")


@pytest.mark.parametrize("edit", EDITS)
def test_interventions_read_heads_in_the_papers_notation(small, edit):
    with EDITS[edit](small, "1-1,2-3"):
        named = last_logits(small, EXAMPLES)
    with EDITS[edit](small, [(1, 1), (2, 3)]):
        exact(named, last_logits(small, EXAMPLES))  # the same heads: the same forward pass


@pytest.mark.parametrize("edit", ["balanced_labels", "position_free_labels"])
def test_label_positions_of_other_prompts_are_refused_before_any_layer_runs(small, edit):
    with EDITS[edit](small, [(1, 0)]):  # the positions of EXAMPLES' 3 prompts
        with pytest.raises(UsageError, match=r"^The label positions are of 3 prompts, the last token at \d+, but the batch "
                                             r"has 2 prompts of \d+ tokens: give each batch its own positions, row for row"):
            last_logits(small, EXAMPLES[:2])


def test_label_positions_of_a_longer_prompt_are_refused_in_a_one_token_pass(small):
    """Over kept keys and values the embeddings see one token: the attention checks the positions instead."""
    longer = labels_of(small, EXAMPLES[2:])
    run = LastRun(1, 0, lambda rows: balanced_labels(small, [(1, 0)], longer))
    with pytest.raises(UsageError, match=r"^The label positions are of 1 prompts, the last token at \d+, but the pass "
                                         r"has 1 prompts of \d+ tokens: give each batch its own positions, row for row"):
        last_token_passes(small, EXAMPLES[:1], [run], lambda logits, rows: logits[..., :1])


def test_interventions_need_a_model_and_label_positions(small):
    with pytest.raises(UsageError, match=r"^Expected an ICLModel, not a str: load one with load_model\(name\)"):
        with ablated("not a model", [(1, 0)]):
            pass
    with pytest.raises(UsageError, match=r"^Label positions must be a LabelPositions \(find_positions of the prompts\), "
                                         r"not a list\.$"):
        balanced_labels(small, [(1, 0)], [[3, 5]])
    with pytest.raises(UsageError, match=r"^target must be one integer position a prompt, 3 for these label positions, "
                                         r"not torch.int64 of shape \(2,\)\.$"):
        position_free_labels(small, [(1, 0)], labels_of(small, EXAMPLES), target=torch.tensor([1, 2]))
