"""A saved run keeps each explorer's static copy and drops its live widget view
(`icl_helpers.viz.saving`, the project's Jupyter server extension): on the notebook's JSON, through
the server's own contents manager and extension loader, and in the config that enables it. The
browser test opens such a saved run again (tests/test_browser.py)."""
from __future__ import annotations

import asyncio
import copy
import json

import ipywidgets
import nbformat
import pandas as pd
from jupyter_core.paths import jupyter_config_path
from jupyter_server.extension.config import ExtensionConfigManager
from jupyter_server.extension.manager import ExtensionPackage
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from matplotlib.figure import Figure

from icl_helpers.paths import REPO_ROOT
from icl_helpers.viz import saving, widgets

WIDGET = "application/vnd.jupyter.widget-view+json"


def draw(layer: int) -> Figure:
    fig = Figure(figsize=(2, 1))
    fig.add_subplot().set_title(f"layer {layer}")
    return fig


def display(data: dict) -> dict:
    return {"output_type": "display_data", "data": data, "metadata": {}}


def a_run() -> dict:
    """A notebook as JupyterLab saves a run: a figure explorer, a table explorer, a bare slider (a widget
    with no static copy), a printed line, a result and a markdown cell."""
    figure = widgets.Explorer(draw, {"layer": ipywidgets.IntSlider(value=1, min=0, max=3, description="layer")})
    table = widgets.Explorer(lambda n: pd.DataFrame({"n": [n]}), {"n": ipywidgets.IntSlider(value=2, description="n")})
    cells = [
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Title"},
        {"cell_type": "code", "id": "a", "metadata": {}, "execution_count": 1, "source": "...",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "located\n"}, display(figure._repr_mimebundle_())]},
        {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 2, "source": "...",
         "outputs": [display(table._repr_mimebundle_()), display(ipywidgets.IntSlider()._repr_mimebundle_()),
                     {"output_type": "execute_result", "execution_count": 2, "data": {"text/plain": "3"}, "metadata": {}}]},
    ]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_a_saved_explorer_keeps_its_static_copy_and_not_its_widget_view():
    """The two explorers lose their widget view and keep every other part unchanged; the bare slider,
    which has nothing to show in its place, and every other output and cell stay as they were."""
    nb = a_run()
    run = copy.deepcopy(nb)
    saving.drop_live_widgets(nb)
    explorers = [run["cells"][1]["outputs"][1]["data"], run["cells"][2]["outputs"][0]["data"]]
    assert [sorted(d) for d in explorers] == [[WIDGET, "image/png", "text/plain"], [WIDGET, "image/png", "text/html", "text/plain"]]
    for data in explorers:
        del data[WIDGET]
    assert nb == run
    assert list(nb["cells"][2]["outputs"][1]["data"]) == ["text/plain", WIDGET]  # the bare slider, as it was


def test_the_server_extension_makes_the_contents_manager_save_the_static_copy(tmp_path, monkeypatch):
    """Loaded as the server loads an extension, into the server's default contents manager: a notebook
    saved holds no widget view where an explorer was (the outputs `drop_live_widgets` makes); a file that
    is not a notebook is written as sent."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))  # the notary's, not the user's
    (tmp_path / "root").mkdir()
    manager = AsyncLargeFileManager(root_dir=str(tmp_path / "root"))
    package = ExtensionPackage(name=saving.MODULE, enabled=True)
    assert list(package.extension_points) == [saving.MODULE]
    package.load_point(saving.MODULE, type("ServerApp", (), {"contents_manager": manager})())
    sent = a_run()
    want = copy.deepcopy(sent)
    saving.drop_live_widgets(want)
    asyncio.run(manager.save({"type": "notebook", "format": "json", "content": sent}, "run.ipynb"))
    saved = nbformat.read(tmp_path / "root" / "run.ipynb", as_version=4)  # its lines joined again
    assert [[sorted(o.get("data", {})) for o in c.get("outputs", [])] for c in saved["cells"]] == [
        [], [[], ["image/png", "text/plain"]], [["image/png", "text/html", "text/plain"], [WIDGET, "text/plain"], ["text/plain"]]]
    assert [c.get("outputs") for c in saved["cells"]] == [c.get("outputs") for c in want["cells"]]
    text = json.dumps(a_run())
    asyncio.run(manager.save({"type": "file", "format": "text", "content": text}, "run.json"))
    assert (tmp_path / "root" / "run.json").read_text() == text


def test_setup_enables_the_extension_where_the_venvs_server_reads_its_config(tmp_path):
    """`enable` writes the config that turns the extension on, in a folder the Jupyter server of this
    environment reads at its start, and scripts/setup.sh runs it."""
    saving.enable(tmp_path / "jupyter_server_config.d" / "icl_helpers.json")
    assert ExtensionConfigManager(read_config_path=[str(tmp_path)]).get_jpserver_extensions() == {saving.MODULE: True}
    assert ExtensionPackage(name=saving.MODULE, enabled=True).validate()
    assert str(saving.CONFIG.parent.parent) in jupyter_config_path()
    assert "\n.venv/bin/python -m icl_helpers.viz.saving\n" in (REPO_ROOT / "scripts" / "setup.sh").read_text()
