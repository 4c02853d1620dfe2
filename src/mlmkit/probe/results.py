"""What the probes return: dataclasses with a JSON-ready `to_dict`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ClozePrediction:
    """One text's cloze classification: the winning label and every label's score."""

    text: str
    label: str
    scores: dict[str, float]  # label -> aggregated log-probability of its words
    probabilities: dict[str, float]  # softmax of `scores` over the labels
    word_scores: dict[str, float]  # verbalizer word -> log P(word | prompt)
    gold: str | None = None


@dataclass
class ClozeResult:
    """PET-style zero-shot classification of a list of texts."""

    predictions: list[ClozePrediction]
    labels: list[str]
    template: str
    aggregate: str
    accuracy: float | None  # when gold labels were given
    multi_token_words: list[str]  # verbalizer words scored as several masks somewhere

    def to_dict(self) -> dict:
        return {"template": self.template, "aggregate": self.aggregate, "labels": self.labels,
                "accuracy": self.accuracy, "n": len(self.predictions),
                "multi_token_words": self.multi_token_words,
                "predictions": [asdict(p) for p in self.predictions]}


@dataclass
class RankedItem:
    """One multiple-choice item: each candidate statement's score, best first in `ranking`."""

    candidates: list[str]
    scores: list[float]
    ranking: list[int]  # candidate indices, best first
    predicted: int
    gold: int | None = None
    item_id: str | None = None

    @property
    def correct(self) -> bool | None:
        return None if self.gold is None else self.predicted == self.gold


@dataclass
class RankResult:
    """Plausibility ranking of full statements (Tamborrino et al. 2020; BEAR)."""

    items: list[RankedItem]
    metric: str
    normalize: str
    scope: str
    accuracy: float | None  # over the items with a gold answer
    n_with_gold: int

    def to_dict(self) -> dict:
        items = []
        for item in self.items:
            row = asdict(item)
            row["correct"] = item.correct
            items.append(row)
        return {"metric": self.metric, "normalize": self.normalize, "scope": self.scope,
                "accuracy": self.accuracy, "n_items": len(self.items),
                "n_with_gold": self.n_with_gold, "items": items}


@dataclass
class FactPrediction:
    """One probed fact: the gold object's rank over the vocabulary and the top guesses."""

    relation: str
    prompt: str
    answer: str
    rank: int | None  # 1 = best; None when skipped
    top: list[str]
    skipped: str | None = None  # why the fact was not probed (multi-token object)


@dataclass
class ProbeScores:
    """P@1, P@10 and MRR over probed facts, with how many were skipped."""

    n: int
    skipped: int
    p_at_1: float | None
    p_at_10: float | None
    mrr: float | None


@dataclass
class KnowledgeResult:
    """LAMA-style knowledge probe: metrics per relation, overall (micro) and macro."""

    overall: ProbeScores
    macro: ProbeScores  # mean over relations of the per-relation metrics
    by_relation: dict[str, ProbeScores]
    facts: list[FactPrediction] = field(default_factory=list)

    def to_dict(self, with_facts: bool = True) -> dict:
        out = {"overall": asdict(self.overall), "macro": asdict(self.macro),
               "by_relation": {k: asdict(v) for k, v in self.by_relation.items()}}
        if with_facts:
            out["facts"] = [asdict(f) for f in self.facts]
        return out
