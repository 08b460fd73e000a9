"""Reading a model's weights, offloaded ones included.

A model loaded with a device map that offloads some layers (`device="auto"` on a GPU too
small for it, or a map naming "cpu" or "disk" beside a GPU) keeps those layers' parameters
on the "meta" device, without values, and accelerate loads them from its store for each
forward pass. The package reads every weight through `weight`, so an offloaded layer is
decomposed like any other, with the values its forward pass uses.
"""
from __future__ import annotations

from collections.abc import Iterator

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
