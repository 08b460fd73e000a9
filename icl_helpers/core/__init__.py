"""The exact core: batching (batches of prompts and the walk over them), decompose,
attribution (readout and log-probability increase; logprob, the log-probabilities it streams
over vocabulary chunks; sizes, the plan of its chunks, tiles and groups), locate, heads (the
(layer, head) type and samplers), projections, interventions (and the `Intervention` type;
label_edits, the attention function of the label edits), passes (last-position passes of many
prompts under interventions: the engine of accuracy, ablation and bias edits).

The public names are re-exported by `icl_helpers` itself; modules are imported as
`icl_helpers.core.<module>` (this file re-exports nothing, so `core.locate` and
`core.decompose` stay the modules, not the functions of the same names).
"""
