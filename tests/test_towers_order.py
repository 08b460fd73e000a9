"""The two towers' word ranks and Appendix E's order-insensitivity study, against naive
full-vocabulary computations on a small random model."""
from __future__ import annotations

import pytest
import torch

from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import _edited
from icl_helpers.core.label_edits import LabelEdit
from icl_helpers.core.projections import kept_tokens
from icl_helpers.studies import order, towers
from icl_helpers.studies.runner import prompt_set_from_texts
from tests.conftest import EPS32, ULPS, close, exact, logprob_scale
from tests.conftest import MIXED_TEXTS as TEXTS
from tests.conftest import STUDY_HEADS as HEADS
from tests.test_attribution import naive_increase


def test_a_prompts_words_are_its_demonstrations_then_its_input(ps):
    assert towers.words_of(ps.prompts[0]) == ["love", "like", "eight", "two", "one"]
    assert towers.words_of(ps.prompts[2]) == ["a rather long demonstration here", "twelve", "six"]


def test_a_word_is_looked_for_in_four_spellings(small):
    ids = towers.spellings(small.tokenizer, "love")
    assert [small.tokenizer.decode([i]) for i in ids] == [" love", "love", " Love", "Love"]


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)  # the tokenizer alone
def test_a_sentence_is_looked_for_as_its_content_tokens(small):
    """In a sentence dataset each text's distinct tokens, stop words ("the", "again", "as", "it", the
    "s" of "shrugs") and punctuation left out; the input last."""
    ps = prompt_set_from_texts(small, ["Liverpool signs the two players, again : bar Stocks fall as the market shrugs : foo "
                                       "Liverpool wins it :", "the : foo again :"], name="agnews")
    words = towers.candidates(small, ps)
    texts = [[small.tokenizer.decode([int(t)]) for t in w if t >= 0] for w in words[0]]
    assert texts == [[" Liverpool", " signs", " two", " players"], [" St", "ocks", " fall", " market", " shrug"],
                     [" Liverpool", " wins"]]
    assert words.shape == (2, 3, 5) and (words[1] >= 0).sum() == 0  # stop words alone: no token to look for


def brute_rank_bounds(logits: torch.Tensor, spelled: list[int], scale: float, kept: torch.Tensor) -> tuple[int, int]:
    """The rank of the best spelling among the kept tokens [V] bool from full logits [V], as an
    interval: tokens within float32 rounding of it (at the scale of the terms summed into a logit)
    may fall on either side in another summation order."""
    best = logits[spelled].max()
    others = kept.clone()
    others[spelled] = False
    slack = ULPS * EPS32 * scale
    return int((logits[others] > best + slack).sum()) + 1, int((logits[others] > best - slack).sum()) + 1


def terms(readout: Readout, v: torch.Tensor) -> float:
    """The largest sum of |terms| of a logit of bs(v): sum_i |v_i G_wi|."""
    return float((v.abs() @ readout.G.abs().T).max())


def assert_ranks(got: torch.Tensor, vector: torch.Tensor, readout: Readout, spelled: list[list[int]],
                 kept: torch.Tensor, scale: float) -> None:
    """got [J]: each text's rank in bs(vector [d]) lies where the full projection puts it; NaN for a
    text with no token."""
    logits = readout.direct(vector[None], torch.ones(1))[0]
    for j, spelling in enumerate(spelled):
        if not spelling:
            assert got[j].isnan()
            continue
        low, high = brute_rank_bounds(logits, spelling, scale, kept)
        assert low <= got[j] <= high


def test_tower_ranks_are_the_ranks_in_the_full_projection(small, ps, tmp_path, monkeypatch):
    """Every text's rank (demonstrations, then the input) in the paper's label key (the key projection's
    input) and in the attention outputs at the label, the input's in each head's last query unturned and
    turned by each label's distance, counted over vocabulary chunks among the kept tokens, batched in
    twos, lies where the full projection puts it; NaN past a prompt's demonstrations (4, 3, then 2 of
    them); the cached result is the same."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    got = towers.tower_ranks(small, ps, HEADS, batch_size=2, cache=False)
    layers = sorted({l for l, _ in HEADS})
    dec = decompose(small, ps.texts, record=["attn_all", "key_input", "queries"])
    readout, words, kept = Readout(small.arch), towers.candidates(small, ps), kept_tokens(small.tokenizer)
    q = dec.queries[:, [l for l, _ in HEADS], [h for _, h in HEADS]]  # [N, S, dh]
    turned = towers.rotated_queries(small.arch, q, HEADS, ps.positions.last[:, None] - ps.positions.labels.clamp(min=0))
    for n in range(len(ps)):
        spelled = [[int(t) for t in w if t >= 0] for w in words[n]]
        labels = ps.positions.labels[n][ps.positions.valid[n]].tolist()
        for f, layer in enumerate(layers):
            for k, p in enumerate(labels):
                keys = (("key", dec.key_input[n, layer, p]), ("key_attention", dec.attention_sums(layer)[n, p]))
                for kind, key in keys:
                    assert_ranks(got[kind][n, f, k], key, readout, spelled, kept, terms(readout, key))
        for s, (l, h) in enumerate(HEADS):
            W_K = small.arch.W_K(l)[small.arch.kv_head(h)]
            vectors = [(got["query"][n, s], q[n, s])]
            vectors += [(got["query_rotated"][n, s, k], turned[n, s, k]) for k in range(len(labels))]
            for rank, query in vectors:  # the input's alone
                scale = float((query.abs() @ W_K.abs() @ readout.G.abs().T).max())
                assert_ranks(rank[None], query @ W_K, readout, spelled[-1:], kept, scale)
    N, F, S = len(ps), len(layers), len(HEADS)
    assert got["key"].shape == got["key_attention"].shape == (N, F, 4, 5) and got["query"].shape == (N, S)
    assert got["query_rotated"].shape == (N, S, 4)
    assert got["key"][1, :, 3].isnan().all() and got["key"][1, :, :3, 3].isnan().all()  # three demonstrations
    assert not got["key"][1, :, :3, 4].isnan().any()  # the input
    assert got["query_rotated"][2, :, 2:].isnan().all() and not got["query_rotated"][2, :, :2].isnan().any()
    stored, read = towers.tower_ranks(small, ps, HEADS), towers.tower_ranks(small, ps, HEADS)  # computed, then a cache read
    for kind in got:
        exact(read[kind], stored[kind])


def test_tower_ranks_keep_a_layer_at_a_time(small, ps, tmp_path, monkeypatch):
    """Head sets that share layers (a report's views) rank each layer once: a second set passes the prompt
    set for its new layer alone, reads the shared one as the first set kept it, and its heads' ranks are
    those of their layer ranked alone."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    asked, rank = [], towers.layer_tower_ranks
    monkeypatch.setattr(towers, "layer_tower_ranks", lambda m, ps, layers, *rest: asked.append(list(layers)) or
                        rank(m, ps, layers, *rest))
    first = towers.tower_ranks(small, ps, HEADS)  # layers 0 and 2
    second = towers.tower_ranks(small, ps, [(1, 2), (2, 0), (2, 3)])  # layers 1 and 2
    assert asked == [[0, 2], [1]]
    for kind in ("key", "key_attention"):
        exact(second[kind][:, 1], first[kind][:, 1])  # layer 2
    for kind in ("query", "query_rotated"):
        exact(second[kind][:, 2], first[kind][:, 0])  # head (2, 3)
        assert not torch.equal(second[kind][:, 1].nan_to_num(), second[kind][:, 2].nan_to_num())  # (2, 0) is its own
    alone = towers.tower_ranks(small, ps, [(1, 2)], cache=False)
    for kind in alone:
        exact(second[kind][:, :1], alone[kind])


class KeptScores(LabelEdit):
    """Keeps the scaled scores q.k * scaling the model computed from its own turned queries and keys
    [B, H, T, T], before any cap and the mask; changes nothing."""

    def scores(self, query, key, scores, scaling, mask):
        self.kept = scores.detach().clone()
        return scores


def unturned_keys(m, layer: int, seen: dict) -> tuple:
    """(module, read): the module whose output holds `layer`'s keys before any rotation, and how
    [B, H_kv, T, dh] is read from that output into seen[layer] (written from the HF modeling files)."""
    attn, arch = m.arch.attn(layer), m.arch
    if arch.family == "gpt2":  # fused c_attn: queries | keys | values
        d = arch.d_model
        return attn.c_attn, lambda out: out[..., d : 2 * d].unflatten(-1, (arch.n_heads, arch.d_head)).transpose(1, 2)
    if hasattr(attn, "k_norm"):  # Gemma 3: the key norm's output, [B, H_kv, T, dh] already
        return attn.k_norm, lambda out: out
    return attn.k_proj, lambda out: out.unflatten(-1, (arch.n_kv_heads, arch.d_head)).transpose(1, 2)


def key_bias(m, layer: int) -> torch.Tensor:
    """[H_kv, dh]: the bias the key projection adds (zeros where it has none)."""
    attn, arch = m.arch.attn(layer), m.arch
    if arch.family == "gpt2":
        bias = attn.c_attn.bias[arch.d_model : 2 * arch.d_model]
    else:
        bias = attn.k_proj.bias if attn.k_proj.bias is not None else torch.zeros(arch.n_kv_heads * arch.d_head)
    return bias.view(arch.n_kv_heads, arch.d_head)


def test_a_query_turned_by_a_labels_distance_scores_its_key_as_the_model_does(small, ps):
    """In every head, the last query turned by a label's distance, dotted with that label's key as the
    model projects it (before any rotation) and scaled, is the model's own pre-softmax score of the
    label (GPT-2: the query itself); mapped into the key-input space, q R(t - p) W_K, it dots with the
    key projection's input to the same score less the key bias's term, where no key norm divides each
    key by its own rms (Gemma 3's stays outside, as `query_in_key_space`'s does)."""
    arch, labels = small.arch, ps.positions
    heads = [(l, h) for l in range(arch.n_layers) for h in range(arch.n_heads)]
    edits = {l: KeptScores(torch.ones(arch.n_heads, dtype=torch.bool), labels) for l in range(arch.n_layers)}
    seen, hooks = {}, []
    for l in range(arch.n_layers):
        module, read = unturned_keys(small, l, seen)
        hooks.append((module, "post", lambda mod, args, out, l=l, read=read: seen.update({l: read(out)})))
    with _edited(small, edits, labels, hooks):
        dec = decompose(small, ps.texts, record=["queries", "key_input"])
    q = dec.queries.flatten(1, 2)  # [N, S, dh], the heads in layer order
    turned = towers.rotated_queries(arch, q, heads, labels.last[:, None] - labels.labels.clamp(min=0))  # [N, S, D, dh]
    rows, valid = torch.arange(len(ps))[:, None], labels.valid
    at = labels.labels.clamp(min=0)
    for s, (l, h) in enumerate(heads):
        g, scaling = arch.kv_head(h), arch.attn(l).scaling
        model = edits[l].kept[rows, h, labels.last[:, None], at]  # [N, D]
        key = seen[l][rows, g, at]  # [N, D, dh]
        ours = (turned[:, s] * key).sum(-1) * scaling
        scale = float(((turned[:, s].abs() * key.abs()).sum(-1) * scaling).max())
        close(ours[valid], model[valid], scale=scale)
        if arch.family != "gemma3":
            mapped = turned[:, s] @ arch.W_K(l)[g]  # [N, D, d]
            inputs = dec.key_input[rows, l, at]  # [N, D, d]
            bias_term = turned[:, s] @ key_bias(small, l)[g]  # [N, D]
            ours = ((mapped * inputs).sum(-1) + bias_term) * scaling
            close(ours[valid], model[valid], scale=scale)
    if arch.family != "gpt2":  # a rotary family: the unturned query scores otherwise
        plain = (q[:, -1, None] * seen[arch.n_layers - 1][rows, arch.kv_head(arch.n_heads - 1), at]).sum(-1)
        assert not torch.allclose(plain * arch.attn(arch.n_layers - 1).scaling, edits[arch.n_layers - 1].kept[
            rows, arch.n_heads - 1, labels.last[:, None], at], atol=1e-4)


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)  # the tokenizer alone
def test_adjacent_texts_and_farther_ones_of_the_same_class_relation(small):
    """By hand, (label key, text) pairs, texts numbered as in `tower_ranks` (the input last, 4): in the
    paper's example (bar bar foo foo, the input of foo's class) the 8-key's previous text is "like",
    of the other class as "love" is; the 5-key's next is "eight", of the other class as "two" and the
    input are; the 8-key's next is "two", of its class as the input is; the 11-key's next (the input)
    has nothing farther. A prompt of three labels has its input after its third."""
    ps = prompt_set_from_texts(small, ["love : bar like : bar eight : foo two : foo one :",
                                       "happy days : bar seven : foo three : foo ten :"])

    def pairs(mask: torch.Tensor) -> list[set]:
        return [{tuple(kj) for kj in m.nonzero().tolist()} for m in mask]
    before, farther_before = towers.adjacent_texts(ps, -1)
    after, farther_after = towers.adjacent_texts(ps, 1)
    assert pairs(before) == [{(2, 1)}, set()] and pairs(farther_before) == [{(2, 0)}, set()]
    assert pairs(after) == [{(1, 2), (2, 3)}, {(0, 1), (1, 2)}]
    assert pairs(farther_after) == [{(1, 3), (1, 4), (2, 4)}, {(0, 2), (0, 4), (1, 4)}]


def test_order_increases_add_each_head_alone_in_a_random_order_and_last(small, ps, tmp_path, monkeypatch):
    """Alone: I(head | x_l); random order: I(head | x_l + the heads before it), the order drawn from
    the seeded generator as documented; last: I(head | x_l + every other head of its layer); batched
    in twos against naive full-vocabulary increases of one batch."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    got = order.order_increases(small, ps, HEADS, seed=3, batch_size=2, cache=False)
    dec = decompose(small, TEXTS)
    parts, readout, H = dec.heads(), Readout(small.arch), small.arch.n_heads
    place = torch.rand(len(TEXTS), len(HEADS), H, generator=torch.Generator().manual_seed(3))
    for s, (l, h) in enumerate(HEADS):
        before = place[:, s] < place[:, s, h : h + 1]  # [N, H]
        bases = [dec.resid[:, l], dec.resid[:, l] + (parts[:, l] * before[..., None]).sum(1),
                 dec.resid[:, l] + parts[:, l].sum(1) - parts[:, l, h]]
        for o, base in enumerate(bases):
            want = naive_increase(readout, base, parts[:, l, h][:, None], dec.predictions, dec.scale)[:, 0]
            close(got[:, s, o], want, scale=logprob_scale(dec))
    assert not torch.equal(got[..., 0], got[..., 1])  # the order matters a little in a random model
    cached = order.order_increases(small, ps, HEADS, seed=3)
    close(cached, got, scale=logprob_scale(dec))  # one batch of three: another summation order
    exact(order.order_increases(small, ps, HEADS, seed=3), cached)  # a cache read


def test_similarity_is_the_cosine_of_the_mean_input_embeddings(small, ps):
    got = towers.similarity(small, ps)
    E = small.model.get_input_embeddings().weight.detach().float()

    def embed(text: str) -> torch.Tensor:
        return E[small.tokenizer(" " + text, add_special_tokens=False)["input_ids"]].mean(0)
    want = torch.cosine_similarity(embed("a rather long demonstration here"), embed("six"), dim=0)
    close(got[2, 0], want, scale=1.0)
    assert got[2, 2:].isnan().all() and not got[0].isnan().any()  # two demonstrations, then padding


def test_double_centring_leaves_no_prompt_or_position_mean():
    x = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(0)) + torch.arange(4.0) + torch.arange(6.0)[:, None, None]
    c = towers.double_centred(x)
    close(c.mean(-1), torch.zeros(6, 3), scale=float(x.abs().max()))
    close(c.mean(0), torch.zeros(3, 4), scale=float(x.abs().max()))
    close(c, x - x.mean(-1, keepdim=True) - x.mean(0, keepdim=True) + x.mean((0, 2), keepdim=True), scale=float(x.abs().max()))
