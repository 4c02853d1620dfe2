"""n-best rescoring: combined = am_score + weight × PLL (Salazar et al. 2020), WER and tuning.

Every hypothesis of every utterance is scored in one engine run (so batches are full);
the weight can be searched on a dev split of the utterances that have references.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from mlmkit.core import checks
from mlmkit.core.results import Result, jsonable
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.scoring.nbest import Utterance
from mlmkit.scoring.text_scores import (
    NO_TOKEN_WARNING,
    check_score_options,
    passes_runtime_to_score,
    score,
)
from mlmkit.scoring.wer import word_error_rate

DEFAULT_WEIGHT_GRID = tuple(np.round(np.linspace(0.0, 2.0, 41), 3))


@dataclass
class RescoreResult(Result):
    """The rescored utterances, the 1-best per utterance, and WERs when references exist."""

    utterances: list[Utterance]
    weight: float
    best: dict[str, str]
    wer_before: float | None = None
    wer_after: float | None = None
    dev_utterances: list[str] = field(default_factory=list)
    tuned_on_dev: dict[float, float] | None = None  # weight -> dev WER

    def to_dict(self) -> dict:
        """The summary (weight, WERs, counts); the rescored lists are `utterances`."""
        return jsonable({"weight": self.weight, "wer_before": self.wer_before,
                         "wer_after": self.wer_after, "n_utterances": len(self.utterances),
                         "dev_utterances": len(self.dev_utterances),
                         "tuned_on_dev": self.tuned_on_dev})


def _lm_term(h, normalize: bool) -> float:
    if h.pll is None:
        return 0.0
    return h.pll / max(h.n_tokens, 1) if normalize else h.pll


def choose(utterances: list[Utterance], weight: float, normalize: bool) -> dict[str, str]:
    """The hypothesis with the best am_score + weight × PLL per utterance (ties: first)."""
    best = {}
    for utt in utterances:
        combined = [h.am_score + weight * _lm_term(h, normalize) for h in utt.hypotheses]
        best[utt.utt_id] = utt.hypotheses[int(np.argmax(combined))].text
    return best


def _wer(utterances: list[Utterance], best: dict[str, str]) -> float:
    return word_error_rate([u.reference for u in utterances], [best[u.utt_id] for u in utterances])


MAX_WEIGHT = 1e6


def check_weight(name: str, value) -> float:
    """A finite LM weight in [-1e6, 1e6] (a NaN would write invalid JSON and pick at random)."""
    checks.finite(name, value)
    if abs(value) > MAX_WEIGHT:
        raise InvalidArgument(f"{name}={value!r} (--{name.replace('_', '-')}) must be between "
                              f"-{MAX_WEIGHT:g} and {MAX_WEIGHT:g}")
    return float(value)


@passes_runtime_to_score
def rescore(
    model,
    utterances: list[Utterance],
    *,
    weight: float = 0.3,
    normalize: bool = False,
    metric: str = "pll",
    tune_weight: bool = False,
    weight_grid: tuple[float, ...] = DEFAULT_WEIGHT_GRID,
    unk: str = "score",
    **runtime,
) -> RescoreResult:
    """Rescore n-best lists (`read_nbest`) with a masked LM's PLL: am_score + weight × PLL.

    With `tune_weight`, the weight minimising WER on a dev split (every other utterance
    with a reference, in id order) is chosen from `weight_grid`; `wer_before` and
    `wer_after` are then reported on the remaining (test) utterances. `normalize` divides
    each PLL by its number of tokens. `unk` and the runtime keywords: as `mlmkit.score`.
    """
    weight = check_weight("weight", weight)
    grid = tuple(weight_grid)
    if tune_weight and not grid:
        raise InvalidArgument("weight_grid is empty: give the weights to try with tune_weight")
    grid = tuple(check_weight("weight_grid", w) for w in grid)
    check_score_options(metric, unk, 1, runtime.get("batch_tokens"))
    if not isinstance(utterances, (list, tuple)) or not utterances:
        raise InvalidData("no utterances to rescore: read an n-best file with read_nbest()")
    for utt in utterances:
        if not isinstance(utt, Utterance):
            raise InvalidArgument(f"utterances holds a {type(utt).__name__}: pass the "
                                  "Utterance list read_nbest() returns")
        for h in utt.hypotheses:
            if not np.isfinite(h.am_score):
                raise InvalidData(f"utterance {utt.utt_id!r}, {h.name}: am_score {h.am_score!r} "
                                  "is not a finite number")
    hyps = [h for u in utterances for h in u.hypotheses]
    live = [h for h in hyps if h.text.strip()]
    empty = [(u.utt_id, h.name) for u in utterances for h in u.hypotheses if not h.text.strip()]
    if empty:
        warnings.warn(f"{len(empty)} empty hypothesis(es) (first: utterance {empty[0][0]!r}, "
                      f"{empty[0][1]}) have no PLL: their LM term is 0 (combined = am_score)",
                      stacklevel=2)
    with warnings.catch_warnings():
        # said below by utterance, not by an index into `live` (other warnings pass)
        warnings.filterwarnings("ignore", message=NO_TOKEN_WARNING)
        results = score(model, [h.text for h in live], metric=metric, unk=unk, **runtime)
    for h, r in zip(live, results, strict=True):
        h.pll, h.n_tokens = r.pll, r.n_tokens
    unscored = [(u.utt_id, h.name) for u in utterances for h in u.hypotheses
                if h.text.strip() and h.pll is None]
    if unscored:
        warnings.warn(f"{len(unscored)} hypothesis(es) with no token to score (first: "
                      f"utterance {unscored[0][0]!r}, {unscored[0][1]}; only special tokens"
                      + (", or [UNK]s skipped with unk='skip'" if unk == "skip" else "")
                      + ") have no PLL: their LM term is 0 (combined = am_score)", stacklevel=2)
    referenced = sorted((u for u in utterances if u.reference is not None),
                        key=lambda u: u.utt_id)
    evaluated, dev, tuned = referenced, [], None
    if tune_weight:
        if len(referenced) < 2:
            raise InvalidData("--tune-weight needs references for at least 2 utterances "
                              "(a dev and a test split)")
        dev, evaluated = referenced[0::2], referenced[1::2]
        tuned = {float(w): _wer(dev, choose(dev, float(w), normalize)) for w in grid}
        weight = min(tuned, key=lambda w: (tuned[w], w))
    for h in hyps:
        h.combined = h.am_score + weight * _lm_term(h, normalize)
    best = choose(utterances, weight, normalize)
    result = RescoreResult(utterances, float(weight), best,
                           dev_utterances=[u.utt_id for u in dev], tuned_on_dev=tuned)
    if evaluated:
        result.wer_before = _wer(evaluated, choose(evaluated, 0.0, normalize))
        result.wer_after = _wer(evaluated, {u.utt_id: best[u.utt_id] for u in evaluated})
    return result
