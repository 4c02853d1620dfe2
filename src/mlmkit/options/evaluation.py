"""The evaluation suite's options: what `mlmkit.evaluation.evaluate_suite` runs and where it
reads its data. `evaluate_suite` takes these fields as keywords, `mlmkit eval suite` as flags."""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.options import option


@dataclass(frozen=True)
class Suite:
    """Which parts of the suite run, on which data (each field is a flag of `eval suite`)."""

    data: str | None = option(None, "Folder holding blimp/, sst2/ and agnews/ (default: "
                              "$MLMKIT_DATA, else ~/.cache/mlmkit/data; 'mlmkit data fetch "
                              "NAME' fills it).", flag="--data")
    quick: bool = option(False, "Sub-sample every part (minutes on CPU).", flag="--quick")
    parts: str | None = option(None, "Comma-separated parts: blimp, pppl, cloze, fewshot, "
                               "sst2, agnews, elbo, facts, variants, sts, retrieval (default: "
                               "all that apply).")
    texts: str | None = option(None, "Held-out texts for pseudo-perplexity (default: "
                               "python-docs validation).")
    facts: str | None = option(None, "A facts jsonl for the knowledge probe.")
    variants: str | None = option(None, "A YAML list of deep mutational scans (dms, sequence, "
                                  "offset, target) for zero-shot variant effects (Spearman).")
    retrieval: str | None = option(None, "A BEIR folder (corpus.jsonl, queries.jsonl, "
                                   "qrels/test.tsv) or a data name (scifact, nanobeir/SET: "
                                   "fetched into $MLMKIT_DATA the first time) for the "
                                   "retrieval part: NDCG@10, MRR@10, Recall@100 of exact "
                                   "cosine search.")
    run_dir: str | None = option(None, "Write suite.json, suite.md and suite.png here.",
                                 flag="--run-dir")
    offline: bool = option(False, "Load a hub model name from the local Hugging Face cache "
                           "only, never the network.", flag="--offline")
