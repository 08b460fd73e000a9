"""Head-type scores (`studies.head_types`, `studies.function_vectors`): heads forced by hand to be a
previous-token and an induction head score 1, others stay within [0, 1]; the batched scores equal
a loop over sequences reading the model's own attention; the function-vector score equals each
prompt patched by hand; corruption breaks every mapping; the split is disjoint by input."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import pytest
import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from icl_helpers import ICLModel
from icl_helpers.data.positions import find_positions
from icl_helpers.data.prompts import parse_prompt, prompt_label_ids
from icl_helpers.data.split import input_halves
from icl_helpers.studies import function_vectors as fv
from icl_helpers.studies import head_types as ht
from icl_helpers.studies.runner import PromptSet
from icl_helpers.verdicts import evidence
from tests.conftest import close, exact, logprob_scale, small_model, vocab_tokenizer

S, N = 6, 7  # sequences, ids a copy: 4 copies fit the small models' 64 positions
PREVIOUS, INDUCTION = (1, 2), (2, 0)  # the heads forced by hand


@pytest.fixture(scope="module", params=["gpt2", "llama-gqa"])
def model(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def pattern(ids: torch.Tensor, kind: str) -> torch.Tensor:
    """[B, T, T]: one-hot rows, on the previous token or on the token after the latest earlier
    occurrence of the query's token (the query itself where there is none)."""
    B, T = ids.shape
    pos = torch.arange(T)
    if kind == "previous":
        target = (pos - 1).clamp(min=0).expand(B, T)
    else:
        same = (ids[:, :, None] == ids[:, None, :]) & (pos[None, None, :] < pos[None, :, None])  # [B, i, j]
        latest = (pos * same).amax(-1)
        target = torch.where(same.any(-1), latest + 1, pos)
    return torch.nn.functional.one_hot(target, T).float()


_IDS: list[torch.Tensor] = []


def _forced_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention, with the heads of FORCED given one-hot patterns of the batch's ids."""
    groups = query.shape[1] // key.shape[1]
    scores = query @ key.repeat_interleave(groups, 1).transpose(2, 3) * (scaling or query.shape[-1] ** -0.5)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = scores.softmax(-1)
    for (layer, head), kind in FORCED.items():
        if module.layer_idx == layer:
            weights = weights.clone()
            weights[:, head] = pattern(_IDS[-1].cpu(), kind).to(weights)
    out = weights @ value.repeat_interleave(groups, 1)
    return out.transpose(1, 2).contiguous(), weights


FORCED = {PREVIOUS: "previous", INDUCTION: "induction"}


@contextmanager
def forced(m: ICLModel):
    """Inside, FORCED's heads attend as `pattern` says (the model's attention otherwise eager). Registered
    here, not at import: a second import of this module (`from tests.test_head_types import ...`) would
    otherwise register its own copy, which reads its own, empty `_IDS`."""
    AttentionInterface.register("forced_heads_test", _forced_attention)
    AttentionMaskInterface.register("forced_heads_test", eager_mask)
    handle = m.model.get_input_embeddings().register_forward_pre_hook(lambda mod, args: _IDS.append(args[0]))
    m.model.set_attn_implementation("forced_heads_test")
    try:
        yield
    finally:
        m.model.set_attn_implementation("eager")
        handle.remove()
        _IDS.clear()


def test_heads_forced_to_a_type_score_one_and_others_stay_in_range(model):
    with forced(model):  # an attention edit outside the package: computed afresh, not cached
        induction = ht.induction_scores(model, S, N, cache=False)
        null = ht.induction_scores(model, S, N, null=True, cache=False)
        prefix = ht.prefix_matching_scores(model, S, N, cache=False)
        previous = ht.previous_token_scores(model, S, N, cache=False)
    one, zero = torch.tensor(1.0), torch.tensor(0.0)
    # one-hot rows on the targets: every query's sum is 1.0 or 0.0 exactly, and so is their mean
    exact(induction[INDUCTION], one)
    exact(prefix[INDUCTION], one)
    exact(previous[PREVIOUS], one)
    exact(null[INDUCTION], zero)  # no earlier occurrence: it attends to itself, never a stripe target
    exact(induction[PREVIOUS], zero)  # the previous token is never the stripe's (n > 2)
    exact(previous[INDUCTION], zero)  # the token after the earlier occurrence is never the previous one
    for scores in (induction, null, prefix, previous):
        assert scores.min() >= 0 and scores.max() <= 1 + 1e-6
    others = torch.ones_like(induction, dtype=torch.bool)
    others[INDUCTION] = others[PREVIOUS] = False
    assert induction[others].max() < 0.5 and previous[others].max() < 0.5  # random heads spread their attention


def loop_scores(m: ICLModel, ids: torch.Tensor, length: int, prefix: int) -> dict[str, torch.Tensor]:
    """The scores written out: one sequence at a time, the model's own attention, the targets by
    token identity (the token after every earlier occurrence of the query's token)."""
    L, H = m.arch.n_layers, m.arch.n_heads
    out = {k: torch.zeros(L, H, dtype=torch.float64) for k in ("repeat", "previous")}
    for seq in ids:
        att = m.model(seq[None].to(m.device), output_attentions=True).attentions  # L x [1, H, T, T]
        T = len(seq)
        for layer in range(L):
            a = att[layer][0].double().cpu()
            repeat = [sum(a[:, i, j + 1] for j in range(prefix, i) if seq[j] == seq[i] and j + 1 <= i)
                      for i in range(prefix + length, T)]
            out["repeat"][layer] += torch.stack(repeat).mean(0) / len(ids)
            out["previous"][layer] += a[:, range(prefix + 1, T), range(prefix, T - 1)].mean(-1) / len(ids)
    return out


@pytest.mark.parametrize("copies", [2, 4])
def test_scores_equal_a_loop_over_sequences(model, copies):
    ids = ht.random_sequences(model, S, N, copies, seed=3)
    got = ht.repeated_sequence_scores(model, S, N, copies, seed=3, batch_size=4, cache=False)
    want = loop_scores(model, ids, N, len(ht.text_prefix(model)))
    for name in ("repeat", "previous"):  # batched against one sequence at a time: attention weights, scale 1
        close(got[name], want[name], scale=1.0)
    assert want["repeat"].max() > 1e-2  # a test of something: random heads do attend there


def test_sequences_skip_special_ids_and_begin_as_prompts_do():
    tok = vocab_tokenizer("llama-spm")
    m = ICLModel(small_model("llama-gqa", vocab_size=len(tok)), tok, name="llama-spm")
    prefix = ht.text_prefix(m)
    pool = ht.ordinary_ids(m)  # 32,000 less <unk>, <s>, </s> and the 256 byte fallbacks <0x00>..<0xFF>
    assert len(pool) == 32000 - 3 - 256 and not set(pool.tolist()) & set(tok.all_special_ids)
    assert not any(n.startswith("<0x") for n in tok.convert_ids_to_tokens(pool.tolist()))
    assert prefix == tok("x")["input_ids"][:1] == [tok.bos_token_id]
    ids = ht.random_sequences(m, 4, 20, 2, seed=1)
    assert (ids[:, 0] == tok.bos_token_id).all() and torch.equal(ids[:, 1:21], ids[:, 21:])
    drawn = set(ids[:, 1:].flatten().tolist())
    names = tok.convert_ids_to_tokens(sorted(drawn))
    assert not drawn & set(tok.all_special_ids) and not any(n.startswith("<0x") for n in names)
    assert all(len(set(row[1:21].tolist())) == 20 for row in ids)  # distinct within a copy
    fresh = ht.random_sequences(m, 4, 20, 2, seed=1, null=True)
    assert not any(set(r[1:21].tolist()) & set(r[21:].tolist()) for r in fresh)  # R and R' share no id
    assert not torch.equal(ht.random_sequences(m, 4, 20, 2, seed=2), ids)  # seeded


def test_scores_are_cached_under_the_sequences(model, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    first = ht.repeated_sequence_scores(model, S, N)
    assert len(list((tmp_path / "results").glob("repeated-sequences*.pt"))) == 1
    for name, t in ht.repeated_sequence_scores(model, S, N).items():  # read back from the cache
        exact(t, first[name])
    for name, t in ht.repeated_sequence_scores(model, S, N, cache=False).items():  # the same batches computed again
        exact(t, first[name])
    ht.repeated_sequence_scores(model, S, N, seed=1)
    assert len(list((tmp_path / "results").glob("repeated-sequences*.pt"))) == 2


# --- function vectors ------------------------------------------------------------------------


def test_corruption_breaks_every_mapping_and_keeps_the_rest():
    clean = parse_prompt("love : foo like : foo eight : bar two : bar one :")
    arrangements = fv.mixed_arrangements(clean.is_true)
    assert len(arrangements) == 4 and clean.is_true not in arrangements
    assert tuple(not t for t in clean.is_true) not in arrangements  # the full flip keeps a mapping
    for labels in arrangements:
        bad = fv.relabelled(clean, labels)
        assert bad == parse_prompt(bad.text)  # spans and flags as the prompt's own parse gives them
        assert [bad.text[a:b] for a, b in bad.demos] == ["love", "like", "eight", "two"]
        assert bad.text.endswith(" one :")
        for cls in (True, False):  # each class of demonstrations carries both labels
            assert {t for t, c in zip(labels, clean.is_true) if c == cls} == {True, False}
    many = fv.corrupted_prompts([clean] * 40, seed=0)
    assert {p.is_true for p in many} == set(arrangements)  # every arrangement drawn
    with pytest.raises(Exception, match="at least two of each class"):
        fv.corrupted_prompts([parse_prompt("love : foo eight : bar one :")])


FV_PROMPTS = [  # (text, (true label, false label), direction): three of one mapping, two of the other
    ("love : bar like : bar eight : foo two : foo one :", ("foo", "bar"), "number/sentiment"),
    ("happy days : bar glad : bar seven : foo three : foo ten :", ("foo", "bar"), "number/sentiment"),
    ("seven : foo three : foo happy : bar glad : bar sad :", ("bar", "foo"), "sentiment/number"),
    ("eight : bar two : bar love : foo like : foo nice :", ("foo", "bar"), "sentiment/number"),
    ("nine : bar six : bar awful : foo grim : foo good :", ("foo", "bar"), "sentiment/number"),
]


def fv_prompt_set(m: ICLModel) -> PromptSet:
    prompts = [parse_prompt(text, labels) for text, labels, _ in FV_PROMPTS]
    return PromptSet("hand", "mapped", 0, prompts, [d for *_, d in FV_PROMPTS], find_positions(m.tokenizer, prompts))


def by_hand(m: ICLModel, texts: list[str], head: tuple[int, int], fill: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(z of every head at the last position [N, H, dh] in `head`'s layer, the next-token log-probabilities
    [N, V]) one prompt at a time, `head`'s z at the last position set to fill[i] where fill is given."""
    layer, h = head
    dh, zs, logps = m.arch.d_head, [], []
    for i, text in enumerate(texts):
        def hook(mod, args):
            z = args[0].clone()
            zs.append(z[0, -1].view(-1, dh).clone())
            if fill is not None:
                z[0, -1, h * dh:(h + 1) * dh] = fill[i]
            return (z, *args[1:])
        handle = m.arch.attn_out(layer).register_forward_pre_hook(hook)
        try:
            logps.append(m.model(**m.tokenizer(text, return_tensors="pt").to(m.device)).logits[0, -1].log_softmax(-1))
        finally:
            handle.remove()
    return torch.stack(zs).cpu(), torch.stack(logps).double().cpu()


@pytest.mark.parametrize("reuse_keys", [True, False], ids=["one-token passes", "engine"])
@pytest.mark.parametrize("head", [(0, 1), (2, 3)])
def test_function_vector_score_equals_each_prompt_patched_by_hand(model, head, reuse_keys):
    ps = fv_prompt_set(model)
    got = fv.function_vector_scores(model, ps, seed=0, correct_only=False, batch_size=2, reuse_keys=reuse_keys,
                                    cache=False)
    cells = [fv.cell_of(p, d) for p, d in zip(ps.prompts, ps.directions)]
    assert got.cells == sorted(set(cells)) == ["number:bar sentiment:foo", "number:foo sentiment:bar"]
    # the mean a cell: each prompt's z by hand, averaged over its cell
    z, _ = by_hand(model, ps.texts, head, None)
    means = {c: z[[i for i, d in enumerate(cells) if d == c], head[1]].double().mean(0) for c in got.cells}
    bad = [p.text for p in fv.corrupted_prompts(ps.prompts, seed=0)]
    _, plain = by_hand(model, bad, head, None)
    _, patched = by_hand(model, bad, head, torch.stack([means[c].float() for c in cells]))
    gold = prompt_label_ids(model.tokenizer, ps.prompts)[0]
    rows = torch.arange(len(bad))
    for name, (p_after, p_before) in {"prob": (patched.exp(), plain.exp()), "logprob": (patched, plain)}.items():
        effect = p_after[rows, gold] - p_before[rows, gold]
        want = torch.stack([effect[[i for i, d in enumerate(cells) if d == c]].mean() for c in got.cells]).mean()
        scale = logprob_scale(torch.cat([plain, patched]))  # a log-probability's, times p for a probability
        if name == "prob":
            scale *= float(torch.cat([p_after[rows, gold], p_before[rows, gold]]).max())
        close(getattr(got, name)[head], want, scale=scale)
        assert want.abs() > 4 * 32 * 2**-23 * scale  # beyond the tolerance: a flipped sign moves it by 8 of them
    assert got.counts.tolist() == [2, 3] and got.scored.all()
    close(got.corrupted_prob, plain.exp()[rows, gold], scale=logprob_scale(plain) * float(plain.exp()[rows, gold].max()))


def test_function_vectors_are_cached_and_need_a_correct_prompt(model, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = fv_prompt_set(model)
    first = fv.function_vector_scores(model, ps, correct_only=False)
    again = fv.function_vector_scores(model, ps, correct_only=False)  # read back from the cache
    exact(again.prob, first.prob)
    exact(again.cell_logprob, first.cell_logprob)
    assert not torch.equal(fv.function_vector_scores(model, ps, seed=1, correct_only=False).logprob, first.logprob)
    pooled = replace(ps, directions=["number/sentiment"] * len(ps))  # the same texts in other cells: another key
    assert fv.function_vector_scores(model, pooled, correct_only=False).counts.tolist() == [1, 4]  # not [2, 3]
    with pytest.raises(Exception, match="answered correctly"):  # a random model answers none: nothing to average
        fv.function_vector_scores(model, ps)


# --- the split by input ------------------------------------------------------------------------


def test_score_and_eval_halves_are_disjoint_by_input(model):
    score, held = ht.score_and_eval(model, "sentiment_number", 60, seed=0)
    records = evidence.MAIN.records("sentiment_number", 60, 0)
    halves = input_halves(records, 0)
    inputs = [r.input for r in records]
    assert len(score) + len(held) == 60 and len(score) == int(halves.sum())
    assert not {i for i, k in zip(inputs, halves) if k} & {i for i, k in zip(inputs, halves) if not k}
    assert len(set(inputs)) < len(inputs)  # the word datasets repeat inputs: a split by record would share them
    for ps in (score, held):  # each mapping meets queries of both classes
        cells = {fv.cell_of(p, d) for p, d in zip(ps.prompts, ps.directions)}
        assert len(cells) == 2
        for c in cells:
            assert len({d for p, d in zip(ps.prompts, ps.directions) if fv.cell_of(p, d) == c}) == 2
    assert not torch.equal(input_halves(records, 1), halves)  # seeded
    # the held-out view of the verdicts locates on this half
    exact(evidence.Evidence(model, 60, 2, 0, None).halves("sentiment_number"), halves)


@pytest.mark.parametrize("kind", ["gemma3", "qwen2", "llama-bias"])
def test_one_token_passes_equal_the_engine(kind, gpt2_tokenizer):
    """Every head, in families beyond the fixture's: Gemma 3's 4-token window (shorter than the
    prompts), Qwen 2's biases, Llama's biases."""
    m = ICLModel(small_model(kind), gpt2_tokenizer, name=kind)
    ps = fv_prompt_set(m)
    texts = [p.text for p in fv.corrupted_prompts(ps.prompts)]
    gold = prompt_label_ids(m.tokenizer, ps.prompts)[0]
    fill = torch.randn(len(texts), m.arch.n_layers, m.arch.n_heads, m.arch.d_head, generator=torch.Generator().manual_seed(0))
    got = fv.patched_probs(m, texts, gold, fill, batch_size=3, reuse_keys=True)
    want = fv.patched_probs(m, texts, gold, fill, batch_size=3, reuse_keys=False)
    enc = m.encode(texts)
    logits = m.model(**enc).logits[torch.arange(len(texts)), enc["attention_mask"].sum(1) - 1]
    for g, w in zip(got, want):  # log-probabilities by two summation orders
        close(g, w, scale=logprob_scale(logits))
    assert (want[1] - want[0][:, None, None]).abs().amax() > 1e-2  # the patches do move the gold label
