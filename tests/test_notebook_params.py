"""Notebook parameters: the cell's defaults, overridden by the environment."""
from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from icl_helpers import UsageError
from icl_helpers.notebook import ENV, Params, notebook_params, verdict_sizes
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


def test_the_echo_names_no_folder_outside_the_checkouts_parent(monkeypatch):
    """A data directory beside or inside the checkout is shown from it; one elsewhere, by its name alone,
    also where the path climbs out through the checkout."""
    monkeypatch.setattr("icl_helpers.notebook.REPO_ROOT", Path("/srv/work/icl_helpers"))
    given = ["/srv/work/shared/datasets", "/srv/work/icl_helpers/data/sets", "/mnt/big/sets", "/srv/work/icl_helpers/../../x/sets"]
    shown = [repr(Params("smollm2-135m", 32, 8, None, "float32", Path(d), 0)).split("data_dir=")[1].split(",")[0] for d in given]
    assert shown == ["'../shared/datasets'", "'data/sets'", "'.../sets'", "'.../sets'"]


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


def test_the_echo_names_each_value_the_environment_set_and_its_variable(monkeypatch):
    """The parameters cell shows its own values; what the environment replaced is said under the echo."""
    assert "\n" not in repr(notebook_params(n_prompts=32))
    monkeypatch.setenv("ICL_N_PROMPTS", "64")
    monkeypatch.setenv("ICL_HEADS", "1-2,3-4")
    assert repr(notebook_params(n_prompts=32)) == (
        "Params(model='smollm2-135m', n_prompts=64, n_sentence_prompts=10, device=None, dtype='float32', data_dir=None, "
        "seed=0, heads='1-2,3-4')\nSet by the environment, not by this cell: N_PROMPTS = 64 (ICL_N_PROMPTS), "
        "HEADS = '1-2,3-4' (ICL_HEADS).")


NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9]*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_committed_notebooks_echo_is_its_parameters_cell_run_as_the_main_job_runs_it(path, monkeypatch, capsys):
    """The main job refreshes the committed notebooks with the sizes scripts/main.sh sets; the parameters cell
    run under them prints the very echo committed below it, which says what the environment set."""
    sizes = re.findall(r"(ICL_N_\w*PROMPTS)=\$\{\1:-(\d+)\}", (REPO_ROOT / "scripts" / "main.sh").read_text())
    assert [v for v, _ in sizes] == ["ICL_N_PROMPTS", "ICL_N_SENTENCE_PROMPTS"]
    for variable, value in sizes:
        monkeypatch.setenv(variable, value)
    cell = next(c for c in nbformat.read(path, as_version=4).cells if "notebook_params(" in c.source)
    echo = next(o for o in cell.outputs if o.output_type == "execute_result")["data"]["text/plain"]
    namespace = {"notebook_params": notebook_params, "verdict_sizes": verdict_sizes}  # the first cell imports them
    exec(compile(cell.source.rsplit("\np", 1)[0], str(path), "exec"), namespace)  # the cell without its echo line
    assert repr(namespace["p"]) == echo


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


def test_a_task_is_read_from_the_cell_or_the_environment_and_stands_in_for_the_word_datasets(tmp_path, monkeypatch):
    """TASK (or ICL_TASK), from the checkout: read at once, echoed by its name, the one word dataset, no sentence
    dataset; a bad file or too many records is one line naming the cell's parameter."""
    p = notebook_params(task="data/tasks/fruit_tool.jsonl")
    assert p.task.name == "fruit_tool" and p.word == ["fruit_tool"] and p.sentence(["sst2", "trec"]) == []
    assert repr(p).endswith("seed=0, task='fruit_tool')")
    assert "task=" not in repr(notebook_params()) and notebook_params().word == ["sentiment_number", "animal_country"]
    other = tmp_path / "kinds.jsonl"
    other.write_text("".join(f'{{"input": "{c} {i}", "class": "{c}"}}\n' for c in ("a", "b") for i in range(12)))
    monkeypatch.setenv("ICL_TASK", str(other))
    p = notebook_params(task="data/tasks/fruit_tool.jsonl")
    assert p.task.name == "kinds" and p.from_env == (("task", "ICL_TASK"),)
    monkeypatch.setenv("ICL_TASK", str(tmp_path / "none.jsonl"))
    with pytest.raises(UsageError, match=r"^No task file .*none.jsonl: .* Set TASK in the parameters cell \(or ICL_TASK\)\.$"):
        notebook_params()
    three = tmp_path / "three.jsonl"
    three.write_text("".join(f'{{"input": "{c} {i}", "class": "{c}"}}\n' for c in "abc" for i in range(10)))
    monkeypatch.setenv("ICL_TASK", str(three))
    with pytest.raises(UsageError, match=r"ask for at most 30 prompts, not 31\. Set N_PROMPTS in the parameters cell"):
        notebook_params(n_prompts=31)
