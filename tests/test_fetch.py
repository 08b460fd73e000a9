"""`python -m icl_helpers data fetch`, against a real HTTP server on this machine (the
original repositories cannot be reached from the tests): small copies in each format
served as the standard ones, and the developers' full copy where there is one."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from icl_helpers import UsageError
from icl_helpers.cli import main
from icl_helpers.data import sentences as ds
from icl_helpers.data.fetch import fetch
from icl_helpers.data.sources import SOURCES
from icl_helpers.paths import REPO_ROOT
from tests.test_sentences import DATA_DIR, SIZES, SMALL, full_copy

COUNTS = {  # examples a class in test_sentences' small copies
    "sst2": {"train": (3, 3), "test": (1, 1)},
    "trec": {"train": (3,) * 6, "test": (1,) * 6},
    "agnews": {"test": (3, 3, 3, 3)},
    "ethos": {"test": (3, 3)},
}
SMALL_FILES = {f"{name}/{file}": text.encode() for name, files in SMALL.items() for file, text in files.items()}
TAIL = "try again later, or set ICL_DATA_DIR to a copy of the datasets (layout: data/README.md)."


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # no request log in the test output
        pass


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving the files under `root`; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def files_under(root: Path) -> dict[str, bytes]:
    """Every file under `root` (temporary ones included), by path relative to it."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache, no data directory: where `fetch` writes and the loader then looks."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    for var in ("ICL_DATA_DIR", "ICL_DATA_URL", "ICL_OWN_DATA"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "cache" / "datasets"


@pytest.fixture
def served(cache, tmp_path, monkeypatch) -> Iterator[Path]:
    """The small copies on a local server, taken for the standard ones (their examples a
    class and SHA-256 in SOURCES); ICL_DATA_URL points at it. Yields the served folder."""
    root = tmp_path / "served"
    for path, data in SMALL_FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    for name, source in list(SOURCES.items()):
        sha = {split: hashlib.sha256(SMALL_FILES[f"{name}/{file}"]).hexdigest() for split, file in source.files.items()}
        monkeypatch.setitem(SOURCES, name, dataclasses.replace(source, counts=COUNTS[name], sha256=sha))
    with serve(root) as url:
        monkeypatch.setenv("ICL_DATA_URL", url)
        yield root


def test_good_files_land_checked_and_the_loader_finds_them(served, cache, capsys):
    assert ds.resolve_data_dir() is None  # nothing fetched yet
    assert fetch() == cache
    assert files_under(cache) == SMALL_FILES  # every file, byte for byte, and nothing else
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"wrote {cache / path} ({len(data):,} bytes, checked)" for path, data in SMALL_FILES.items()] + [
        f"{cache}: sst2, trec, agnews, ethos, checked; found there while ICL_DATA_DIR is unset."]
    assert ds.resolve_data_dir() == cache
    trec = ds.load_sentences("trec")  # no argument: found through the cache
    assert [e.label for e in trec.test] == ["NUM", "LOC", "DESC", "HUM", "ENTY", "ABBR"] and len(trec.train) == 18
    assert ds.load_sentences("ethos").test[0].text == 'a; "quoted" 0'

    stamps = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    (cache / "sst2" / "stsa.binary.test").write_text("0 an edited copy .\n")
    fetch()  # the standard files are kept, the edited one downloaded again
    assert files_under(cache) == SMALL_FILES
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file() and p.name != "stsa.binary.test"} == {
        p: t for p, t in stamps.items() if p.name != "stsa.binary.test"}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{cache / 'sst2' / 'stsa.binary.train'}: there already ({len(SMALL_FILES['sst2/stsa.binary.train']):,} bytes, checked)"
    assert lines[1] == f"wrote {cache / 'sst2' / 'stsa.binary.test'} ({len(SMALL_FILES['sst2/stsa.binary.test']):,} bytes, checked)"


def _cut_trec(text: str) -> str:
    return text[: text.index("\nLOC") + 3]  # mid-line: "LO", a malformed line 2


def _cut_agnews(text: str) -> str:
    return "".join(text.splitlines(True)[:-1])  # at a line: one example short


def _edit_ethos(text: str) -> str:
    return text.replace('"" 3";', '"" 3!";')  # a text edited, every score as it was


@pytest.mark.parametrize("file, spoil, start, fault", [
    ("trec/test.txt", _cut_trec, "fetched", r"trec/test\.txt:2: malformed: expected 'COARSE:fine QUESTION' with COARSE one of "
                                            r"ABBR, ENTY, DESC, HUM, LOC, NUM"),
    ("agnews/test.csv", _cut_agnews, "fetched", r"agnews/test\.csv \(agnews test\) holds 11 examples, not the standard 12: "
                                                r"the copy is cut or edited"),
    ("ethos/Ethos_Dataset_Binary.csv", _edit_ethos, "empty",
     r"ethos/Ethos_Dataset_Binary\.csv \(ethos test\) holds the standard examples a class \(not hate 3, hate 3\) but its "
     r"bytes differ from the standard copy's \(SHA-256 \w{12}\.\.\., not \w{12}\.\.\.\): the copy is edited"),
], ids=["trec-cut-mid-line", "agnews-cut-at-a-line", "ethos-edited"])
def test_a_cut_or_edited_file_is_refused_and_nothing_half_written_remains(served, cache, file, spoil, start, fault):
    """Refused in one line naming the file and its fault; the destination exactly as it was:
    earlier good files intact (trec/train.txt beside a refused trec/test.txt), no temporary
    file, no folder of a dataset that was not there."""
    if start == "fetched":
        fetch(log=lambda line: None)
        (cache / file).unlink()
        if not any((cache / file).parent.iterdir()):
            (cache / file).parent.rmdir()
    before = files_under(cache) if cache.exists() else {}
    (served / file).write_text(spoil((served / file).read_text()))
    name = file.split("/")[0]
    with pytest.raises(UsageError) as refused:
        fetch(log=lambda line: None)
    message = str(refused.value)
    url = os.environ["ICL_DATA_URL"]
    assert message.startswith(f"Download refused: {url}/") and "\n" not in message
    assert re.search(rf"^Download refused: {url}/{fault}\. Nothing was written for {name}; ", message)
    assert message.endswith(TAIL)
    after = files_under(cache)
    if start == "fetched":
        assert after == before
    else:  # the datasets before it landed whole; none of it did
        assert after == {p: d for p, d in SMALL_FILES.items() if not p.startswith(f"{name}/")}
    assert (cache / name).is_dir() == any(p.startswith(f"{name}/") for p in before)
    if name == "trec":
        assert (cache / "trec" / "train.txt").read_bytes() == SMALL_FILES["trec/train.txt"]


def test_a_file_missing_on_the_server_is_one_line(served, cache):
    (served / "agnews" / "test.csv").unlink()
    with pytest.raises(UsageError) as missing:
        fetch(log=lambda line: None)
    url = os.environ["ICL_DATA_URL"]
    assert str(missing.value) == (f"Could not download {url}/agnews/test.csv: HTTP 404 File not found; set ICL_DATA_DIR to a "
                                  "copy of the datasets (layout: data/README.md).")
    assert sorted(files_under(cache)) == sorted(p for p in SMALL_FILES if p.startswith(("sst2/", "trec/")))


def test_a_server_that_never_answers_times_out(cache):
    with socket.socket() as listening:  # connections queue, and nobody answers
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        start = time.monotonic()
        with pytest.raises(UsageError, match=r"^Could not download http://127\.0\.0\.1:\d+/sst2/stsa\.binary\.train \(timed out\): "
                                             r"offline\? Run this again on a network, or set ICL_DATA_DIR"):
            fetch(base_url=f"http://127.0.0.1:{listening.getsockname()[1]}", timeout=0.5)
    assert time.monotonic() - start < 2  # one try, no retries
    assert not cache.exists()


def test_to_puts_them_elsewhere_and_says_how_to_use_them(served, cache, tmp_path, capsys):
    assert main(["data", "fetch", "--to", str(tmp_path / "mine")]) == 0
    assert files_under(tmp_path / "mine") == SMALL_FILES and not cache.exists()
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{tmp_path / 'mine'}: sst2, trec, agnews, ethos, checked; use them with ICL_DATA_DIR={tmp_path / 'mine'}.")
    assert len(ds.load_sentences("agnews", tmp_path / "mine").test) == 12


@pytest.mark.parametrize("argv, env, message", [
    (["--to", "{tmp}/file"], {}, "error: {tmp}/file is a file: give a folder to download the datasets into (--to DIR)."),
    (["--to", "/proc/datasets"], {}, "error: Cannot write to /proc/datasets"),
    ([], {"ICL_DATA_URL": "ftp://mirror/datasets"}, "error: ICL_DATA_URL 'ftp://mirror/datasets' is not an http(s) URL: "),
])
def test_bad_destinations_and_addresses_are_one_line(cache, tmp_path, monkeypatch, capsys, argv, env, message):
    (tmp_path / "file").write_text("")
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert main(["data", "fetch", *[a.format(tmp=tmp_path) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1


def _command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`python -m icl_helpers data fetch ARGS` in a fresh interpreter, in the checkout."""
    full = {k: v for k, v in os.environ.items() if k not in ("ICL_DATA_DIR", "ICL_DATA_URL", "ICL_OWN_DATA")} | env
    return subprocess.run([sys.executable, "-m", "icl_helpers", "data", "fetch", *args], cwd=REPO_ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


@full_copy
def test_the_command_fetches_the_standard_copies(cache, tmp_path):
    """The full copy served as the original repositories serve it: every file checked
    against the real counts and SHA-256, then found by the loader with no argument."""
    with serve(DATA_DIR) as url:
        run = _command({"ICL_DATA_URL": url, "ICL_HELPERS_CACHE": str(tmp_path / "cache")})
    assert (run.returncode, run.stderr) == (0, "")
    wrote = [f"wrote {cache / n / f} ({(DATA_DIR / n / f).stat().st_size:,} bytes, checked)"
             for n, s in SOURCES.items() for f in s.files.values()]
    assert run.stdout.splitlines() == wrote + [f"{cache}: sst2, trec, agnews, ethos, checked; found there while ICL_DATA_DIR is unset."]
    for name, (n_test, n_train, first) in SIZES.items():
        data = ds.load_sentences(name)
        assert (len(data.test), data.train and len(data.train), (data.test[0].text, data.test[0].label)) == (n_test, n_train, first)


def test_the_command_offline_is_one_line(tmp_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # free once closed: connections are refused
    run = _command({"ICL_DATA_URL": f"http://127.0.0.1:{port}", "ICL_HELPERS_CACHE": str(tmp_path / "cache")})
    # the refusal itself, not a time-out waited for (no wall-clock bound: the interpreter's start under load is no measure)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == (f"error: Could not download http://127.0.0.1:{port}/sst2/stsa.binary.train (Connection refused): "
                          "offline? Run this again on a network, or set ICL_DATA_DIR to a copy of the datasets "
                          "(layout: data/README.md).\n")
    assert not (tmp_path / "cache" / "datasets").exists()
