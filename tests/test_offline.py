"""The offline models' GGUF parts: joined in order, checked, refused in one line when cut or edited."""
from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import pytest

from icl_helpers.errors import UsageError
from icl_helpers.model.offline import OFFLINE_MODELS, SETUP, OfflineModel, assemble_gguf, check_gguf

PARTS = [b"GGUF" + bytes(range(256)) * 3, b"second part " * 50, b"end"]


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OfflineModel:
    """A model split into three importable packages under tmp_path/site."""
    site = tmp_path / "site"
    for i, data in enumerate(PARTS, 1):
        (site / f"fakepart{i}" / "data").mkdir(parents=True)
        (site / f"fakepart{i}" / "__init__.py").write_text("")
        (site / f"fakepart{i}" / "data" / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    joined = b"".join(PARTS)
    return OfflineModel("fake", "a test model", "none", ("fakepart1==0",),
                        tuple((f"fakepart{i}", f"data/part{i:02d}.bin") for i in range(1, 4)),
                        len(joined), hashlib.sha256(joined).hexdigest())


def test_parts_join_in_order(fake: OfflineModel, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    out = assemble_gguf(fake, tmp_path / "out" / "fake.gguf")
    assert out.read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in out.parent.iterdir()) == ["fake.gguf"]


@pytest.mark.parametrize("damage", ["cut", "edited"])
def test_a_damaged_part_is_refused_and_leaves_nothing(fake: OfflineModel, tmp_path: Path, damage: str) -> None:
    part = fake.part_paths()[1]
    data = part.read_bytes()
    part.write_bytes(data[:-1] if damage == "cut" else data[:-1] + b"X")
    target = tmp_path / "fake.gguf"
    target.write_bytes(b"an earlier good file")
    with pytest.raises(UsageError, match="cut or replaced" if damage == "cut" else "SHA-256") as err:
        assemble_gguf(fake, target)
    assert "\n" not in str(err.value) and SETUP in str(err.value)
    assert target.read_bytes() == b"an earlier good file"  # untouched
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_missing_package_names_the_set_up_step(fake: OfflineModel) -> None:
    missing = OfflineModel(**{**fake.__dict__, "parts": (*fake.parts, ("no_such_part_package", "x.bin"))})
    with pytest.raises(UsageError, match="no_such_part_package is not installed") as err:
        missing.part_paths()
    assert SETUP in str(err.value)


def test_registry_sizes_match_the_installed_parts() -> None:
    """Where a model's packages are installed, its parts add up to the published size."""
    for model in OFFLINE_MODELS.values():
        try:
            paths = model.part_paths()
        except UsageError:
            continue
        assert sum(p.stat().st_size for p in paths) == model.size, model.name


@pytest.mark.parametrize("damage", ["cut", "edited"])
def test_a_damaged_single_file_is_refused(fake: OfflineModel, damage: str) -> None:
    path = fake.part_paths()[0]
    single = OfflineModel(**{**fake.__dict__, "parts": fake.parts[:1], "size": len(PARTS[0]),
                             "sha256": hashlib.sha256(PARTS[0]).hexdigest()})
    check_gguf(single, path)  # whole: no complaint
    path.write_bytes(PARTS[0][:-1] if damage == "cut" else PARTS[0][:-1] + b"X")
    with pytest.raises(UsageError, match="size or SHA-256 differs") as err:
        check_gguf(single, path)
    assert SETUP in str(err.value)
