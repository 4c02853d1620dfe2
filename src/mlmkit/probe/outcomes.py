"""What the probes return: dataclasses with a JSON-ready `to_dict` (`mlmkit.core.results`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlmkit.core.results import Result, jsonable


@dataclass
class ClozePrediction(Result):
    """One text's cloze classification: the winning label and every label's score."""

    text: str
    label: str
    scores: dict[str, float]  # label -> aggregated log-probability of its words
    probabilities: dict[str, float]  # softmax of `scores` over the labels
    word_scores: dict[str, float]  # verbalizer word -> log P(word | prompt)
    gold: str | None = None


@dataclass
class ClozeResult(Result):
    """PET-style zero-shot classification of a list of texts."""

    predictions: list[ClozePrediction]
    labels: list[str]
    template: str
    aggregate: str
    accuracy: float | None  # when gold labels were given
    multi_token_words: list[str]  # verbalizer words scored as several masks somewhere
    windowed_texts: list[int] = field(default_factory=list)  # prompts past the model's length

    def to_dict(self) -> dict:
        return jsonable({"template": self.template, "aggregate": self.aggregate,
                         "labels": self.labels, "accuracy": self.accuracy,
                         "n": len(self.predictions), "multi_token_words": self.multi_token_words,
                         "windowed_texts": self.windowed_texts,
                         "predictions": [p.to_dict() for p in self.predictions]})


@dataclass
class RankedItem(Result):
    """One multiple-choice item: each candidate statement's score, best first in `ranking`."""

    candidates: list[str]
    scores: list[float]
    ranking: list[int]  # candidate indices, best first
    predicted: int
    gold: int | None = None
    item_id: str | None = None
    # per candidate: scored tokens the tokenizer could only spell as its unknown token
    # ([UNK]); they are scored like any other token (as minicons scores them)
    unknown_tokens: list[int] = field(default_factory=list)

    @property
    def correct(self) -> bool | None:
        return None if self.gold is None else self.predicted == self.gold

    def to_dict(self) -> dict:
        return {**super().to_dict(), "correct": self.correct}


@dataclass
class RankResult(Result):
    """Plausibility ranking of full statements (Tamborrino et al. 2020; BEAR)."""

    items: list[RankedItem]
    metric: str
    normalize: str
    scope: str
    accuracy: float | None  # over the items with a gold answer
    n_with_gold: int

    @property
    def n_unknown(self) -> int:
        """Candidates holding at least one [UNK] token (scored, but worth knowing)."""
        return sum(1 for item in self.items for n in item.unknown_tokens if n)

    def to_dict(self) -> dict:
        return jsonable({"metric": self.metric, "normalize": self.normalize,
                         "scope": self.scope, "accuracy": self.accuracy,
                         "n_items": len(self.items), "n_with_gold": self.n_with_gold,
                         "n_candidates_with_unknown": self.n_unknown,
                         "items": [item.to_dict() for item in self.items]})


@dataclass
class FactPrediction(Result):
    """One probed fact: the gold object's rank over the vocabulary and the top guesses."""

    relation: str
    prompt: str
    answer: str
    rank: int | None  # 1 = best; None when skipped
    top: list[str]
    skipped: str | None = None  # why the fact was not probed (multi-token or unknown object)


@dataclass
class ProbeScores(Result):
    """P@1, P@10 and MRR over probed facts, with how many were skipped and why.

    `skipped` counts every fact left out; `unknown` is the part of them whose object the
    tokenizer can only spell as its unknown token ([UNK]; LAMA leaves those out too).
    """

    n: int
    skipped: int
    p_at_1: float | None
    p_at_10: float | None
    mrr: float | None
    unknown: int = 0


@dataclass
class KnowledgeResult(Result):
    """LAMA-style knowledge probe: metrics per relation, overall (micro) and macro."""

    overall: ProbeScores
    macro: ProbeScores  # mean over relations of the per-relation metrics
    by_relation: dict[str, ProbeScores]
    facts: list[FactPrediction] = field(default_factory=list)

    def to_dict(self, with_facts: bool = True) -> dict:
        out = {"overall": self.overall.to_dict(), "macro": self.macro.to_dict(),
               "by_relation": {k: v.to_dict() for k, v in self.by_relation.items()}}
        if with_facts:
            out["facts"] = [f.to_dict() for f in self.facts]
        return out
