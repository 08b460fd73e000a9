"""Progress bars: shown as a step starts, removed when it ends, off on request or where
TQDM_DISABLE=1 (the main job)."""
import io
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from icl_helpers.core import attribution, batching
from icl_helpers.core.attribution import Readout, readout_of
from icl_helpers.progress import progress_bar
from icl_helpers.studies import function_vectors, head_types, mrr, set_ablations, towers
from tests.conftest import STUDY_HEADS
from tests.test_head_types import fv_prompt_set


def test_bars_show_at_once_leave_nothing_and_obey_tqdm_disable(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    bar = progress_bar(3, "locate")
    assert (bar.delay, bar.leave, bar.disable, bar.desc, bar.total) == (0, False, False, "locate", 3)
    bar.close()
    assert progress_bar(3, "locate", enabled=False).disable
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_bar(3, "locate").disable


def test_a_one_step_bar_names_its_step_before_the_step_ends(monkeypatch):
    """A step of one batch: the bar's text is out before the update that ends it."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    bar = progress_bar(1, "locate sst2")
    assert "locate sst2" in out.getvalue() and "0/1" in out.getvalue()
    bar.update()
    bar.close()


def drawn_bars(monkeypatch, owner: object, name: str) -> tuple[list, list[str]]:
    """The bars the readout makes from now (kept, to read their counts), and stderr as it stood at each
    call of `owner`'s function `name`, bars on."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out, bars, seen = io.StringIO(), [], []
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(attribution, "progress_bar", lambda *a: bars.append(progress_bar(*a)) or bars[-1])
    function = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a: seen.append(out.getvalue()) or function(*a))
    return bars, seen


def vocabulary_chunks(m) -> int:
    """How many chunks m's readout walks the vocabulary in (50 for GPT-2's on a CPU)."""
    return -(-m.arch.W_U().shape[0] // readout_of(m).sizes.vocab_chunk)


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
@pytest.mark.parametrize("kind", ["label", "related concept"])
def test_a_vocabulary_rank_step_draws_one_bar_from_its_start_over_its_chunks(small, ps, monkeypatch, kind):
    """Fig. 5's ranks (tens of seconds in 03's cells, none of it under a bar before): one bar for the step,
    drawn at 0 before the first chunk is ranked, advanced once a chunk of each batch of prompts (here 3
    prompts in 2 batches), to its end."""
    chunks = vocabulary_chunks(small)  # the readout made before the bars are watched: the step's only bar is its own
    bars, seen = drawn_bars(monkeypatch, Readout, "heads_fold")  # once a chunk
    ranks = mrr.label_ranks if kind == "label" else mrr.concept_ranks
    ranks(small, ps, STUDY_HEADS, batch_size=2, cache=False)
    title = f"{ps.title}: {kind} ranks in 2 heads"
    assert [(bar.desc, bar.total, bar.n) for bar in bars] == [(title, 2 * chunks, 2 * chunks)]
    assert len(seen) == 2 * chunks and f"{title}:   0%" in seen[0] and f"0/{2 * chunks}" in seen[0]


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_the_towers_query_ranks_draw_their_bar_before_the_queries_are_turned(small, ps, monkeypatch):
    """The input's ranks in every head's last query, after the pass and its bar (35 s for sentiment_number's
    eight layers on the bundled model, in 02's verdicts, none of it under a bar before): one bar over the
    vocabulary chunks, drawn at 0 before the queries are turned, advanced to its end."""
    chunks = vocabulary_chunks(small)
    bars, seen = drawn_bars(monkeypatch, towers, "rotated_queries")
    towers.layer_tower_ranks(small, ps, [0, 2])
    title = f"{ps.title}: the input's ranks in {2 * small.arch.n_heads} heads' last queries"
    assert [(bar.desc, bar.total, bar.n) for bar in bars] == [(title, chunks, chunks)]
    assert len(seen) == 1 and f"{title}:   0%" in seen[0] and f"0/{chunks}" in seen[0]


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_each_pass_of_the_head_set_study_draws_a_bar_to_its_end(small, monkeypatch, tmp_path):
    """09's first cell ran its clean prompts and heads' mean outputs (4 to 5 s), its attention on random
    sequences (30 s) and each dataset's zero-shot and shuffled-label passes (4 to 21 s) under no bar: each
    draws one now, over its batches."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    out, ps, bars = io.StringIO(), fv_prompt_set(small), []  # two demonstrations of each class, as shuffling needs
    monkeypatch.setattr("sys.stderr", out)
    for module in (batching, head_types):
        monkeypatch.setattr(module, "progress_bar", lambda *a: bars.append(progress_bar(*a)) or bars[-1])
    function_vectors.function_vector_scores(small, ps, correct_only=False, cache=False)  # a random model
    means = set_ablations.last_position_means(small, [ps])
    head_types.repeated_sequence_scores(small, n_sequences=2, length=4, cache=False)
    set_ablations.set_ablations(small, ps, [], means, cache=False)
    labels = [f"function vectors: {ps.title}, the clean prompts", f"function vectors: {ps.title}",
              f"head sets: {ps.title}, the heads' outputs", "attention on 2 random sequences, 2 copies",
              f"head sets: {ps.title}", f"head sets: {ps.title}, zero-shot", f"head sets: {ps.title}, shuffled labels"]
    assert [(bar.desc, bar.n, bar.total) for bar in bars] == [(label, 1, 1) for label in labels]  # one batch each
    assert all(f"{label}:   0%" in out.getvalue() for label in labels)  # drawn, not disabled

WIDGET = "application/vnd.jupyter.widget-view+json"
LIVE_RUN = [  # a notebook's model cell, then a step of three batches between two prints
    "from icl_helpers import load_model, locate\nm = load_model('smollm2-135m')",
    "print('before')\nresult = locate(m, ['love : bar like : bar eight : foo two : foo one :'] * 3, batch_size=1)\n"
    "print('after')",
]


def live_run_saved(path: Path) -> None:
    """Run LIVE_RUN in a kernel as JupyterLab does (bars on: no TQDM_DISABLE; widget state kept,
    as with JupyterLab's "save widget state") and save it to `path` as JupyterLab would (streams merged)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in LIVE_RUN])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    nbformat.write(nb, path)


def test_library_bars_are_off_in_a_notebook_and_back_after(monkeypatch):
    """Inside a kernel, transformers' bars are off around our calls, the GGUF reader's too (its bar, drawn as the
    bundled model is first converted, obeys no switch: a fresh cache left it under 01's model cell), and each is
    back as it was afterwards; outside a kernel nothing changes."""
    from transformers import modeling_gguf_pytorch_utils as gguf
    from transformers.utils import logging

    from icl_helpers import progress

    before = gguf.tqdm
    with progress.library_bars_off():  # not in a kernel here
        assert gguf.tqdm is before and logging.is_progress_bar_enabled()
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    with progress.library_bars_off():
        assert not logging.is_progress_bar_enabled()
        bar = gguf.tqdm(range(3), file=io.StringIO())
        assert bar.disable
    assert gguf.tqdm is before and logging.is_progress_bar_enabled()


def test_a_saved_live_run_keeps_no_widget_and_no_bar(monkeypatch, tmp_path):
    """Issue 60: a live run saved kept every closed bar as a widget output ("Error displaying
    widget: model not found" reopened in JupyterLab, a bar frozen at 0% on GitHub) and
    transformers' loading bar under the model cell. Now: no widget output, no widget state, and
    the notebook rendered statically (nbconvert HTML, as GitHub and nbviewer do) shows the
    prints and no bar."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    path = tmp_path / "live.ipynb"
    live_run_saved(path)
    nb = nbformat.read(path, as_version=4)
    outputs = [o for c in nb.cells for o in c.outputs]
    assert not [o for o in outputs if WIDGET in o.get("data", {})]
    assert not nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state")
    html, _ = HTMLExporter().from_notebook_node(nb)
    text = re.sub(r"<style.*?</style>|<script.*?</script>|<[^>]+>", "", html, flags=re.S)
    assert "before" in text and "after" in text
    assert not re.search(r"\d+%\||\d+/\d+ \[|it/s|Loading weights", text), "a bar was left behind"
