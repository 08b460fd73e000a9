"""Data: prompt records and their builder, label token positions, word and sentence datasets."""
from .positions import LabelPositions, find_positions
from .prompts import VARIANTS, Prompt, Record, Variant, build_prompt, build_prompts, parse_prompt

__all__ = ["LabelPositions", "Prompt", "Record", "VARIANTS", "Variant", "build_prompt", "build_prompts",
           "find_positions", "parse_prompt"]
