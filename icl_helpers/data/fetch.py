"""`python -m icl_helpers data fetch [--to DIR]`: the sentence datasets downloaded from their
original repositories (`SOURCES`: one URL a file) into `fetched_dir()`, where the loader
looks when no data directory is given, or into DIR.

Every file is checked as the loader checks it (its examples a class and its SHA-256 against
the standard copy's) before it is written; a file that fails is refused in one line and
nothing of its dataset is written. Files already there and standard are kept.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from ..errors import UsageError
from ..paths import checksum_of, write_atomically
from .sentences import fetched_dir
from .sources import SOURCES, BadCopy, Source, copy_difference, parse_examples

URL_ENV = "ICL_DATA_URL"  # a server holding <name>/<file>, as a data directory does, instead of the originals
TIMEOUT = 10.0  # seconds to connect, and between bytes: offline, the first file fails at once
ELSEWHERE = "set ICL_DATA_DIR to a copy of the datasets (layout: data/README.md)"


def fetch(to: str | Path | None = None, base_url: str | None = None, timeout: float = TIMEOUT,
          log: Callable[[str], None] = print) -> Path:
    """Download every sentence dataset into `to` (default `fetched_dir()`) as <to>/<name>/<file>,
    each file checked, and return the folder; `log` gets a line for each file.

    base_url (default $ICL_DATA_URL): download <base_url>/<name>/<file> instead of the
    original repositories. A dataset's files are all downloaded and checked before any is
    written, each written atomically; a dataset folder this call made is removed again
    where writing fails, so a folder is whole or as it was.
    """
    folder = Path(to).expanduser() if to else fetched_dir()
    base = base_url or os.environ.get(URL_ENV) or None
    if base and urlparse(base).scheme not in ("http", "https"):
        raise UsageError(f"{URL_ENV} {base!r} is not an http(s) URL: give the address of a server holding "
                         f"{', '.join(f'{n}/' for n in SOURCES)}, or unset it to download from the original repositories.")
    made = _writable(folder)
    try:
        for name, source in SOURCES.items():
            _fetch_dataset(name, source, folder / name, base, timeout, log)
    finally:
        if made and not any(folder.iterdir()):
            folder.rmdir()
    where = ("found there while ICL_DATA_DIR is unset" if folder.resolve() == fetched_dir().resolve()
             else f"use them with ICL_DATA_DIR={folder}")
    log(f"{folder}: {', '.join(SOURCES)}, checked; {where}.")
    return folder


def _writable(folder: Path) -> bool:
    """Make `folder` where it is missing (True if made), or a UsageError where nothing can be written there."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file: give a folder to download the datasets into (--to DIR).")
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()  # a real write: root passes os.access everywhere
    except OSError as err:
        raise UsageError(f"Cannot write to {folder} ({err.strerror}): choose a writable folder with --to DIR.") from None
    return made


def _fetch_dataset(name: str, source: Source, folder: Path, base: str | None, timeout: float,
                   log: Callable[[str], None]) -> None:
    """The files of one dataset that are missing or not standard, downloaded and checked, then written."""
    wanted: dict[Path, bytes] = {}
    for split, file in source.files.items():
        path = folder / file
        if path.is_file() and checksum_of(path)[1] == source.sha256[split]:
            log(f"{path}: there already ({path.stat().st_size:,} bytes, checked)")
            continue
        url = f"{base.rstrip('/')}/{name}/{file}" if base else f"{source.url}/{file}"
        data = _download(url, timeout)
        _check(data, url, name, split, source)
        wanted[path] = data
    made = not folder.exists()
    try:
        folder.mkdir(exist_ok=True)
        for path, data in wanted.items():
            write_atomically(path, lambda tmp, data=data: tmp.write_bytes(data))
            log(f"wrote {path} ({len(data):,} bytes, checked)")
    except BaseException as err:
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(err, OSError):
            raise UsageError(f"Could not write {name} into {folder.parent} ({err.strerror}): "
                             "free some space or choose another folder with --to DIR.") from None
        raise


def _download(url: str, timeout: float) -> bytes:
    """The bytes at `url`: one try; any failure is one UsageError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as err:
        raise UsageError(f"Could not download {url}: HTTP {err.code} {err.reason}; {ELSEWHERE}.") from None
    except (OSError, http.client.HTTPException) as err:  # refused, no DNS, timed out, cut off
        cause = getattr(err, "reason", err)
        reason = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        raise UsageError(f"Could not download {url} ({reason}): offline? Run this again on a network, "
                         f"or {ELSEWHERE}.") from None


def _check(data: bytes, url: str, name: str, split: str, source: Source) -> None:
    """A UsageError naming the file and its fault where `data` is not the standard copy."""
    try:
        problem = copy_difference(f"{url} ({name} {split})", parse_examples(data, source, url), source, split,
                              hashlib.sha256(data).hexdigest())
    except BadCopy as err:
        problem = str(err)
    if problem:
        raise UsageError(f"Download refused: {problem}. Nothing was written for {name}; try again later, or {ELSEWHERE}.")
