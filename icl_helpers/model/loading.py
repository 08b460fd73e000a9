"""Loading models: hub ids, local directories, and the offline models (converted by `model.offline`)."""
from __future__ import annotations

import copy
import functools
import pickle
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import torch
from safetensors import SafetensorError
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from .. import hub
from ..errors import UsageError, check_prompts
from ..paths import BUNDLED, DTYPE_NAMES, check_model_name
from ..progress import library_bars_off
from .adapters import Arch, adapter_class, arch_for
from .offline import OFFLINE_MODELS, offline_choices, offline_model_dir
from .weights import execution_device, weights_hash

Value = TypeVar("Value")
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


@dataclass
class ICLModel:
    """A Hugging Face causal LM, its tokenizer and its architecture adapter.

    Wrap a model you loaded yourself with `ICLModel(model, tokenizer)`: it is put in eval
    mode, without gradients, with eager attention (so attention weights can be read); every
    pass runs it in eval mode whatever mode you leave it in (`runs_model`). The
    tokenizer is left as it is: where it lacks a pad token or pads on the left, the wrapper
    keeps a copy that pads on the right with the end-of-text token.
    """

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str = ""
    arch: Arch = field(init=False)
    _held: list[str] = field(default_factory=list, init=False, repr=False, compare=False)  # `held`'s fingerprints
    _kept: dict[str, tuple[tuple, Any]] = field(default_factory=dict, init=False, repr=False, compare=False)  # `kept`'s

    def __post_init__(self) -> None:
        self.model.eval().requires_grad_(False)
        if self.model.config._attn_implementation != "eager":  # attention weights need eager
            self.model.set_attn_implementation("eager")
        self.arch = arch_for(self.model)
        self.name = self.name or getattr(self.model.config, "_name_or_path", "") or "model"
        if self.tokenizer.pad_token is None or self.tokenizer.padding_side != "right":
            self.tokenizer = copy.deepcopy(self.tokenizer)
            self.tokenizer.pad_token = self.tokenizer.pad_token or self.tokenizer.eos_token
            self.tokenizer.padding_side = "right"

    def fingerprint(self) -> str:
        """A hash of what the weights hold now (`weights.weights_hash`: one pass over them, on
        their devices), the key of everything computed from them; inside `held`, the one
        taken as it was entered, without hashing again."""
        return self._held[-1] if self._held else weights_hash(self.model)

    @contextmanager
    def held(self) -> Iterator[str]:
        """The fingerprint, taken once for one computation (a study, its read and its write):
        inside, `fingerprint()` gives it; a `held` inside another keeps the outer one's."""
        self._held.append(self.fingerprint())
        try:
            yield self._held[-1]
        finally:
            self._held.pop()

    def computed_from(self, key: str, compute: Callable[[], Value]) -> Value:
        """compute(), checked to come from weights whose fingerprint is `key` (taken before it,
        `held`): the weights are hashed again after it, and a UsageError refuses a result
        whose weights changed meanwhile, so that nothing is stored under a key it lacks."""
        value = compute()
        if weights_hash(self.model) != key:
            raise UsageError(f"The weights of {self.name} changed while a result was being computed from them, "
                             "so it is not kept: edit the weights between calls, not during one.")
        return value

    def kept(self, name: str, key: tuple, build: Callable[[], Value]) -> Value:
        """build(), made once and kept on the model under `name` while `key` (e.g. the fingerprint and a
        device) stays the same, as core's readout is (`core.attribution.readout_of`); a new key drops
        the old value before the new one is built, so the two never share memory."""
        if name not in self._kept or self._kept[name][0] != key:
            self._kept.pop(name, None)
            self._kept[name] = key, build()
        return self._kept[name][1]

    @property
    def device(self) -> torch.device:
        """Where the model's inputs go: the device its embedding runs on."""
        return execution_device(self.model.get_input_embeddings())

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


def check_model(m: object) -> ICLModel:
    """m, or a UsageError where it is not an ICLModel (a name, or a model not wrapped)."""
    if not isinstance(m, ICLModel):
        raise UsageError(f"Expected an ICLModel, not a {type(m).__name__}: load one with load_model(name), or wrap "
                         "your own with ICLModel(model, tokenizer).")
    return m


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Inside, `model` in eval mode (no dropout); on exit each of its modules back in its own mode."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def runs_model(run: Callable[..., Value]) -> Callable[..., Value]:
    """run(m, ...), a function that runs the model m, made deterministic: without gradients, the
    model in eval mode (`evaluating`: a model the user left in train mode stays there)."""
    @functools.wraps(run)
    def deterministic(m: ICLModel, *args: object, **kwargs: object) -> Value:
        with torch.no_grad(), evaluating(check_model(m).model):
            return run(m, *args, **kwargs)
    return deterministic


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


@library_bars_off()  # in a notebook, transformers' loading bar would leave a widget behind
def load_model(
    name: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str | None = None,
) -> ICLModel:
    """Load `name`: a hub id (`gpt2-large`, `meta-llama/Llama-2-7b-hf`), a local directory,
    or an offline model's short name (`model.offline`: `smollm2-135m`, the bundled one;
    `qwen2.5-coder-0.5b` and `gemma3-270m` after `scripts/setup.sh --models`).

    device: "cpu", "cuda", "cuda:1", or "auto" to spread a large model over all GPUs
    (accelerate); default: the first GPU if there is one, else the CPU.
    dtype: torch dtype or its name: float32 (default), float16 or bfloat16.
    Both are checked before anything loads, and the model's family before its weights.
    """
    name = check_model_name(name)
    dtype = check_dtype(dtype)
    device = check_device(device)
    path = offline_model_dir(name) if name in OFFLINE_MODELS else name
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
        model, info = AutoModelForCausalLM.from_pretrained(path, local_files_only=cache_only, output_loading_info=True,
                                                           **kwargs)
    except UsageError:
        raise
    except pickle.UnpicklingError as err:  # a .bin file holding more than tensors: torch's safe loader ran none of it
        raise UsageError(f"Could not load the model in {path}: torch's safe loader refuses its weights file, which holds "
                         f"Python objects besides tensors ({_first_line(err)}). If you trust the file, load it with "
                         "torch.load(weights_only=False) and save the model with save_pretrained (safetensors), then "
                         "give that folder.") from None
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:  # what a cut or edited file raises
        if Path(path).is_dir():
            raise UsageError(f"Could not load the model in {path} ({_first_line(err)}): a file of it is missing, cut or "
                             "damaged; save it there again with save_pretrained (config.json, tokenizer and weights).") from None
        if not isinstance(err, OSError):
            raise
        if not cache_only:
            where = f"the Hugging Face hub has no such model or refused it ({_first_line(err)})"
        elif hub.offline():
            where = "HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set and the hub's local cache has no such model"
        else:
            where = "the Hugging Face hub cannot be reached (offline?) and its local cache has no such model"
        raise UsageError(
            f"Could not load model {name!r}: it is not a local directory and {where}. {offline_choices(name)}"
        ) from None
    _check_weights_cover(name, info)
    if str(device) != "auto":
        model.to(device)
    return ICLModel(model, tokenizer, name=name)


def _check_weights_cover(name: str, info: dict[str, object]) -> None:
    """A UsageError, naming the keys, where the checkpoint's weights and the model's modules differ
    (`from_pretrained`'s loading info): a weight missing from it is random (its numbers would be
    noise), and one it holds that no module takes says the config builds another model. (A weight
    of another shape stops `from_pretrained` itself.)"""
    gaps = {what: sorted(info.get(field) or ()) for field, what in
            (("missing_keys", "missing from the checkpoint (so random)"), ("unexpected_keys", "in no module"))}
    said = [f"{len(keys)} {what}: {', '.join(map(str, keys[:3]))}{' ...' if len(keys) > 3 else ''}"
            for what, keys in gaps.items() if keys]
    if said:
        raise UsageError(f"The weights of {name} do not match its modules ({'; '.join(said)}): its config.json "
                         "(e.g. tie_word_embeddings, the sizes) describes another model than its weights. Save the "
                         "model again with save_pretrained, or correct config.json.")


def _first_line(err: BaseException) -> str:
    """An exception's message in one line: its first (its type's name where it has none)."""
    return (str(err).splitlines() or [type(err).__name__])[0]
