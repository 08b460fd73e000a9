"""The files a command writes: checked before its run (`check_output`: a file of `ROOM` bytes fits
there) and written atomically after it (`write_output`), a failure one line that says where the
results went, so that no finished run's results are lost."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import UsageError
from .paths import out_of_space, try_write, write_text_atomically

ROOM = 1 << 20  # the room an output file needs, checked before the run: a report's JSON or markdown is about 25 kB
WRITTEN: list[Path] = []  # the outputs this run has written, for the line a Ctrl-C prints


def check_output(file: str, flag: str = "--json") -> Path:
    """The output path, if a file of `ROOM` bytes can be written there; else a UsageError saying why."""
    path = Path(file)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder: give a file name, e.g. {path / 'out'}.")
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist; create it first.")
    try:
        try_write(folder, ROOM)  # a full disk fails here, not after the run
        if path.exists():
            path.open("ab").close()
    except OSError as err:
        if out_of_space(err):
            raise UsageError(f"{flag} {path} cannot be written: its disk is full ({err.strerror}); "
                             f"free some space there, or choose another place.") from None
        raise UsageError(f"{flag} {path} cannot be written: choose a writable place.") from None
    return path


def write_output(path: Path, text: str, flag: str = "--json") -> None:
    """`text` at `path`, atomically: an earlier file there stays whole whatever fails, and the
    hidden half-written file of a run killed while writing it goes (`write_atomically`). A
    failure (a full disk) is a UsageError naming the path and the reason, and the text is
    kept in the temporary folder, where it fits there, so that no run's results are lost."""
    try:
        write_text_atomically(path, text)
    except OSError as err:
        kept = _keep_elsewhere(text, path.suffix)
        raise UsageError(
            f"{flag} {path} could not be written ({err.strerror or err}): "
            + ("the earlier file there is unchanged, and " if path.exists() else "")
            + (f"this run's results are in {kept}. " if kept else "this run's results could not be kept elsewhere either. ")
            + ("Free some space there, or choose another place." if out_of_space(err) else "Choose a writable place.")
        ) from None
    WRITTEN.append(path)


def _keep_elsewhere(text: str, suffix: str) -> Path | None:
    """`text` in a new file in the temporary folder, or None where it does not fit there either."""
    try:
        fd, name = tempfile.mkstemp(prefix="icl_helpers-", suffix=suffix)
    except OSError:
        return None
    try:
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        os.unlink(name)
        return None
    return Path(name)
