"""What a researcher sees in JupyterLab, checked in a real browser (headless Chromium driven
by playwright): a committed notebook opened as cloned (untrusted, no kernel) shows a static
copy (an image or a table) where each explorer widget is, never the widget's bare text.

Needs Debian's `chromium` and the `playwright` package (requirements-dev.txt); `.ci/run`
installs chromium where it is missing. Elsewhere the test skips and says why.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
WIDGET = "application/vnd.jupyter.widget-view+json"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (Debian: apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a folder of copied notebooks, with private settings and trust
    database (so nothing is trusted) and every cell rendered (no windowing)."""
    root = tmp_path_factory.mktemp("lab")
    for path in NOTEBOOKS.glob("[0-9]*.ipynb"):
        shutil.copy(path, root)
    settings = root / ".settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"), JUPYTER_DATA_DIR=str(root / ".data"))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.token=",
         "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/lab", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    yield url
    server.terminate()
    server.wait(10)


def static_outputs(path: Path) -> dict[str, int]:
    """How many outputs of a committed notebook render as an image and as a table, and how
    many of those are an explorer's static copy."""
    outs = [o.get("data", {}) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    widgets = [d for d in outs if WIDGET in d]
    assert all("image/png" in d or "text/html" in d for d in widgets), "a widget with no static copy"
    return {"img": sum("image/png" in d for d in outs), "table": sum("image/png" not in d and "text/html" in d for d in outs),
            "widgets": len(widgets)}


@pytest.mark.parametrize("name", ["01_locate", "02_project", "04_attention"])
def test_committed_notebook_shows_a_static_copy_where_each_widget_is(lab, name):
    """Every image and table the committed outputs hold is drawn, explorers' copies included,
    and no explorer falls back to its text."""
    expected = static_outputs(NOTEBOOKS / f"{name}.ipynb")
    assert expected["widgets"], "the notebook has explorers"
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{lab}/lab/workspaces/{name}/tree/{name}.ipynb")  # a workspace of its own: this notebook alone
        page.wait_for_selector(".jp-CodeCell .jp-OutputArea-output", state="attached", timeout=60_000)
        page.wait_for_timeout(3000)
        shown = page.evaluate("""() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')].map(out =>
            out.querySelector('img') ? 'img' : out.querySelector('table') ? 'table' : out.innerText.slice(0, 80))""")
        browser.close()
    assert (shown.count("img"), shown.count("table")) == (expected["img"], expected["table"]), shown
    assert not any(o.startswith("Explorer (") for o in shown)
