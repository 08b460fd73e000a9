"""Progress bars: shown as a step starts, removed when it ends, off on request or where
TQDM_DISABLE=1 (the main job)."""
import io
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from icl_helpers.progress import progress_bar


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
