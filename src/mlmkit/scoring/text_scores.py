"""`mlmkit.score`: texts in, sentence PLLs (and token / word scores) out, via the engine."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from mlmkit.core import checks
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument, ModelError
from mlmkit.models import prepare_mlm
from mlmkit.scoring.jobs import METRICS
from mlmkit.scoring.masked_copies import UNK_MODES, score_token_ids, unscored_ids
from mlmkit.scoring.scores import TextScore, TokenScore, WordScore
from mlmkit.scoring.texts import EncodedText, encode_texts, span_targets


def _words(text: str, encoded: EncodedText, positions: list[int], values: np.ndarray):
    """Group scored tokens into words (a word's score is the sum of its subwords')."""
    groups: dict[int, list[int]] = {}
    for k, t in enumerate(positions):
        word = encoded.word_ids[t] if encoded.word_ids is not None else None
        groups.setdefault(t if word is None else word, []).append(k)
    out = []
    for members in groups.values():
        cols = [positions[k] for k in members]
        start = min(encoded.offsets[t][0] for t in cols) if encoded.offsets else -1
        end = max(encoded.offsets[t][1] for t in cols) if encoded.offsets else -1
        out.append(WordScore(word=text[start:end] if start >= 0 else "", start=start, end=end,
                             logprob=float(np.sum(values[members], dtype=np.float64)),
                             n_tokens=len(members)))
    return out


def _tokens(tokenizer, encoded: EncodedText, positions: list[int], values: np.ndarray):
    pieces = tokenizer.convert_ids_to_tokens([encoded.ids[t] for t in positions])
    out = []
    for k, t in enumerate(positions):
        start, end = encoded.offsets[t] if encoded.offsets else (-1, -1)
        word = encoded.word_ids[t] if encoded.word_ids is not None else None
        out.append(TokenScore(token=pieces[k], token_id=int(encoded.ids[t]), start=int(start),
                              end=int(end), logprob=float(values[k]), word=word))
    return out


REDUCTIONS = ("sum", "mean")


def check_score_options(metric: str, unk: str, stride, batch_tokens,
                        reduction: str = "sum") -> None:
    """The checks every scoring entry point runs before any work (InvalidArgument)."""
    checks.choice("metric", metric, METRICS)
    checks.choice("reduction", reduction, REDUCTIONS)
    checks.choice("unk", unk, UNK_MODES)
    checks.count("stride", stride, 1)
    check_budget(batch_tokens)


NO_TOKEN_WARNING = r"texts\[\d+\]: "
"""The start of `score`'s warning about a text with no token to score (callers that score
texts of their own say it in their terms, and filter this one)."""


def scored_positions(tokenizer, encoded, unk: str, spans=None) -> tuple[list, list]:
    """(candidates, targets) per encoded text: the positions `score` reads (non-special
    tokens, inside the text's span when `spans` gives one), [UNK]s included in the
    candidates (they are counted), left out of the targets under unk="skip"."""
    unk_id = tokenizer.unk_token_id
    never = set(unscored_ids(tokenizer, unk).tolist()) - {unk_id}
    candidates = [span_targets(e, never, spans[i] if spans else None)
                  for i, e in enumerate(encoded)]
    if unk == "score":
        return candidates, candidates
    return candidates, [[t for t in c if e.ids[t] != unk_id]
                        for e, c in zip(encoded, candidates, strict=True)]


def _check_spans(spans, texts) -> None:
    if spans is None:
        return
    if len(spans) != len(texts):
        raise InvalidArgument(f"spans has {len(spans)} entries for {len(texts)} texts: give one "
                              "(start, end) or None per text")
    for i, span in enumerate(spans):
        if span is None:
            continue
        ok = (isinstance(span, (tuple, list)) and len(span) == 2
              and all(isinstance(x, int) and not isinstance(x, bool) for x in span))
        if not ok or not 0 <= span[0] <= span[1]:
            raise InvalidArgument(f"spans[{i}]={span!r} must be a (start, end) pair of character "
                                  "offsets with 0 ≤ start ≤ end, or None")
        if span[1] > len(texts[i]):
            raise InvalidArgument(f"spans[{i}]={span!r} ends past the end of texts[{i}] "
                                  f"({len(texts[i])} characters): give an end of at most "
                                  f"{len(texts[i])}")


def score(
    model,
    texts: str | list[str],
    *,
    metric: str = "pll",
    per_token: bool = False,
    per_word: bool = False,
    spans: list[tuple[int, int] | None] | None = None,
    unk: str = "score",
    stride: int = 1,
    reduction: str = "sum",
    batch_tokens: int | None = None,
    precision: str = "auto",
    device: str | None = None,
    threads: int | None = None,
    progress: bool | None = None,
) -> list[TextScore] | TextScore:
    """Pseudo-log-likelihood of each text under a masked LM, one `TextScore` per text.

    `model`: an `MLM`, a name or path, or a (model, tokenizer) pair. `metric`: "pll"
    (Salazar et al. 2020) or "pll_word_l2r" (Kauf & Ivanova 2023). `spans`: per text a
    character range (start, end) to score, the rest being context (conditional scoring),
    or None for the whole text. `unk`: "score" masks and scores [UNK] tokens like any other
    (as minicons and Salazar et al.; `n_unk` counts them), "skip" leaves them out of the
    PLL (mlmkit ≤ 0.1). `reduction`: each result's `score` is the sum of its tokens'
    log-probabilities ("sum", the PLL) or their mean ("mean", per scored token), as
    minicons' `reduction`; `pll` is the sum either way. Texts longer than the model's maximum length are scored with
    sliding windows (`stride`); empty or whitespace-only texts, and texts with no token to
    score (a span holding no whole token; only [UNK] tokens with unk="skip"), get
    `pll=None` and a warning. `batch_tokens`, `precision` (auto = fp32), `device`, `threads`, `progress`:
    the runtime options of every entry point (docs/API.md). A single string in gives a
    single result out, e.g. `mlmkit.score("./tiny-bert", "Return the items.").pll`.
    """
    single = isinstance(texts, str)
    if not single and (isinstance(texts, (bytes, bytearray, Mapping, set, frozenset))
                       or hasattr(texts, "columns") or not isinstance(texts, Iterable)):
        # any iterable of strings, as fill_mask, generate and infill take; not a mapping or
        # a table (its keys or column names would be scored), nor a set (no order)
        column = " (one of its columns, e.g. df['text'])" if hasattr(texts, "columns") else ""
        raise InvalidArgument(f"texts is a {type(texts).__name__}: pass a string or a list of "
                              f"strings{column}")
    texts = [texts] if single else list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidArgument(f"texts[{i}] is a {type(text).__name__}, not a string")
    check_score_options(metric, unk, stride, batch_tokens, reduction)
    _check_spans(spans, texts)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    tokenizer = mlm.tokenizer
    unk_id = tokenizer.unk_token_id
    live = [i for i, text in enumerate(texts) if text.strip()]
    for i in sorted(set(range(len(texts))) - set(live)):
        warnings.warn(f"text {i} is empty or whitespace only: its score is None",
                      stacklevel=2)
    encoded = encode_texts(tokenizer, [texts[i] for i in live])
    if (metric == "pll_word_l2r" or per_word) and any(e.word_ids is None for e in encoded):
        raise ModelError(f"metric {metric!r} / per-word scores need a fast tokenizer "
                         "(word ids); load the model with its tokenizer.json")
    candidates, targets = scored_positions(tokenizer, encoded, unk,
                                           [spans[i] for i in live] if spans else None)
    n_unk = [sum(1 for t in c if e.ids[t] == unk_id) if unk_id is not None else 0
             for e, c in zip(encoded, candidates, strict=True)]
    values = score_token_ids(
        mlm, [e.ids for e in encoded], targets, metric=metric,
        word_ids=[e.word_ids for e in encoded] if metric == "pll_word_l2r" else None,
        batch_tokens=batch_tokens, precision=precision, progress=progress, stride=stride,
        unk=unk,
    )
    results: list[TextScore] = [
        TextScore(text=t, pll=None, n_tokens=0, n_words=0, metric=metric, reduction=reduction)
        for t in texts
    ]
    for i, e, positions, v, unknown in zip(live, encoded, targets, values, n_unk, strict=True):
        if not positions:  # a PLL of 0.0 would rank first among real scores (log p ≤ 0)
            why = (f"spans[{i}]={tuple(spans[i])!r} holds no whole token (widen it to the edges "
                   "of a token)" if spans
                   and spans[i] is not None else f"it has no token to score (unk={unk!r})")
            warnings.warn(f"texts[{i}]: {why}: its score is None", stacklevel=2)
            results[i].n_unk = unknown  # the skipped [UNK]s are still counted
            continue
        word_of = e.word_ids or []
        n_words = len({word_of[t] for t in positions}) if e.word_ids is not None else len(positions)
        results[i] = TextScore(
            text=texts[i], pll=float(np.sum(v, dtype=np.float64)), n_tokens=len(positions),
            n_words=n_words, metric=metric,
            tokens=_tokens(tokenizer, e, positions, v) if per_token else None,
            words=_words(texts[i], e, positions, v) if per_word else None,
            n_unk=unknown, reduction=reduction,
        )
    return results[0] if single else results


SCORE_RUNTIME = ("batch_tokens", "precision", "device", "threads", "progress")
"""The runtime keywords of `score` that a function scoring through it passes on unchanged."""


def passes_runtime_to_score(function):
    """For a function that scores its texts through `score` and takes `**runtime` to pass
    on: its signature shows score's runtime keywords (keyword-only, score's defaults) in
    place of `**runtime`, and any other keyword is refused as Python refuses one.

    `rescore` and `evaluate_pairs` run `score` once over their texts; declaring the runtime
    keywords once here keeps their contract equal to score's."""
    own = [p for p in inspect.signature(function).parameters.values()
           if p.kind is not inspect.Parameter.VAR_KEYWORD]
    of_score = inspect.signature(score).parameters
    runtime = [of_score[name] for name in SCORE_RUNTIME]
    names = {p.name for p in own} | set(SCORE_RUNTIME)

    @functools.wraps(function)
    def passing(*args, **keywords):
        unknown = [name for name in keywords if name not in names]
        if unknown:
            raise TypeError(f"{function.__name__}() got an unexpected keyword argument "
                            f"{unknown[0]!r}")
        return function(*args, **keywords)

    passing.__signature__ = inspect.signature(function).replace(parameters=[*own, *runtime])
    return passing
