"""`mlmkit.score`: texts in, sentence PLLs (and token / word scores) out, via the engine."""

from __future__ import annotations

import warnings

import numpy as np

from mlmkit.errors import MlmkitError
from mlmkit.models import as_mlm
from mlmkit.scoring.engine import score_token_ids
from mlmkit.scoring.results import TextScore, TokenScore, WordScore
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


def score(
    model,
    texts: str | list[str],
    metric: str = "pll",
    *,
    per_token: bool = False,
    per_word: bool = False,
    spans: list[tuple[int, int] | None] | None = None,
    batch_tokens: int | None = None,
    precision: str = "fp32",
    stride: int = 1,
    progress: bool = False,
) -> list[TextScore] | TextScore:
    """Pseudo-log-likelihood of each text under a masked LM, one `TextScore` per text.

    `metric`: "pll" (Salazar et al. 2020) or "pll_word_l2r" (Kauf & Ivanova 2023).
    `spans`: per text a character range (start, end) to score, the rest being context
    (conditional scoring), or None for the whole text. Texts longer than the model's
    maximum length are scored with sliding windows (`stride`); empty or whitespace-only
    texts get `pll=None` and a warning. A single string in gives a single result out.
    """
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    if spans is not None and len(spans) != len(texts):
        raise MlmkitError(f"spans has {len(spans)} entries for {len(texts)} texts")
    mlm = as_mlm(model)
    tokenizer = mlm.tokenizer
    special_ids = set(tokenizer.all_special_ids)
    live = [i for i, text in enumerate(texts) if isinstance(text, str) and text.strip()]
    for i in sorted(set(range(len(texts))) - set(live)):
        if not isinstance(texts[i], str):
            raise MlmkitError(f"text {i} is a {type(texts[i]).__name__}, not a string")
        warnings.warn(f"text {i} is empty or whitespace only: its score is None",
                      stacklevel=2)
    encoded = encode_texts(tokenizer, [texts[i] for i in live])
    if (metric == "pll_word_l2r" or per_word) and any(e.word_ids is None for e in encoded):
        raise MlmkitError(f"metric {metric!r} / per-word scores need a fast tokenizer "
                          "(word ids); load the model with its tokenizer.json")
    targets = [span_targets(e, special_ids, spans[i] if spans else None)
               for i, e in zip(live, encoded, strict=True)]
    values = score_token_ids(
        mlm, [e.ids for e in encoded], targets, metric=metric,
        word_ids=[e.word_ids for e in encoded] if metric == "pll_word_l2r" else None,
        batch_tokens=batch_tokens, precision=precision, progress=progress, stride=stride,
    )
    results: list[TextScore] = [
        TextScore(text=t if isinstance(t, str) else "", pll=None, n_tokens=0, n_words=0,
                  metric=metric) for t in texts
    ]
    for i, e, positions, v in zip(live, encoded, targets, values, strict=True):
        word_of = e.word_ids or []
        n_words = len({word_of[t] for t in positions}) if e.word_ids is not None else len(positions)
        results[i] = TextScore(
            text=texts[i], pll=float(np.sum(v, dtype=np.float64)), n_tokens=len(positions),
            n_words=n_words, metric=metric,
            tokens=_tokens(tokenizer, e, positions, v) if per_token else None,
            words=_words(texts[i], e, positions, v) if per_word else None,
        )
    return results[0] if single else results
