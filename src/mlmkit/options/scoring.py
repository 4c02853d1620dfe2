"""The scoring options: what `mlmkit.score` computes for each text. `mlmkit.score` takes
these fields as keywords, `mlmkit score` as flags, the server's /v1/score as JSON fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlmkit.options import option


@dataclass(frozen=True)
class Scoring:
    """How texts are scored (each field is a flag of `mlmkit score` and a /v1/score field)."""

    metric: Literal["pll", "pll_word_l2r"] = option(
        "pll", "pll (every token masked alone) or pll-word-l2r (also the word's later tokens: "
        "minicons' within_word_l2r; the library names it pll_word_l2r).")
    per_token: bool = option(False, "Add each token's score.", flag="--per-token")
    per_word: bool = option(False, "Add each word's score.", flag="--per-word")
    unk: Literal["score", "skip"] = option(
        "score", "[UNK] tokens: score (masked and scored as minicons does, counted in n_unk) "
        "or skip (left out of the PLL, as mlmkit 0.1).", cli=False)
    stride: int = option(1, "Long texts: windows start at multiples of this.")
    reduction: Literal["sum", "mean"] = option(
        "sum", "Each text's score from its tokens' log-probabilities: sum (the PLL) or mean "
        "(per scored token), as minicons' reduction.")
