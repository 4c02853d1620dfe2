"""What `mlmkit.score` returns: a sentence score with optional token and word breakdowns."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlmkit.core.results import Result, jsonable


def _exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


@dataclass
class TokenScore(Result):
    """One scored token: its log-probability and where it sits in the text."""

    token: str
    token_id: int
    start: int  # character offsets into the text (-1 when the tokenizer gives none)
    end: int
    logprob: float
    word: int | None  # index of the word it belongs to


@dataclass
class WordScore(Result):
    """One word: the sum of its scored subwords' log-probabilities."""

    word: str
    start: int
    end: int
    logprob: float
    n_tokens: int


@dataclass
class TextScore(Result):
    """The pseudo-log-likelihood of one text (None for an empty text, or one with no token
    to score)."""

    text: str
    pll: float | None
    n_tokens: int
    """Tokens scored (with `unk="skip"`, the [UNK] tokens are not among them)."""
    n_words: int
    metric: str
    tokens: list[TokenScore] | None = None
    words: list[WordScore] | None = None
    n_unk: int = 0
    """[UNK] tokens in the scored part of the text (scored, or skipped with `unk="skip"`)."""
    reduction: str = "sum"
    """How `score` reduces the tokens' log-probabilities: "sum" (the PLL) or "mean"."""

    @property
    def score(self) -> float | None:
        """The text's score under `reduction`: the PLL (sum), or the PLL per scored token
        (mean, minicons' `reduction=lambda x: x.mean(0)`)."""
        if self.pll is None or self.reduction == "sum":
            return self.pll
        return self.pll / self.n_tokens if self.n_tokens else None

    @property
    def pppl(self) -> float | None:
        """Pseudo-perplexity per token: exp(-PLL / tokens) (Salazar et al. 2020)."""
        if self.pll is None or self.n_tokens == 0:
            return None
        return _exp(-self.pll / self.n_tokens)

    @property
    def pppl_word(self) -> float | None:
        """Pseudo-perplexity per word: exp(-PLL / words), comparable across tokenizers."""
        if self.pll is None or self.n_words == 0:
            return None
        return _exp(-self.pll / self.n_words)

    def to_dict(self) -> dict:
        """A JSON-ready dict (token and word lists only when they were asked for)."""
        out = {"text": self.text, "score": self.score, "reduction": self.reduction,
               "pll": self.pll, "pppl": self.pppl,
               "pppl_word": self.pppl_word, "n_tokens": self.n_tokens,
               "n_words": self.n_words, "n_unk": self.n_unk, "metric": self.metric}
        if self.tokens is not None:
            out["tokens"] = [t.to_dict() for t in self.tokens]
        if self.words is not None:
            out["words"] = [w.to_dict() for w in self.words]
        return jsonable(out)
