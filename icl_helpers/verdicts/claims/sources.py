"""What the paper's claims and ours cite: the versions of the paper, when each set of rules was set
(and whether the data it judges had been read then), and the views a claim on located heads is judged in."""
from __future__ import annotations

from .. import rules
from ..evidence import ALL, CORRECT, HELD_OUT, PAPER_SHARE

V1 = "arXiv 2402.02872v1"  # the preprint; "l. N": line N of its text as extracted from the PDF
EMNLP = "the EMNLP 2024 version (arXiv 2402.02872v3)"
ABSTRACT_ONLY = ("only its abstract is at hand: the heads, the ablation and the bias measures are our reconstruction "
                 "(METHOD, Section 8)")
# When each rule was set, and whether the data it judges had been read then (git history).
FIRST_RULES = ("2026-11-23 (7261f91), before the first report (22d7730) was made, but after the committed notebooks "
               "had shown the bundled model's numbers (from a9d4783, ten hours before; notebook 08's bias reductions "
               "and causal check in 2a4f1e8)")
RECENCY_CONTROL = "2026-11-23 (2d54f5d), before the recency family's data were seen"
CAUSAL_REBUILT = (f"{FIRST_RULES}; the protocol it judges (mean ablation, {rules.RANDOM_DRAWS} layer-matched random draws) was "
                  "rebuilt after the first report (a414400)")
OVER_N = "2026-11-25 (d919c15): over every prompt where it read one, before those data were seen"
OUR_THRESHOLDS = ("2026-11-26, after the reports at 64 and 1,000 prompts of the earlier rules had been read: "
            "its thresholds are ours, not tuned to pass")
# The rules restated in the paper's words; each claim set then appends whether the data it judges had been seen.
RESTATED = "2026-11-27, when the rules were restated in the paper's words, after the reports of the earlier rules had been read"
# The views a claim on the label flow in located heads is judged in: again on the correct prompts and in the paper's
# share of heads (LOCATED); where it measures those heads on prompts, again in heads located on other inputs (FLOW).
# A claim on located heads that is no label flow (the bias runs) is judged again held out alone (WITH_HELD_OUT).
LOCATED = (ALL, CORRECT, PAPER_SHARE)
FLOW = (*LOCATED, HELD_OUT)
WITH_HELD_OUT = (ALL, HELD_OUT)
