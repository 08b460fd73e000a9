"""Helpers for reproducing Yu & Ananiadou (2024), "How do LLMs learn in context? Query and Key
Matrices of In-Context Heads are Two Towers for Metric Learning".

The paper's locate-and-project method decomposes the last position's residual stream into layers,
heads, positions and neurons, scores each part by the log-probability increase it gives the
predicted label, and projects the queries, keys and values of the top "in-context heads" into the
vocabulary. This reference is built from the docstrings (`bash scripts/docs.sh`); the README and
its `docs/` pages hold the results, the notebooks and how to reproduce the reports.

## Locate the in-context heads of your own prompts

A prompt is its demonstrations, each with its label, then the input: `d1 : l1 ... dK : lK x :`.

```python
from icl_helpers import load_model, locate

m = load_model("smollm2-135m")  # or a hub id or folder: "gpt2-large"
result = locate(m, ["love : bar like : bar eight : foo two : foo one :"])
heads = result.top_heads(20)    # [(layer, head), ...], best first
result.head_scores(heads)       # their mean log-probability increase
```

The same from the shell: `python -m icl_helpers locate --model smollm2-135m --prompt "..." --json out.json`
(`icl_helpers.cli`).

## Run the studies on your own prompts

Each study (`icl_helpers.studies`, one module a figure or table of the paper) takes a prompt set:
prompts with their label positions in the model's tokens
(`icl_helpers.studies.runner.PromptSet`). `icl_helpers.studies.runner.prompt_set_from_texts`
makes one from prompts written out as above; `labels` gives the (true, false) label words, the
true one being each prompt's answer (its default is the paper's ("foo", "bar")).

```python
from icl_helpers.studies import (in_context_heads, label_attention, mrr,
                                 projection, runner)

ps = runner.prompt_set_from_texts(m, [
    "love : bar like : bar eight : foo two : foo one :",
    "hate : bar good : bar four : foo six : foo ten :",
], labels=("foo", "bar"))
heads = in_context_heads.in_context_heads(m, ps, k=20)  # Figs. 3-4
attention = label_attention.attention_on_labels(m, ps)
label_attention.true_vs_false(*attention.at(heads))     # Fig. 6
mrr.mrr(mrr.label_ranks(m, ps, heads))                  # Fig. 5: MRR [20]
projection.projections(m, ps).table(0, heads[0])        # Table 1, prompt 0
```

Most studies keep their tensors on disk, keyed by the model's weights and the prompts themselves
(`icl_helpers.studies.runner`), so a second call reads them.

## Test the paper's claims: the report

`icl_helpers.verdicts.findings.report` judges each of the paper's claims on one model, any model
`load_model` takes: our number, its 95% interval, N and a verdict by a rule in the paper's own words.
The claims are about the paper's datasets, so the report builds its own prompts from them (n a
word dataset, sentence_n a sentence dataset); `heads` analyses the heads you name instead of
each dataset's top 20 (the last line: two claims, in two heads of the bundled model).

```python
from icl_helpers.verdicts import markdown, report

findings = report(m, n=64, sentence_n=16)  # the paper's: 1000, 200
print(markdown(findings))
report(m, 64, 16, ids=["table2", "fig6"], heads="23-1,29-1")
```

From the shell: `python -m icl_helpers report --model NAME --n 64 --sentence-n 16 --json out.json
--markdown out.md`, and `python -m icl_helpers compare` for several models side by side
(`icl_helpers.verdicts.compare`).

## Where things are

The public names above are imported from the package itself. The subpackages hold the rest:
`icl_helpers.model` (loading, one adapter a model family, hooks), `icl_helpers.core` (the exact
computations: decompose, attribution, locate, projections, interventions), `icl_helpers.data`
(prompts, label positions, the word and sentence datasets), `icl_helpers.studies` (one module per
paper analysis), `icl_helpers.verdicts` (the paper's claims, each judged by its rule) and
`icl_helpers.viz` (figures and widgets). Names are imported on first use, so
`python -m icl_helpers` answers bad arguments before torch loads.
"""
from __future__ import annotations

from .lazy import lazy_exports

_WHERE = {  # public name -> module that defines it
    "UsageError": "errors", "BUNDLED": "paths", "ICLModel": "model.loading", "load_model": "model.loading",
    "Decomposition": "core.decompose", "decompose": "core.decompose", "Readout": "core.attribution",
    "LocateResult": "core.locate", "locate": "core.locate", "Head": "core.heads",
    "ablated": "core.interventions", "balanced_labels": "core.interventions", "position_free_labels": "core.interventions",
    "LabelPositions": "data.positions", "find_positions": "data.positions",
    "Prompt": "data.prompts", "Record": "data.prompts", "Variant": "data.prompts", "build_prompt": "data.prompts",
    "build_prompts": "data.prompts", "parse_prompt": "data.prompts",
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)

