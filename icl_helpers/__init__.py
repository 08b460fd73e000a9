"""Helpers for reproducing Yu & Ananiadou (2024), "How do LLMs learn in context?"."""
from .errors import UsageError
from .models import BUNDLED, ICLModel, load_model

__all__ = ["BUNDLED", "ICLModel", "UsageError", "load_model"]
