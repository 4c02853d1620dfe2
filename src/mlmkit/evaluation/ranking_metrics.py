"""Ranking metrics of a retrieval run, computed as trec_eval (and so pytrec_eval) does.

A run is {query: {document: score}}; qrels are {query: {document: relevance}}. As in
trec_eval: a run's documents are ranked by score, ties broken by document id in descending
order; a document is relevant when its relevance is ≥ 1; the queries that count are those
both in the qrels and in the run (a judged query without a relevant document scores 0). NDCG's gain is the relevance itself (linear)
with the discount log2(rank + 1), and its ideal ranking is that of every judged document.
"""

from __future__ import annotations

import math


def ranked(scores: dict[str, float]) -> list[str]:
    """Document ids best first, as trec_eval orders them (score, then id, both descending)."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]),
                                     reverse=True)]


def ndcg_at(ranking: list[str], judged: dict[str, int], k: int) -> float:
    gains = [judged.get(doc, 0) for doc in ranking[:k]]
    dcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(gains) if g > 0)
    ideal = sorted((r for r in judged.values() if r > 0), reverse=True)[:k]
    best = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / best if best > 0 else 0.0


def reciprocal_rank_at(ranking: list[str], judged: dict[str, int], k: int) -> float:
    for rank, doc in enumerate(ranking[:k]):
        if judged.get(doc, 0) >= 1:
            return 1.0 / (rank + 1)
    return 0.0


def recall_at(ranking: list[str], judged: dict[str, int], k: int) -> float:
    relevant = {doc for doc, r in judged.items() if r >= 1}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


METRICS = {"ndcg@10": (ndcg_at, 10), "mrr@10": (reciprocal_rank_at, 10),
           "recall@100": (recall_at, 100)}


def per_query(run: dict[str, dict[str, float]],
              qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """{query: {metric: value}} for every query of both `qrels` and `run`."""
    values = {}
    for query, judged in qrels.items():
        if query not in run:
            continue
        ranking = ranked(run[query])
        values[query] = {name: function(ranking, judged, k)
                         for name, (function, k) in METRICS.items()}
    return values


def mean_metrics(values: dict[str, dict[str, float]]) -> dict[str, float]:
    """The mean of each metric over the queries (math.fsum: exact to the last bit)."""
    if not values:
        return {name: 0.0 for name in METRICS}
    return {name: math.fsum(v[name] for v in values.values()) / len(values) for name in METRICS}
