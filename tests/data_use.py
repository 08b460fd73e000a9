"""Which tests read the developers' data: a pytest plugin that conftest.py registers where
$ICL_TEST_DATA_LOG names a file. CI (.ci/run) runs every test once with the data, then only these
again without it, as a user's machine has it.

A test reads the data where, while it or a fixture it sets up runs, the process opens or lists a
path under one of `roots`, or starts a process whose environment points ICL_DATA_DIR there. Read by a
module's or class's fixture, it marks that whole file; by a session fixture, the whole suite."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from icl_helpers.data import sentences

READS = ("open", "os.listdir", "os.scandir")  # the audit events that touch a path (sys.addaudithook)
WIDER = {"module": 1, "class": 1, "package": 2, "session": 2}  # a fixture's scope -> what it marks: its file, everything


class DataUse:
    """Collects the node ids (or files, or "tests") that read under `roots`, written to `log` at the end."""

    def __init__(self, log: str | Path, roots: list[Path]):
        self.log, self.roots = Path(log), [os.path.abspath(root) + os.sep for root in roots]  # as `_under` reads paths
        self.test: pytest.Item | None = None
        self.scopes: list[str] = []  # the scopes of the fixtures being set up, outermost first
        self.read: set[str] = set()
        sys.addaudithook(self._audit)  # for good: a hook cannot be removed, and it does nothing outside a test

    def _under(self, path) -> bool:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return isinstance(path, (str, os.PathLike)) and (os.path.abspath(path) + os.sep).startswith(tuple(self.roots))

    def _audit(self, event: str, args: tuple) -> None:
        if self.test is None:
            return
        if event in READS and args and self._under(args[0]):
            self._mark()
        elif event == "subprocess.Popen":
            argv, env = args[1], args[3] if args[3] is not None else os.environ
            argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv or ())
            data = env.get("ICL_DATA_DIR")
            if data and self._under(data) and "pip" not in map(os.fsdecode, argv):  # pip: the tokenizers' sdist
                self._mark()

    def _mark(self) -> None:
        wide = max((WIDER.get(scope, 0) for scope in self.scopes), default=0)
        self.read.add([self.test.nodeid, self.test.nodeid.split("::")[0], "tests"][wide])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        self.test = item
        sentences._parsed.cache_clear()  # a file kept from an earlier test would be read without an open
        try:
            return (yield)
        finally:
            self.test = None

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        self.scopes.append(fixturedef.scope)
        try:
            return (yield)
        finally:
            self.scopes.pop()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.read:  # as in xdist's controller, which runs no test
            return
        worker = os.environ.get("PYTEST_XDIST_WORKER")  # each worker writes its own file
        path = self.log.with_name(f"{self.log.name}.{worker}") if worker else self.log
        path.write_text("".join(f"{node}\n" for node in sorted(self.read)))
