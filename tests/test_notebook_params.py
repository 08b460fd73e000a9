"""Notebook parameters: the cell's defaults, overridden by the environment."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from icl_helpers import UsageError
from icl_helpers.notebook import ENV, Params, notebook_params
from icl_helpers.paths import REPO_ROOT


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)


def test_defaults_are_the_cells_values(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "d").mkdir()
    p = notebook_params(model="gpt2", n_prompts=7, data_dir="~/d")
    assert (p.model, p.n_prompts, p.device, p.dtype, p.seed) == ("gpt2", 7, None, "float32", 0)
    assert p.data_dir == tmp_path / "d"
    relative = os.path.relpath(tmp_path / "d", REPO_ROOT)  # as "../shared/datasets": from the checkout
    assert notebook_params(data_dir=relative).data_dir == REPO_ROOT / relative


def test_a_missing_data_directory_is_refused_with_the_parameters(tmp_path, monkeypatch):
    """In the parameters cell: before the model loads and the word datasets' work runs."""
    monkeypatch.setenv("ICL_DATA_DIR", str(tmp_path / "no-such"))
    with pytest.raises(UsageError, match=rf"^Data directory {tmp_path}/no-such does not exist: pass a directory holding sst2/"):
        notebook_params()


def test_echo_shows_no_absolute_path_beside_the_checkout():
    shown = repr(Params("smollm2-135m", 32, 8, None, "float32", REPO_ROOT.parent / "shared" / "datasets", 0))
    assert shown == ("Params(model='smollm2-135m', n_prompts=32, n_sentence_prompts=8, device=None, dtype='float32', "
                     "data_dir='../shared/datasets', seed=0)")


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("ICL_MODEL", "gpt2-large")
    monkeypatch.setenv("ICL_N_PROMPTS", "1000")
    monkeypatch.setenv("ICL_N_SENTENCE_PROMPTS", "500")
    monkeypatch.setenv("ICL_DEVICE", "cuda")
    monkeypatch.setenv("ICL_DTYPE", "bfloat16")
    monkeypatch.setenv("ICL_DATA_DIR", "/")
    p = notebook_params(n_prompts=32)
    assert (p.model, p.n_prompts, p.n_sentence_prompts, p.device, p.dtype, p.data_dir) == (
        "gpt2-large", 1000, 500, "cuda", "bfloat16", Path("/"))


@pytest.mark.parametrize("value", ["many", "0"])
def test_bad_prompt_counts_say_what_to_do(monkeypatch, value):
    monkeypatch.setenv("ICL_N_PROMPTS", value)
    with pytest.raises(UsageError, match="ICL_N_PROMPTS|at least 1"):
        notebook_params()


def test_a_notebook_can_rename_a_variable(monkeypatch):
    monkeypatch.setenv("ICL_MODEL", "gpt2-large")
    assert notebook_params(model="smollm2-135m", env={"model": "ICL_LLAMA_MODEL"}).model == "smollm2-135m"
    monkeypatch.setenv("ICL_LLAMA_MODEL", "meta-llama/Llama-2-7b-hf")
    assert notebook_params(env={"model": "ICL_LLAMA_MODEL"}).model == "meta-llama/Llama-2-7b-hf"


def test_heads_are_read_from_the_cell_or_the_environment(monkeypatch):
    assert notebook_params().heads is None and "heads" not in repr(notebook_params())
    given = notebook_params(heads="19-11,20-11,22-0")
    assert given.heads == ((19, 11), (20, 11), (22, 0)) and repr(given).endswith("seed=0, heads='19-11,20-11,22-0')")
    assert notebook_params(heads=[(26, 14), (28, 10)]).heads == ((26, 14), (28, 10))
    monkeypatch.setenv("ICL_HEADS", "23-13")
    assert notebook_params(heads="19-11").heads == ((23, 13),)


@pytest.mark.parametrize("value", ["19.11", "19-11 20-11", "layer 19"])
def test_bad_heads_say_what_to_write(monkeypatch, value):
    monkeypatch.setenv("ICL_HEADS", value)
    with pytest.raises(UsageError, match=rf"^ICL_HEADS: '{value}' is not a head: write layer-head pairs separated by commas"):
        notebook_params()


def test_the_model_cell_checks_the_heads_against_the_model(monkeypatch):
    """Params.load_model loads the model the parameters name, then refuses a head it lacks."""
    loaded = SimpleNamespace(arch=SimpleNamespace(n_layers=3, n_heads=4))  # what the check reads of a model
    monkeypatch.setattr("icl_helpers.notebook.load_model", lambda *args: loaded if args == ("tiny", "cpu", "float32") else None)
    assert notebook_params(model="tiny", device="cpu", heads="2-3,0-0").load_model() is loaded
    assert notebook_params(model="tiny", device="cpu").load_model() is loaded
    monkeypatch.setenv("ICL_HEADS", "2-3,3-0")
    with pytest.raises(UsageError, match=r"^Head 3-0 is not in this model: it has 3 layers x 4 heads"):
        notebook_params(model="tiny", device="cpu").load_model()
