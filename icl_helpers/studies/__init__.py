"""One module per paper analysis, each computing its numbers and its summary:

accuracy (Table 2), in_context_heads (Figs. 3-4, 12-15), projection (Tables 1, 3),
mrr (Fig. 5), label_attention (Figs. 6-11), recency (the recency control), towers (the two
towers), order (Appendix E: increases in other orders), subvalues (position- and neuron-level
increases), ablation (the causal check) and biases (the bias reductions), the last two from
the EMNLP version, and head_types and function_vectors (the head types of the literature beside the
in-context heads) and head_sets (their sets of equal size side by side, ablated, and their two-tower signature),
and label_anchors (Wang et al. 2023's label-anchor saliency, head by head); docs/layout.md maps them all.

They share the prompt sets and cached results of `runner`, one recorded pass a prompt set
(`prompt_pass`), and the last-position passes under interventions of `core.passes`.
"""
