"""Every notebook executed a second time, on a GPT-2-small-shaped model with random weights.

No GPT-2 weights can be installed offline, so this run checks the GPT-2 path of every study
end to end (LayerNorm, biases, learned positions, the real GPT-2 tokenizer) at a tiny N,
and that each notebook copes with a model that gets nothing right: no correct prompts, no
located structure. It also runs every notebook on given heads (ICL_HEADS; the run on the bundled
model takes the top 20 located). Its numbers mean nothing; with a network, ICL_MODEL=gpt2 runs
the real one.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from transformers import GPT2Config, GPT2LMHeadModel

from icl_helpers.paths import REPO_ROOT, cache_root

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("[0-9]*.ipynb"))
SEED = 0
HEADS = "11-3,10-0,9-7"  # given to every notebook, so that each runs its HEADS path


def random_gpt2_small(tokenizer) -> Path:
    """A saved GPT-2 small shape (12 layers x 12 heads, d 768, 1,024 positions) with the real
    GPT-2 tokenizer and seeded random weights: GPT-2's own initialisation, plus small random
    biases and LayerNorm parameters so that every term of the decomposition is non-zero."""
    folder = cache_root() / "models" / f"gpt2-small-random-seed{SEED}"
    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(SEED)
    model = GPT2LMHeadModel(GPT2Config())
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name or name.startswith("transformer.ln_f"):
                p.add_(torch.randn(p.shape, generator=g) * 0.02)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, folder)
    return folder


def saved_small_model(kind: str, folder: Path, tokenizer) -> Path:
    """`small_model(kind)` (3 layers x 4 heads) saved with `tokenizer` in folder/<kind>-small-random, with room for
    the notebooks' prompts (RoPE computes any position)."""
    from tests.conftest import small_model

    saved = folder / f"{kind}-small-random"
    model = small_model(kind)
    model.config.max_position_embeddings = 1024
    model.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    return saved


def executed(path: Path) -> tuple[str, str]:
    """The notebook at `path` run top to bottom in a kernel of this environment: (its code, its outputs' text)."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    return code, text


@pytest.fixture(scope="module")
def gpt2_env(monkeypatch_module, gpt2_tokenizer) -> None:
    folder = random_gpt2_small(gpt2_tokenizer)
    for var in ("ICL_MODEL", "ICL_LLAMA_MODEL"):
        monkeypatch_module.setenv(var, str(folder))
    monkeypatch_module.setenv("ICL_N_PROMPTS", "4")
    monkeypatch_module.setenv("ICL_N_SENTENCE_PROMPTS", "2")
    monkeypatch_module.setenv("ICL_HEADS", HEADS)
    monkeypatch_module.setenv("TQDM_DISABLE", "1")
    monkeypatch_module.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_random_gpt2(path: Path, gpt2_env) -> None:
    code, text = executed(path)
    assert "gpt2-small-random" in text  # the parameters echo: it ran on this model, not the default
    assert f"heads='{HEADS}'" in text and "p.heads" in code  # and on the heads given
    assert code.count("verdicts.report(") == code.count("heads=p.heads, announce=")  # its verdicts too
    if "report_accuracy(" in code:  # a model that gets nothing right is said to (07 reports on sentence datasets only)
        assert "Note: no better than chance." in text or "no copy of the sentence datasets here" in text
    assert "nan%" not in text.lower()


OTHER_FAMILIES = {"neox": "parallel blocks", "gemma2": "norms ending each branch, soft caps"}  # kind -> what it adds
OTHER_NOTEBOOKS = [p for p in NOTEBOOKS if p.stem in ("01_locate", "08_interventions")]  # locate; the interventions


@pytest.mark.parametrize("path", OTHER_NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.parametrize("kind", OTHER_FAMILIES)
def test_notebook_runs_on_other_families(kind: str, path: Path, gpt2_tokenizer, tmp_path, monkeypatch) -> None:
    """Locate and the interventions, end to end, on a small random model of a parallel-residual
    family and of a post-norm family (3 layers x 4 heads, the GPT-2 tokenizer)."""
    folder = saved_small_model(kind, tmp_path, gpt2_tokenizer)
    for var, value in {"ICL_MODEL": str(folder), "ICL_LLAMA_MODEL": str(folder), "ICL_N_PROMPTS": "4",
                       "ICL_N_SENTENCE_PROMPTS": "2", "ICL_HEADS": "2-3,1-0", "TQDM_DISABLE": "1"}.items():
        monkeypatch.setenv(var, value)
    _, text = executed(path)
    assert f"{kind}-small-random" in text and "heads='2-3,1-0'" in text  # it ran on this model and these heads


TASK_NOTEBOOKS = [p for p in NOTEBOOKS if p.stem[:2] in ("01", "02", "03", "04", "05", "06", "08")]  # ICL_TASK's


@pytest.mark.parametrize("path", TASK_NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_runs_on_a_task_in_place_of_the_word_datasets(path: Path, gpt2_tokenizer, tmp_path, monkeypatch) -> None:
    """ICL_TASK: the notebook echoes the task, studies it where it studied the word datasets, reads no sentence
    dataset (saying why), and its verdicts judge the task (a small random Llama-family model, 3 layers x 4 heads)."""
    folder = saved_small_model("llama-gqa", tmp_path, gpt2_tokenizer)
    for var, value in {"ICL_MODEL": str(folder), "ICL_N_PROMPTS": "4", "ICL_N_SENTENCE_PROMPTS": "2",
                       "ICL_HEADS": "2-3,1-0", "ICL_TASK": "data/tasks/fruit_tool.jsonl", "TQDM_DISABLE": "1",
                       "ICL_HELPERS_CACHE": str(tmp_path / "cache")}.items():  # each set: gpt2_env's may be in force
        monkeypatch.setenv(var, value)
    code, text = executed(path)
    assert "heads='2-3,1-0', task='fruit_tool')" in text and "TASK = 'fruit_tool' (ICL_TASK)" in text
    assert "sentence prompts a" not in text  # its verdict sizes count the claims judged on the task
    assert code.count("verdicts.report(") == code.count("task=p.task)")  # its verdicts judge the task
    assert "sentiment_number" not in text.replace("on the word dataset sentiment_number", "")  # a claim's words aside
    if "no_sentence_data(p)" in code:
        assert "Nothing to show here: the task fruit_tool stands in for the paper's word datasets" in text
