"""A full disk or a dying process loses nothing (issue 32, item 5).

Each fault ends in one line (or, for the results cache, a warning and the right result),
with every earlier file whole and no temporary file left. A full disk is a real tmpfs where
this runs as root and may mount one (that variant is skipped elsewhere), or a writer
monkeypatched to fail as a full disk makes it fail; two processes and `kill -9` are real
second processes, which run the `*_child` functions below.
"""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors import SafetensorError
from transformers import LlamaConfig, LlamaForCausalLM

from icl_helpers import UsageError, entries
from icl_helpers.cli import main
from icl_helpers.model import offline
from icl_helpers.outputs import write_output
from icl_helpers.paths import BUNDLED, REPO_ROOT, sweep_leftovers, write_atomically

TENSORS = {"head": torch.arange(12.0).reshape(3, 4), "targets": torch.tensor([1, 2, 3])}
OTHER = {"head": -torch.ones(3, 4), "targets": torch.tensor([7, 8, 9])}
EARLIER = '{"claims": ["an earlier run\'s results"]}'
NO_SPACE = "No space left on device"


# --- full disks: a real tmpfs, or a writer that fails as one does --------------------------------
@pytest.fixture
def tiny_disk(tmp_path):
    """make(size): a new tmpfs folder of `size` (e.g. "1m"), unmounted after the test; the
    test is skipped where mount is refused (not root, or a sandbox)."""
    mounted = []

    def make(size: str) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
        if run.returncode != 0:
            pytest.skip(f"mount -t tmpfs is refused here ({run.stderr.decode().strip()}): the patched variant stands in")
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Take every free byte of `folder`'s disk, as another program might."""
    with open(folder / "filler", "wb", buffering=0) as f:
        with pytest.raises(OSError) as info:
            while True:
                f.write(bytes(1 << 16))
    assert info.value.errno == errno.ENOSPC


def raising(error: BaseException):
    """A stand-in for a function, that raises `error`."""
    def fail(*args, **kwargs):
        raise error
    return fail


enospc = raising(OSError(errno.ENOSPC, NO_SPACE))


def half_then_enospc(original, name: str | None = None):
    """A Path writer that writes half of its data (to a file called `name`, or any), then
    fails as a full disk does."""
    def write(self, data, *args, **kwargs):
        if name not in (None, self.name):
            return original(self, data, *args, **kwargs)
        original(self, data[: len(data) // 2], *args, **kwargs)
        enospc()
    return write


def temporaries(folder: Path) -> list[Path]:
    """The temporary files or folders left anywhere under `folder`."""
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def child(function: str, *args: object) -> subprocess.Popen:
    """A real second Python process running `function(*args)` of this module, on this checkout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    code = f"import sys\nfrom tests.test_durability import {function}\n{function}(*sys.argv[1:])"
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, what: str, seconds: float = 120) -> None:
    end = time.time() + seconds
    while not condition():
        assert time.time() < end, f"waited {seconds} s for {what}"
        time.sleep(0.02)


def finished(process: subprocess.Popen) -> str:
    """The process's stderr, once it has ended well."""
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    return err


# --- paths: the one writer and the sweep -----------------------------------------------------
@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, NO_SPACE), RuntimeError("[enforce fail at inline_container.cc:672]"),
                                   SafetensorError("I/O error: No space left on device (os error 28)"), KeyboardInterrupt()],
                         ids=["oserror", "torch", "safetensors", "interrupt"])
@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_failed_write_leaves_the_earlier_one_whole_and_no_temporary(tmp_path, error, kind):
    path = tmp_path / "out"

    def write(tmp: Path, text: str, error: BaseException | None = None) -> None:
        if kind == "folder":
            tmp.mkdir()
            tmp = tmp / "weights"
        tmp.write_text(text)
        if error:
            raise error

    write_atomically(path, lambda tmp: write(tmp, "old"))
    with pytest.raises(type(error)):
        write_atomically(path, lambda tmp: write(tmp, "half of the new", error))
    assert (path / "weights" if kind == "folder" else path).read_text() == "old"
    assert os.listdir(tmp_path) == ["out"]


def test_the_sweep_passes_over_leftovers_that_another_process_renames_away(tmp_path, monkeypatch):
    """Listed, then renamed into place by their writer before the sweep looks at their age."""
    gone = [tmp_path / ".entry.pt.123.tmp", tmp_path / ".converting-x"]
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(gone))
    sweep_leftovers(tmp_path, "*")


def test_a_write_removes_the_temporary_files_its_dead_writers_left_and_no_others(tmp_path):
    """Beside `path`, a temporary file or folder of a process that has ended goes with the next
    write; a running process's, and one of another path, stay."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    path = tmp_path / "out.json"
    dead = path.with_name(f".out.json.{ended.pid}.tmp")
    no_pid = path.with_name(f".out.json.{2**70}.tmp")  # a folder, of a number too large for any process
    live = path.with_name(f".out.json.{os.getppid()}.tmp")
    other = path.with_name(f".other.json.{ended.pid}.tmp")
    for leftover in (dead, live, other):
        leftover.write_text("half")
    no_pid.mkdir()
    (no_pid / "weights").write_text("half")
    write_atomically(path, lambda tmp: tmp.write_text("new"))
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, live.name, other.name])


# --- the command line's --json and --markdown --------------------------------------------------
@pytest.mark.parametrize("disk", ["tmpfs", "patched"])
def test_report_onto_a_full_disk_is_one_line_before_any_study(disk, tiny_disk, tmp_path, monkeypatch, capsys):
    folder = tiny_disk("256k") if disk == "tmpfs" else tmp_path
    out = folder / "out.json"
    out.write_text(EARLIER)
    if disk == "tmpfs":
        fill(folder)
    else:
        monkeypatch.setattr(os, "fsync", enospc)  # a network disk may say so only here
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["report", "--json", str(out)]) == 2
    assert capsys.readouterr().err == (f"error: --json {out} cannot be written: its disk is full ({NO_SPACE}); "
                                       "free some space there, or choose another place.\n")
    assert out.read_text() == EARLIER and not temporaries(folder)


@pytest.mark.parametrize("disk", ["tmpfs", "patched"])
def test_a_disk_filled_during_the_report_keeps_the_earlier_file_and_this_runs_results(
        disk, tiny_disk, tmp_path, monkeypatch, capsys):
    folder = tiny_disk("2m") if disk == "tmpfs" else tmp_path  # room for the check before the run
    out = folder / "out.json"
    out.write_text(EARLIER)

    def studies(m, *args, announce, **kwargs):
        if disk == "tmpfs":
            fill(folder)  # another program takes the room while the studies run
        else:
            monkeypatch.setattr(Path, "write_text", half_then_enospc(Path.write_text))
        return []

    model = SimpleNamespace(fingerprint=lambda: "f" * 16, model=SimpleNamespace(dtype=torch.float32), device="cpu")
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: model)  # what the JSON header reads
    monkeypatch.setattr("icl_helpers.verdicts.report", studies)
    assert main(["report", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    kept = re.fullmatch(rf"error: --json {re.escape(str(out))} could not be written \({NO_SPACE}\): the earlier file "
                        r"there is unchanged, and this run's results are in (\S+)\. Free some space there, or choose "
                        r"another place\.\n", err)
    assert kept, err
    try:
        assert json.loads(Path(kept[1]).read_text())["claims"] == []
    finally:
        Path(kept[1]).unlink()
    assert out.read_text() == EARLIER and not temporaries(folder)


def stalled_output_writer_child(out: str) -> None:
    """Write a report's --json and stall halfway through, to be killed there."""
    def half_then_stall(self, text, **kwargs):
        with open(self, "w") as f:
            f.write(text[: len(text) // 2])
        time.sleep(600)

    Path.write_text = half_then_stall
    write_output(Path(out), EARLIER)


def killed_halfway(function: str, path: Path) -> subprocess.Popen:
    """A second process running `function(path)` of this module, killed once its temporary file
    of `path` is half written (or it has ended)."""
    writer = child(function, path)
    wait_for(lambda: any(p.stat().st_size for p in path.parent.glob(f".{path.name}.*.tmp")) or writer.poll() is not None,
             f"the half-written {path.name}")
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    return writer


def test_a_report_killed_while_writing_its_json_leaves_nothing_after_the_rerun(tmp_path):
    out = tmp_path / "out.json"
    writer = killed_halfway("stalled_output_writer_child", out)
    assert temporaries(tmp_path) == [tmp_path / f".out.json.{writer.pid}.tmp"]  # hidden, half-written
    write_output(out, EARLIER)  # the rerun
    assert out.read_text() == EARLIER and not temporaries(tmp_path)


# --- the results cache --------------------------------------------------------------------------
@pytest.mark.parametrize("disk", ["tmpfs", "patched-write", "patched-torch"])
def test_a_full_disk_gives_the_cache_a_warning_and_the_right_result(disk, tiny_disk, tmp_path, monkeypatch):
    cache = (tiny_disk("64k") if disk == "tmpfs" else tmp_path) / "results"
    earlier = entries.cached(cache / "earlier.pt", lambda: TENSORS)
    if disk == "tmpfs":
        fill(cache.parent)
    elif disk == "patched-write":
        monkeypatch.setattr(Path, "write_bytes", half_then_enospc(Path.write_bytes))
    else:  # what the full disk made torch.save raise, as report saw it
        monkeypatch.setattr(torch, "save", raising(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")))
    reason = r"\[enforce fail at inline_container.cc:672\] .*" if disk == "patched-torch" else rf"\[Errno 28\] {NO_SPACE}"
    with pytest.warns(UserWarning, match=rf"^Could not write the cache file {re.escape(str(cache))}/new.pt \({reason}\); "
                                         rf"this run keeps the results it cannot write to {re.escape(str(cache))} in memory, "
                                         r"and later runs compute them again: free some space there, or set "
                                         r"ICL_HELPERS_CACHE to a writable folder\.$"):
        got = entries.cached(cache / "new.pt", lambda: OTHER)
    assert all(torch.equal(got[k], OTHER[k]) for k in OTHER)
    assert not (cache / "new.pt").exists() and not temporaries(cache.parent)
    again = entries.cached(cache / "earlier.pt", lambda: pytest.fail("the earlier entry was lost"))
    assert all(torch.equal(again[k], earlier[k]) for k in TENSORS)


def test_an_unwritable_cache_warns_once_and_keeps_its_results_for_the_run(tmp_path):
    """A cache that is a file (or read-only, or full): one warning, and nothing computed twice."""
    (tmp_path / "results").write_text("a file where the cache's folder should be")
    computed = []

    def compute(name, tensors):
        computed.append(name)
        return {k: v.clone() for k, v in tensors.items()}

    with pytest.warns(UserWarning, match="^Could not write the cache file") as caught:
        for _ in range(3):
            for name, tensors in (("a.pt", TENSORS), ("b.pt", OTHER)):
                got = entries.cached(tmp_path / "results" / name, lambda: compute(name, tensors))
                assert all(torch.equal(got[k], tensors[k]) for k in tensors)  # kept: the same tensors
                got["head"] += 1  # the caller's own copy, as a read from disk would be
    assert len(caught) == 1 and computed == ["a.pt", "b.pt"]


def test_an_entry_copied_over_another_keys_file_is_rebuilt(tmp_path):
    cache = tmp_path / "results"
    entries.cached(cache / "fig6.pt", lambda: TENSORS)
    shutil.copy(cache / "fig6.pt", cache / "fig7.pt")  # whole and valid, but another key's
    with pytest.warns(UserWarning, match=rf"^Rebuilding the damaged cache file {re.escape(str(cache))}/fig7.pt \(it "
                                         r"holds the entry of fig6.pt, copied over this one\)\.$"):
        got = entries.cached(cache / "fig7.pt", lambda: OTHER)
    assert all(torch.equal(got[k], OTHER[k]) for k in OTHER)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt under its own key: read back without a word
        got = entries.cached(cache / "fig7.pt", lambda: pytest.fail("rebuilt again"))
    assert all(torch.equal(got[k], OTHER[k]) for k in OTHER)


FINDING = {"claim": "fig6", "ours": 0.173, "interval": [0.1, 0.25], "verdict": "yes", "why": None}


def test_a_json_entry_is_json_on_disk_checked_and_rebuilt_where_damaged_or_copied(tmp_path):
    cache = tmp_path / "results"
    assert entries.cached_json(cache / "fig6.json", lambda: FINDING) == FINDING
    stored = json.loads((cache / "fig6.json").read_text())
    assert (stored["format"], stored["key"], stored["value"]) == ("icl_helpers json 1", "fig6.json", FINDING)
    assert entries.cached_json(cache / "fig6.json", lambda: pytest.fail("computed again")) == FINDING
    shutil.copy(cache / "fig6.json", cache / "fig7.json")
    with pytest.warns(UserWarning, match=r"\(it holds the entry of fig6.json, copied over this one\)\.$"):
        assert entries.cached_json(cache / "fig7.json", lambda: {"claim": "fig7"}) == {"claim": "fig7"}
    stored["value"]["ours"] = 0.5  # a changed number under the old checksum
    (cache / "fig6.json").write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match=r"fig6.json \(its value does not match the checksum stored with it\)\.$"):
        assert entries.cached_json(cache / "fig6.json", lambda: FINDING) == FINDING
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: read back without a word
        assert entries.cached_json(cache / "fig6.json", lambda: pytest.fail("rebuilt again")) == FINDING


def test_an_unwritable_cache_keeps_json_for_the_run(tmp_path):
    (tmp_path / "results").write_text("a file where the cache's folder should be")
    with pytest.warns(UserWarning, match="^Could not write the cache file"):
        got = entries.cached_json(tmp_path / "results" / "f.json", lambda: FINDING)
    got["ours"] = 1.0  # the caller's own copy
    assert entries.cached_json(tmp_path / "results" / "f.json", lambda: pytest.fail("computed again")) == FINDING


def compute_once_child(cache: str, log: str, ready: str) -> None:
    """Ask for one entry once the other child is ready too; computing it takes until the other asks."""
    Path(ready, f"ready-{os.getpid()}").touch()
    wait_for(lambda: len(list(Path(ready).glob("ready-*"))) == 2, "the other child")

    def compute() -> entries.Tensors:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        wait_for(lambda: len(list(Path(ready).glob("asking-*"))) == 2, "the other child to ask")
        time.sleep(0.5)  # it is in cached() now, waiting for the lock
        return TENSORS

    Path(ready, f"asking-{os.getpid()}").touch()
    got = entries.cached(Path(cache) / "entry.pt", compute)
    assert all(torch.equal(got[k], TENSORS[k]) for k in TENSORS)


def test_two_processes_asking_for_one_entry_compute_it_once(tmp_path):
    log = tmp_path / "computed"
    children = [child("compute_once_child", tmp_path / "results", log, tmp_path) for _ in range(2)]
    errs = [finished(c) for c in children]
    assert len(log.read_text().splitlines()) == 1  # the other waited, then read its result
    assert sum(f"Waiting for another process that is making {tmp_path}/results/entry.pt ..." in e for e in errs) == 1


def busy_writer_child(folder: str, tag: str, rounds: str) -> None:
    """Write entries of its own into `folder`, reading back every entry there after each write."""
    for i in range(int(rounds)):
        path = Path(folder) / f"{tag}-{i % 4}.pt"
        entries._write(path, entries._dump_tensors(path, {"x": torch.full((256,), float(i))}))
        for entry in Path(folder).glob("*.pt"):
            got = entries._read(entry)  # raises on a mixed or half-written entry
            assert got["x"].unique().numel() == 1


def test_two_processes_writing_one_cache_never_mix_entries_or_fail(tmp_path):
    """Each write sweeps the folder while the other renames its temporary files away."""
    children = [child("busy_writer_child", tmp_path, tag, 80) for tag in "ab"]
    for c in children:
        finished(c)
    assert len(list(tmp_path.glob("*.pt"))) == 8 and not temporaries(tmp_path)


def stalled_cache_writer_child(entry: str) -> None:
    """Compute an entry and stall halfway through writing it, to be killed there."""
    def half_then_stall(self, data):
        with open(self, "wb") as f:
            f.write(bytes(data[: len(data) // 2]))
        time.sleep(600)

    Path.write_bytes = half_then_stall
    entries.cached(Path(entry), lambda: TENSORS)


def test_a_cache_writer_killed_midway_leaves_nothing_that_stops_the_next(tmp_path):
    cache = tmp_path / "results"
    killed_halfway("stalled_cache_writer_child", cache / "entry.pt")
    assert temporaries(cache)  # its half-written file, fresh: no sweep by age would remove it yet
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its lock died with it; nothing to warn of
        got = entries.cached(cache / "entry.pt", lambda: OTHER)
    assert all(torch.equal(got[k], OTHER[k]) for k in OTHER)
    assert not temporaries(cache)  # removed at once, not an hour later


# --- converting a GGUF model ----------------------------------------------------------------------
class TinyTokenizer:
    """What a conversion asks of a tokenizer: save_pretrained, which may fail or stall."""

    def __init__(self, error: BaseException | None = None, stall: float = 0):
        self.error, self.stall = error, stall

    def save_pretrained(self, folder: Path) -> None:
        if self.error:
            raise self.error
        (Path(folder) / "tokenizer.json").write_text('{"tiny": true}')
        time.sleep(self.stall)


def fake_conversion(patch, tokenizer: TinyTokenizer = TinyTokenizer(), before=lambda: None) -> None:
    """Make convert_gguf load a tiny random Llama (16 kB of weights) instead of a GGUF file,
    and take it to need 1 MB."""
    def load(gguf: Path):
        before()
        config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
        return LlamaForCausalLM(config), tokenizer

    patch(offline, "_copy_bytes", lambda gguf: 1_000_000)
    patch(offline, "_dequantised", load)


@pytest.mark.parametrize("disk", ["tmpfs", "patched"])
def test_the_bundled_model_onto_too_small_a_disk_is_one_line_before_it_loads(disk, tiny_disk, tmp_path, monkeypatch):
    """The real GGUF's parameters counted from its header: refused in a second, not after the 20-s load."""
    cache = tiny_disk("64m") if disk == "tmpfs" else tmp_path
    if disk == "patched":
        monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(free=67_000_000))
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(cache))
    monkeypatch.setattr(offline, "_dequantised", lambda gguf: pytest.fail("loaded the weights"))
    with pytest.raises(UsageError) as info:
        offline.offline_model_dir(BUNDLED)
    assert re.fullmatch(rf"Converting SmolLM2-135M-Instruct\.Q4_1\.gguf needs about 5\d\d MB free in {re.escape(str(cache))}, "
                        r"which has 6\d MB: free some space there, or set ICL_HELPERS_CACHE to a folder on a disk with room\.",
                        str(info.value)), str(info.value)
    assert os.listdir(cache) == ["smollm2-135m.lock"]


@pytest.mark.parametrize("fault", ["tmpfs", "safetensors", "tokenizers", "checksums", "not-space"])
def test_a_disk_filled_during_a_conversion_is_one_line_and_leaves_nothing(fault, tiny_disk, tmp_path, monkeypatch):
    folder = tiny_disk("4m") if fault == "tmpfs" else tmp_path
    (folder / "earlier").write_text("an earlier file")
    tokenizer, before = TinyTokenizer(), lambda: None
    if fault == "tmpfs":
        def before() -> None:  # another program takes the room after the check
            fill(folder)
    elif fault == "safetensors":
        monkeypatch.setattr("transformers.modeling_utils.safe_save_file",
                            raising(SafetensorError(f"Error while serializing: I/O error: {NO_SPACE} (os error 28)")))
    elif fault == "tokenizers":
        tokenizer = TinyTokenizer(error=Exception(f"{NO_SPACE} (os error 28)"))
    elif fault == "checksums":
        monkeypatch.setattr(Path, "write_text", half_then_enospc(Path.write_text, "checksums.json"))
    else:
        tokenizer = TinyTokenizer(error=RuntimeError("not a matter of space"))
    fake_conversion(monkeypatch.setattr, tokenizer, before)
    if fault == "not-space":
        with pytest.raises(RuntimeError, match="^not a matter of space$"):
            offline.convert_gguf(tmp_path / "tiny.gguf", folder / "tiny")
    else:
        with pytest.raises(UsageError, match=rf"^The disk ran out of space while converting tiny\.gguf into "
                                             rf"{re.escape(str(folder))} \(it needs about 1 MB\): free some space there, or "
                                             r"convert into a folder on a disk with room\.$"):
            offline.convert_gguf(tmp_path / "tiny.gguf", folder / "tiny")
    left = {"earlier", "tiny.lock"} | ({"filler"} if fault == "tmpfs" else set())
    assert set(os.listdir(folder)) == left and (folder / "earlier").read_text() == "an earlier file"


def conversion_child(target: str, stall: str) -> None:
    """Convert into `target` (a tiny fake), loading for a second, and stalling for `stall`
    seconds once its tokenizer is written; it marks `target.started` when it loads."""
    def started() -> None:
        Path(target + ".started").touch()
        time.sleep(1)

    fake_conversion(lambda module, name, value: setattr(module, name, value), TinyTokenizer(stall=float(stall)), started)
    offline.convert_gguf(Path(target).with_suffix(".gguf"), Path(target))


def test_a_second_conversion_waits_for_the_first_and_uses_its_copy(tmp_path, monkeypatch, capfd):
    target = tmp_path / "tiny"
    first = child("conversion_child", target, 0)
    wait_for(lambda: Path(f"{target}.started").exists() or first.poll() is not None, "the first conversion")
    monkeypatch.setattr(offline, "_dequantised", lambda gguf: pytest.fail("converted a second time"))
    assert offline.convert_gguf(tmp_path / "tiny.gguf", target) == target
    finished(first)
    assert offline.damage_of(target) is None
    assert f"Waiting for another process that is making {target} ..." in capfd.readouterr().err


def test_a_conversion_killed_midway_is_removed_at_once_by_the_next(tmp_path, monkeypatch):
    target = tmp_path / "tiny"
    killed = child("conversion_child", target, 600)
    wait_for(lambda: any(tmp_path.glob(".tiny.*.tmp/tokenizer.json")) or killed.poll() is not None,
             "the half-written conversion")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    (orphan,) = temporaries(tmp_path)
    assert (orphan / "model.safetensors").is_file()  # weights written, no checksums yet
    fake_conversion(monkeypatch.setattr)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert offline.convert_gguf(tmp_path / "tiny.gguf", target) == target  # its lock died with it: no wait
    assert offline.damage_of(target) is None and not orphan.exists()



@pytest.mark.parametrize("place", ["a file", "read-only"])
def test_a_model_cache_that_cannot_be_written_is_one_line_naming_it(place, tmp_path, monkeypatch, capsys):
    """ICL_HELPERS_CACHE at a file, or at a folder this user cannot write (root writes anywhere: patched)."""
    cache = tmp_path / "cache"
    if place == "a file":
        cache.write_text("not a folder")
        reason = "a file is in the way"
    else:
        cache.mkdir()
        monkeypatch.setattr(offline, "try_write", raising(PermissionError(errno.EACCES, "Permission denied")))
        reason = "Permission denied"
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(cache))
    monkeypatch.setattr(offline, "_dequantised", lambda gguf: pytest.fail("loaded the weights"))
    assert main(["locate", "--prompt", "a : foo b :", "--json", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err == (f"error: The converted model cannot be written into {cache} ({reason}): set "
                                       "ICL_HELPERS_CACHE to a folder you can write.\n")


def test_a_converted_model_takes_the_users_umask_in_every_file(tmp_path, monkeypatch):
    """safetensors writes its file 0600; the folder and all it holds get the user's umask."""
    fake_conversion(monkeypatch.setattr)
    old = os.umask(0o022)
    try:
        target = offline.convert_gguf(tmp_path / "tiny.gguf", tmp_path / "tiny")
    finally:
        os.umask(old)
    assert {p.name: p.stat().st_mode & 0o777 for p in target.iterdir()} == {p.name: 0o644 for p in target.iterdir()}
    assert target.stat().st_mode & 0o777 == 0o755


def test_a_conversion_shows_a_bar_while_it_runs_and_none_once_the_copy_is_made(tmp_path, monkeypatch, capsys):
    """Twenty seconds to a minute or two of a model cell's first run: a bar named for the model says what runs,
    from the start (the room check's read of the file's tensor index, 5 to 7 s of the bundled model's, under it)."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    fake_conversion(monkeypatch.setattr)
    shown = []  # stderr as the room check starts
    monkeypatch.setattr(offline, "_copy_bytes", lambda gguf: shown.append(capsys.readouterr().err) or 1_000_000)
    offline.convert_gguf(tmp_path / "tiny.gguf", tmp_path / "tiny")
    assert "tiny: a float32 copy of its weights, made once" in shown[0]
    capsys.readouterr()  # the rest of the conversion's drawing
    offline.convert_gguf(tmp_path / "tiny.gguf", tmp_path / "tiny")
    assert capsys.readouterr().err == ""
