"""Word error rate: word-level edit distance, summed over utterances, over reference words."""

from __future__ import annotations

import numpy as np


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    """Levenshtein distance between two word lists (substitutions, insertions, deletions)."""
    if not reference:
        return len(hypothesis)
    if not hypothesis:
        return len(reference)
    hyp = np.array(hypothesis, dtype=object)
    previous = np.arange(len(hyp) + 1)
    for i, word in enumerate(reference, start=1):
        substitution = previous[:-1] + (hyp != word)
        current = np.empty_like(previous)
        current[0] = i
        current[1:] = np.minimum(substitution, previous[1:] + 1)
        # insertions chain left to right: a running minimum of (cost - column) does it at once
        columns = np.arange(len(current))
        current = np.minimum.accumulate(current - columns) + columns
        previous = current
    return int(previous[-1])


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER: total word edits / total reference words (0.0 for no reference words)."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references for {len(hypotheses)} hypotheses")
    edits = sum(edit_distance(r.split(), h.split()) for r, h in zip(references, hypotheses,
                                                                       strict=True))
    words = sum(len(r.split()) for r in references)
    return edits / words if words else float(edits > 0)
