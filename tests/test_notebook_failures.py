"""A notebook given a bad parameter stops at the first cell that can know, with one line,
before the slow work: the parameters cell for a missing data directory, the model cell for a
head the model lacks, the first prompt set for more prompts than a dataset holds (so no
notebook prints an N it did not run)."""
from __future__ import annotations

import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from icl_helpers.model.offline import offline_choices
from icl_helpers.paths import REPO_ROOT


def failing_cell(name: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> tuple[str, str]:
    """Run notebooks/`name` with `env` set; the source of the cell that raised, and its error line (all the
    reader sees of it: a UsageError shows no traceback)."""
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    path = REPO_ROOT / "notebooks" / name
    nb = nbformat.read(path, as_version=4)
    with pytest.raises(CellExecutionError):
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    cell = next(c for c in nb.cells if any(o.output_type == "error" for o in c.get("outputs", [])))
    error = next(o for o in cell.outputs if o.output_type == "error")
    if error.ename == "UsageError":
        assert [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in error.traceback] == [f"{error.ename}: {error.evalue}\n"]
    return cell.source, f"{error.ename}: {error.evalue}"


def test_a_missing_data_directory_stops_the_parameters_cell(tmp_path, monkeypatch):
    source, error = failing_cell("02_project.ipynb", monkeypatch, ICL_DATA_DIR=str(tmp_path / "no-such"))
    assert "p = notebook_params(" in source and "load_model" not in source  # before the model and the word datasets
    assert error.startswith(f"UsageError: Data directory {tmp_path}/no-such does not exist")


def test_more_prompts_than_a_dataset_holds_stops_before_any_pass(monkeypatch):
    source, error = failing_cell("01_locate.ipynb", monkeypatch, ICL_N_PROMPTS="1001", TQDM_DISABLE="1")
    assert source.startswith("table2 = accuracy.accuracy_table(")  # the first cell that builds prompts
    assert error == ("UsageError: sentiment_number has 1,000 records: ask for at most 1,000 prompts, not 1,001.")


def test_heads_the_model_lacks_stop_the_model_cell(monkeypatch):
    """ICL_HEADS is read with the parameters, but only the model knows its heads: checked as it loads,
    before Table 2 and Fig. 2 run."""
    source, error = failing_cell("01_locate.ipynb", monkeypatch, ICL_HEADS="29-8,30-0", ICL_N_PROMPTS="2", TQDM_DISABLE="1")
    assert source.startswith("m = p.load_model()")
    assert error == ("UsageError: Head 30-0 is not in this model: it has 30 layers x 9 heads (layer-head from 0-0 to "
                     "29-8). Set HEADS in the parameters cell (or ICL_HEADS).")


def test_a_mistyped_model_stops_the_model_cell_naming_the_close_offline_model_and_what_to_set(monkeypatch):
    """A name that is neither a folder nor in the hub's cache (offline) ends in one line: the offline
    model it is close to, every offline model, and the parameter to set."""
    source, error = failing_cell("01_locate.ipynb", monkeypatch, ICL_MODEL="qwen2.5-0.5b", HF_HUB_OFFLINE="1")
    assert source.startswith("m = p.load_model()")
    assert error.startswith("UsageError: Could not load model 'qwen2.5-0.5b': it is not a local directory")
    assert error.endswith(f"Did you mean 'qwen2.5-coder-0.5b'? {offline_choices('qwen2.5-coder-0.5b')} Set MODEL in the "
                          "parameters cell (or ICL_MODEL).")
