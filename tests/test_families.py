"""Every family the adapters' registry finds, tested from the registry alone: a small random model
of each model type decomposes exactly, the docs' family table lists exactly the registry, and a
new family is one file (a toy family, added from a temporary folder, loads and decomposes).
The families' own differences are tested further in test_families_norms, test_families_parallel
and test_gemma3."""
from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoModelForCausalLM

from icl_helpers import ICLModel, load_model
from icl_helpers.core.decompose import decompose
from icl_helpers.model import adapters
from icl_helpers.model.adapters import architectures
from tests.conftest import DEVICE, PROMPTS, _randomise
from tests.hand import assert_exact

# a 3-layer model of width 64, 4 query and 2 key/value heads of 16 dimensions, the GPT-2 vocabulary; GPT-J's
# rotary dimensions, 64 by default, made 8 to fit a head
SMALL = dict(vocab_size=50257, num_hidden_layers=3, hidden_size=64, intermediate_size=128, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rotary_dim=8)


def tiny_model(model_type: str) -> AutoModelForCausalLM:
    """A random model of `model_type` at the SMALL sizes (those of each sub-model too: Gemma 3's
    vision tower), from transformers' own default configuration of that type."""
    config = AutoConfig.for_model(model_type, **SMALL)
    for name in getattr(config, "sub_configs", {}):
        getattr(config, name).update(SMALL)
    return _randomise(AutoModelForCausalLM.from_config(config, attn_implementation="eager"), seed=len(model_type)).to(DEVICE)


@pytest.mark.parametrize("model_type", list(architectures()))
def test_every_registered_family_decomposes_exactly(model_type, gpt2_tokenizer):
    m = ICLModel(tiny_model(model_type), gpt2_tokenizer, name=model_type)
    assert type(m.arch) is architectures()[model_type] and m.arch.n_layers == 3
    assert_exact(m, PROMPTS)


def test_the_registry_finds_every_family_module():
    found = architectures()
    assert {"gpt2", "llama", "mistral", "qwen2", "gemma3", "gemma3_text", "gptj"} <= set(found)
    assert list(found) == sorted(found) and found["qwen2"] is found["llama"]
    folder = Path(adapters.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "base"}
    assert {a.__module__.rsplit(".", 1)[1] for a in found.values()} == modules  # each module a family, none left out


def test_the_docs_family_table_is_the_registry():
    """docs/models.md's table: each row's model types (first column) and their adapters (second)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    table = text[text.index("| family (`model_type`) | adapter |"):].split("\n\n")[0].splitlines()[2:]
    listed = {}
    for row in table:
        types, names = (re.findall(r"`(\w+)`", cell) for cell in row.split(" | ")[:2])
        assert {architectures()[t].__name__ for t in types} == set(names), row
        listed.update(dict.fromkeys(types))
    assert sorted(listed) == list(architectures())


TOY = '''
"""A toy family: Llama's layout under a model type of its own, with its adapter, in one file."""
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from icl_helpers.model.adapters.llama import LlamaArch


class ToyConfig(LlamaConfig):
    model_type = "toy"


class ToyForCausalLM(LlamaForCausalLM):
    config_class = ToyConfig


AutoConfig.register("toy", ToyConfig, exist_ok=True)
AutoModelForCausalLM.register(ToyConfig, ToyForCausalLM, exist_ok=True)


class ToyArch(LlamaArch):
    family = "toy"


FAMILIES = {"toy": ToyArch}
'''


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    """A folder holding one file, toy.py, that the adapters' registry searches too."""
    folder = tmp_path / "adapters"
    folder.mkdir()
    (folder / "toy.py").write_text(textwrap.dedent(TOY))
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(folder)])
    architectures.cache_clear()
    yield
    monkeypatch.undo()
    architectures.cache_clear()
    sys.modules.pop(f"{adapters.__name__}.toy", None)


def test_a_family_is_one_file(toy_family, gpt2_tokenizer, tmp_path):
    """The toy file, found by the registry, is all a new family needs: a saved model of its type
    loads (its family checked before its weights) and decomposes exactly."""
    assert "toy" in architectures() and architectures()["toy"].__name__ == "ToyArch"
    toy = AutoModelForCausalLM.from_config(AutoConfig.for_model("toy", **SMALL))
    _randomise(toy, seed=3).save_pretrained(tmp_path / "toy-model")
    gpt2_tokenizer.save_pretrained(tmp_path / "toy-model")
    m = load_model(str(tmp_path / "toy-model"), device="cpu")
    assert (m.arch.family, type(m.model).__name__) == ("toy", "ToyForCausalLM")
    assert_exact(m, PROMPTS)
    assert decompose(m, PROMPTS).attn.shape == (len(PROMPTS), 3, 64)
