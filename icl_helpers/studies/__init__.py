"""One module per paper analysis, each computing its numbers and its summary, on the
batched, disk-cached runner (`studies.runner`) they all share:

accuracy (Table 2), in_context_heads (Figs. 3-4, 12-15), projection (Tables 1, 3),
mrr (Fig. 5), label_attention (Figs. 6-11), subvalues (Appendix E: position- and neuron-level
increases), causal (ablation and biases, EMNLP version).
"""
