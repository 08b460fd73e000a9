"""Our Table 2: in-context accuracy with true label foo and with true label bar.

Word datasets: every stored record (1,000 a dataset), split by direction. Sentence
datasets: the first N records (default 200, seed 0). Prints a Markdown table.

    .venv/bin/python bench/table2.py [--model smollm2-135m] [--sentences 200] [--batch-size 32] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import time

from icl_helpers import load_model
from icl_helpers.data.prompts import Record, Variant, build_prompts, by_direction, prompt_label_ids
from icl_helpers.data.sentences import sentence_records
from icl_helpers.data.sources import SOURCES
from icl_helpers.data.words import WORD_DATASETS, load_word_records
from icl_helpers.model.loading import ICLModel
from icl_helpers.studies.accuracy import accuracy

# The paper's Table 2 (GPT-2 large, accuracy in %), true label foo / bar.
PAPER = {"sentiment/number": (94, 100), "number/sentiment": (92, 87), "animal/country": (100, 100), "country/animal": (100, 100)}
LABELS = {"foo": ("foo", "bar"), "bar": ("bar", "foo")}


def rows(m: ICLModel, dataset: str, groups: dict[str, list[Record]], batch_size: int):
    """One table row per group of records and true label."""
    for group, records in groups.items():
        for true, labels in LABELS.items():
            prompts = build_prompts(records, Variant(labels=labels))
            acc = accuracy(m, [p.text for p in prompts], *prompt_label_ids(m.tokenizer, prompts), batch_size=batch_size)
            paper = PAPER.get(group, ("", ""))[true == "bar"]
            yield f"| {dataset} | {group} | {true} | {len(records)} | {100 * acc.ranked:.1f} | {100 * acc.top1:.1f} | {paper} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--sentences", type=int, default=200, help="prompts a sentence dataset")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir", default=None, help="sentence datasets (default: $ICL_DATA_DIR, else the copy `data fetch` made, else the hub)")
    args = parser.parse_args()
    start = time.time()
    m = load_model(args.model)
    print(f"model {m.name}; ranked: true label's logit above the false label's; top-1: argmax is the true label\n")
    print("| dataset | input class / other | true label | prompts | ranked % | top-1 % | paper (GPT-2 large) % |")
    print("|---|---|---|---|---|---|---|")
    for name in WORD_DATASETS:
        for row in rows(m, name, by_direction(load_word_records(name)), args.batch_size):
            print(row, flush=True)
    for name in SOURCES:
        records = sentence_records(name, n=args.sentences, data_dir=args.data_dir)
        for row in rows(m, name, {"all classes": records}, args.batch_size):
            print(row, flush=True)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
