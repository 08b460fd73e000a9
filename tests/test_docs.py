"""The API reference's own check (scripts/docs.py): a docstring that names a module of the package,
or a member of one, that does not exist fails the build."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pdoc.doc

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "docs.py"
PACKAGE = {  # a small package whose docstrings name things that exist, and some that do not
    "__init__.py": '"""Names `docpkg.core.locate`, and `docpkg.core.nothing`."""',
    "core/__init__.py": '"""The core."""',
    "core/locate.py": '"""`Result.top`, `Result.missing`, and `tqdm.auto`, which is no module of ours."""\n'
                      'class Result:\n    """A result."""\n\n    def top(self):\n        """The top."""\n',
    "studies.py": '"""From `core.locate.Result` and `core.locate.gone`."""',
}


def test_a_broken_reference_fails(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("docs_script", SCRIPT)
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    for name, text in PACKAGE.items():
        (tmp_path / "docpkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docpkg" / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ["docpkg", "docpkg.core", "docpkg.core.locate", "docpkg.studies"]
    every = {name: pdoc.doc.Module(importlib.import_module(name)) for name in names}
    try:
        assert docs.broken_references(every) == [
            "docpkg: `docpkg.core.nothing`", "docpkg.core.locate: `Result.missing`", "docpkg.studies: `core.locate.gone`"]
    finally:
        for name in names:
            sys.modules.pop(name, None)
