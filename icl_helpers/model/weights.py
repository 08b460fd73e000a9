"""Reading a model's weights, offloaded ones included, and hashing what they hold (`weights_hash`).

A model loaded with a device map that offloads some layers (`device="auto"` on a GPU too
small for it, or a map naming "cpu" or "disk" beside a GPU) keeps those layers' parameters
on the "meta" device, without values, and accelerate loads them from its store for each
forward pass. The package reads every weight through `weight`, so an offloaded layer is
decomposed like any other, with the values its forward pass uses.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from ..errors import UsageError


def _hooks(module: nn.Module) -> list:
    """accelerate's hooks on `module` (none where it dispatched nothing; a SequentialHook holds several)."""
    hook = getattr(module, "_hf_hook", None)
    return [] if hook is None else list(getattr(hook, "hooks", [hook]))


def _offload_hook(module: nn.Module):
    """accelerate's hook that keeps `module`'s offloaded weights, or None."""
    return next((h for h in _hooks(module) if getattr(h, "weights_map", None) is not None), None)


def weight(module: nn.Module, name: str = "weight") -> torch.Tensor | None:
    """`module`'s parameter or buffer `name` (None where it has none); an offloaded one read
    from accelerate's store onto the device `module`'s forward pass runs on."""
    t = getattr(module, name, None)
    if t is None or not t.is_meta:
        return t
    hook = _offload_hook(module)
    if hook is None:
        raise UsageError(f"{type(module).__name__}.{name} has no values (it is on the meta device) and no offload store "
                         "to read them from: load the model's weights (from_pretrained) before using it here.")
    return hook.weights_map[name].to(execution_device(module))


def execution_device(module: nn.Module) -> torch.device:
    """The device `module`'s forward pass runs on: accelerate's execution device where it
    dispatched the module, else the device of its first parameter (the CPU without one)."""
    for h in _hooks(module):
        if getattr(h, "execution_device", None) is not None:
            return torch.device(h.execution_device)
    return next((p.device for p in module.parameters()), torch.device("cpu"))


def named_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for each entry of `model`'s state dict, offloaded ones read one at a time."""
    for name, t in model.state_dict().items():
        if t.is_meta:
            path, _, leaf = name.rpartition(".")
            t = weight(model.get_submodule(path), leaf)
        yield name, t


# --- what the weights hold: the key of everything computed from them ----------------------
# Each weight's bits, as integers b_j (an element of 1, 2 or 4 bytes as one, sign-extended to
# 32 bits; of 8 bytes as two), go in chunks of _CHUNK: a chunk's sum S = sum_j a_j b_j mod 2^32,
# a_j fixed odd multipliers. A one-element edit changes one b_j mod 2^32; an odd a_j is
# invertible mod 2^32, so a_j b_j mod 2^32 changes, and with it S: the chunk sums, and so the
# SHA-256 of every weight's name, shape, dtype and chunk sums, see every one-element edit (an
# 8-byte element's edit may cancel between its two words; no dtype the package loads has 8).
# Other edits go unseen only where they cancel mod 2^32 in every chunk they touch. The sums
# are integers mod 2^32, the same in any order: the same on any device, with any thread count,
# and made where the weight lies, only S crossing to the CPU.
_CHUNK = 1 << 12
_ROWS = 1 << 9  # chunks a step: a step's products are 8 MiB
_MULTIPLIERS = np.frombuffer(hashlib.shake_256(b"icl_helpers weights").digest(4 * _CHUNK), np.int32) | 1
_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int32}


@functools.cache
def _multipliers(device: torch.device) -> torch.Tensor:
    """[_CHUNK] int32: the odd multipliers a_j, on `device`."""
    return torch.from_numpy(_MULTIPLIERS.copy()).to(device)


def chunk_sums(t: torch.Tensor) -> torch.Tensor:
    """[ceil(n / _CHUNK) + 1] int32: S of each chunk of t's n integers b (`_INTS`), the last
    chunk's (the tail's) on its own, on t's device."""
    b = t.detach().reshape(-1).view(_INTS[t.element_size()])
    a = _multipliers(b.device)
    tail = b.numel() % _CHUNK
    rows = b[: b.numel() - tail].view(-1, _CHUNK)
    sums = [torch.mul(rows[s : s + _ROWS], a).sum(-1, dtype=torch.int32) for s in range(0, len(rows), _ROWS)]
    return torch.cat([*sums, torch.mul(b[b.numel() - tail :], a[:tail]).sum(dtype=torch.int32).view(1)])


def weights_hash(model: nn.Module) -> str:
    """A hash of what `model`'s weights hold (its state dict, offloaded entries read from their
    store): 16 hex digits of SHA-256 over each entry's name, shape, dtype and `chunk_sums`."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, t in named_weights(model):
            digest.update(f"{name} {tuple(t.shape)} {t.dtype}\n".encode())
            digest.update(chunk_sums(t).cpu().numpy().tobytes())
    return digest.hexdigest()[:16]
