"""What a saved notebook keeps of its explorers: the static copy, not the live widget.

An explorer's output holds the live widget's view and a static copy of its figure or table
(`widgets.Explorer`). The view needs its kernel's widget model: a saved run opened again in a
trusted JupyterLab, whose kernel has no such model, would show "Error displaying widget: model
not found" in its place. So the project's Jupyter server saves every output that has a static
copy without its widget view. This module is that server extension; `scripts/setup.sh` enables
it in `.venv` (`python -m icl_helpers.viz.saving`). Only the file changes: the running session
keeps its widgets.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MODULE = "icl_helpers.viz.saving"  # this module's name, also when run with python -m
WIDGET = "application/vnd.jupyter.widget-view+json"
STATIC = ("image/png", "text/html")  # what JupyterLab can show in a widget's place
CONFIG = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "icl_helpers.json"


def drop_live_widgets(nb: dict[str, Any]) -> None:
    """Remove, in place, the widget view from each output of the notebook `nb` (its JSON as a
    dict) that also holds a static copy; a widget with none is left as it is."""
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET in data and any(kind in data for kind in STATIC):
                del data[WIDGET]


def pre_save(model: dict[str, Any], **_: Any) -> None:
    """A Jupyter contents manager's pre-save hook: a notebook is written by `drop_live_widgets`."""
    if model.get("type") == "notebook":
        drop_live_widgets(model["content"])


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """This module as a Jupyter server extension."""
    return [{"module": MODULE}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register `pre_save` with the server's contents manager."""
    serverapp.contents_manager.register_pre_save_hook(pre_save)


def enable(config: Path = CONFIG) -> None:
    """Enable the extension for the Jupyter server of this Python's environment: write its
    config file, `config` (in `etc/jupyter/jupyter_server_config.d/`, read at the server's start)."""
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {MODULE: True}}}, indent=1) + "\n")


if __name__ == "__main__":
    enable()
