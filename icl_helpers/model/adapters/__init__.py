"""Where each architecture family keeps its weights and activations: one adapter a family,
found from a config's model_type before any weights load.

`base` holds the common ground (`Site`, `Arch`, keys without positions); `gpt2`, `llama`,
`qwen3`, `olmo2`, `neox`, `phi3` and `gptj` one family each, `gemma` Gemma 1, 2 and 3. A new
family is a module here, a line in `ARCHITECTURES` and its tests.
"""
from __future__ import annotations

from torch import nn

from ...errors import UsageError
from .base import Angles, Arch, Branch, PositionFreeKeys, RotaryKeys, Site, softcap_
from .gemma import Gemma2Arch, Gemma3Arch, Gemma3MultimodalArch, GemmaArch
from .gpt2 import AbsoluteKeys, GPT2Arch
from .gptj import GPTJArch
from .llama import LlamaArch
from .neox import NeoXArch
from .olmo2 import Olmo2Arch
from .phi3 import Phi3Arch
from .qwen3 import Qwen3Arch

__all__ = ["Angles", "Arch", "Branch", "PositionFreeKeys", "RotaryKeys", "Site", "softcap_", "AbsoluteKeys", "GPT2Arch",
           "LlamaArch", "Qwen3Arch", "Olmo2Arch", "NeoXArch", "Phi3Arch", "GPTJArch", "GemmaArch", "Gemma2Arch",
           "Gemma3Arch", "Gemma3MultimodalArch", "ARCHITECTURES", "adapter_class", "arch_for"]


ARCHITECTURES: dict[str, type[Arch]] = {
    "gpt2": GPT2Arch,
    "llama": LlamaArch,
    "mistral": LlamaArch,
    "qwen2": LlamaArch,
    "qwen3": Qwen3Arch,
    "olmo2": Olmo2Arch,
    "gemma": GemmaArch,
    "gemma2": Gemma2Arch,
    "gemma3_text": Gemma3Arch,
    "gemma3": Gemma3MultimodalArch,
    "gpt_neox": NeoXArch,
    "phi3": Phi3Arch,
    "gptj": GPTJArch,
}


def adapter_class(model_type: str | None) -> type[Arch]:
    """The adapter class for a config's model_type (known before any weights load), or a
    UsageError naming the supported families and the file a new one goes in."""
    if model_type not in ARCHITECTURES:
        raise UsageError(
            f"Model type {model_type!r} is not supported; supported families: "
            f"{', '.join(sorted(ARCHITECTURES))}. Add an adapter in icl_helpers/model/adapters/."
        )
    return ARCHITECTURES[model_type]


def arch_for(model: nn.Module) -> Arch:
    """The adapter for `model`, or a UsageError naming the supported families."""
    return adapter_class(getattr(getattr(model, "config", None), "model_type", None))(model)
