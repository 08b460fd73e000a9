"""The paper's figures, notebook 08's and notebook 09's (the head types), drawn from what the studies return:
`paper` (Figs. 2-11, the appendices and the interventions), `head_sets` (notebook 09), `tables`
(tables of tokens), on the frame they share (`style`).

Every function returns a matplotlib `Figure` that is not attached to pyplot: nothing is
shown twice or kept alive by a widget redraw, and a notebook shows it by ending a cell
with it. Heads are (layer, head) pairs, S of them; N is the number of prompts.
"""
from .head_sets import head_profile, layer_spread, overlap_diagram, score_scatter, set_ablation_curves, signature_bars
from .paper import (
    ablation_curves,
    accuracy_change,
    attention_vs_increase,
    bias_change,
    head_attention_hist,
    head_by_dataset,
    head_heatmaps,
    label_attention_bars,
    layer_increase,
    mrr_bars,
    order_increase,
    overlap_heatmap,
    prompt_attention,
    rank_hist,
    top_positions,
    true_label_attention,
    variant_attention,
)
from .tables import table_image, token_table, visible

__all__ = [
    "ablation_curves", "accuracy_change", "attention_vs_increase", "bias_change", "head_attention_hist",
    "head_by_dataset", "head_heatmaps", "head_profile", "label_attention_bars", "layer_increase", "layer_spread",
    "mrr_bars", "order_increase", "overlap_diagram", "overlap_heatmap", "prompt_attention", "rank_hist",
    "score_scatter", "set_ablation_curves", "signature_bars", "table_image", "token_table", "top_positions",
    "true_label_attention", "variant_attention", "visible",
]
