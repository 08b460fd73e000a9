"""Models: loading (hub, local, bundled), the offline models' GGUF files and their conversion
(`offline`), per-family adapters with their activation sites, hooks, passes that share the blocks
below an intervention (`prefix`)."""
from .adapters import Arch, Site
from .loading import BUNDLED, ICLModel, load_model
from .offline import offline_model_dir

__all__ = ["Arch", "BUNDLED", "ICLModel", "Site", "offline_model_dir", "load_model"]
