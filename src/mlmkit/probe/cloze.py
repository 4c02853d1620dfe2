"""PET-style zero-shot classification: a cloze prompt per text, labels said by words.

Each text goes into the template; the masked prompt runs through the encoder once and
the MLM head only at the mask, giving log P(word | prompt) for every single-token
verbalizer word at once. A word that is several tokens (or changes the tokenization
around the gap) is scored in its filled-in statement by the PLL engine, with one mask
per subword filled left to right. A label's score aggregates its words' log-probs.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from mlmkit.core.checks import choice
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.models.load import prepare_mlm
from mlmkit.probe.answers import locate_answers
from mlmkit.probe.gather import score_single_tokens
from mlmkit.probe.outcomes import ClozePrediction, ClozeResult
from mlmkit.probe.prompt import check_template, substitute
from mlmkit.probe.spans import score_spans
from mlmkit.probe.verbalizer import DEFAULT_VERBALIZER, parse_verbalizer

AGGREGATES = ("logsumexp", "mean", "max")
PLACEHOLDER = "{text}"


def aggregate_words(word_scores: np.ndarray, groups: list[np.ndarray], how: str) -> np.ndarray:
    """[N, W] word log-probs -> [N, L] label scores, one column group per label."""
    choice("aggregate", how, AGGREGATES)
    scores = torch.from_numpy(word_scores)
    columns = []
    for group in groups:
        part = scores[:, torch.from_numpy(group)]
        if how == "logsumexp":
            columns.append(torch.logsumexp(part, dim=1))
        elif how == "mean":
            columns.append(part.mean(dim=1))
        else:
            columns.append(part.max(dim=1).values)
    return torch.stack(columns, dim=1).numpy()


def cloze_classify(
    model,
    texts: list[str],
    template: str = "{text} It was [MASK].",
    verbalizer=None,
    *,
    gold: list[str] | None = None,
    aggregate: str = "logsumexp",
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> ClozeResult:
    """Classify `texts` zero-shot with a cloze `template` and a `verbalizer`.

    `template` holds `{text}` and one `[MASK]` (or `<mask>`); `verbalizer` maps each label
    to its words (default: positive great/good, negative terrible/bad). A label's score is
    the `aggregate` ("logsumexp", "mean" or "max") of its words' log-probabilities;
    probabilities are the softmax of the label scores. `gold` labels give `accuracy`.
    A verbalizer word the tokenizer can only spell with its unknown token ([UNK]) is an
    error: the label would be scored on a token that is not the word.
    `batch_tokens`, `precision`, `device`, `threads`, `progress`: see `mlmkit.probe`.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise InvalidArgument("cloze_classify needs at least one text")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InvalidData(f"text {i} is empty or not a string: {text!r}")
    choice("aggregate", aggregate, AGGREGATES)
    words_of = parse_verbalizer(DEFAULT_VERBALIZER if verbalizer is None else verbalizer)
    labels = list(words_of)
    if gold is not None:
        if len(gold) != len(texts):
            raise InvalidArgument(f"gold has {len(gold)} labels for {len(texts)} texts")
        unknown = sorted({str(g) for g in gold} - set(labels))
        if unknown:
            raise InvalidData(f"gold label(s) {unknown} are not in the verbalizer's {labels}: "
                              "give a verbalizer (--verbalizer) with words for each gold "
                              "label, e.g. '{\"1\": [\"great\"], \"0\": [\"terrible\"]}'")
    base = check_template(template, PLACEHOLDER, "template")
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    clozes = [substitute(base, PLACEHOLDER, text) for text in texts]
    names = [f"text {i}" for i in range(len(texts))]
    words = [w for label in labels for w in words_of[label]]
    groups, start = [], 0
    for label in labels:
        groups.append(np.arange(start, start + len(words_of[label])))
        start += len(words_of[label])
    n, w = len(texts), len(words)
    pair_prompt = np.repeat(np.arange(n), w)
    answers = locate_answers(mlm.tokenizer, clozes, pair_prompt, words * n,
                             [f"{names[p]}, word {words[q % w]!r}"
                              for q, p in enumerate(pair_prompt)])
    if answers.unknown.any():
        q = int(np.nonzero(answers.unknown)[0][0])
        raise InvalidArgument(f"verbalizer word {words[q % w]!r}: the tokenizer of {mlm.name!r} "
                              f"spells it with its unknown token {mlm.tokenizer.unk_token!r}; "
                              "choose words its vocabulary has")
    windowed = sorted({int(pair_prompt[q]) for q, ids in enumerate(answers.filled_ids)
                       if len(ids) > mlm.max_length})
    if windowed:
        warnings.warn(f"{len(windowed)} text(s) make a prompt longer than the model's "
                      f"{mlm.max_length} tokens (first: text {windowed[0]}): their words are "
                      "scored in sliding windows, so the model does not see all of the text",
                      stacklevel=2)
    flat = score_single_tokens(mlm, answers, batch_tokens=batch_tokens, precision=precision,
                               progress=progress)
    multi = np.nonzero(np.isnan(flat))[0]  # several tokens, or a prompt past max length
    if len(multi):
        flat[multi] = score_spans(mlm, [answers.filled_ids[q] for q in multi],
                                  [answers.span[q] for q in multi],
                                  batch_tokens=batch_tokens, precision=precision,
                                  progress=progress)
    word_scores = flat.reshape(n, w)
    single = answers.single.reshape(n, w)
    label_scores = aggregate_words(word_scores, groups, aggregate)
    probabilities = torch.softmax(torch.from_numpy(label_scores), dim=1).numpy()
    best = label_scores.argmax(axis=1)
    predictions = [
        ClozePrediction(
            text=texts[i], label=labels[int(best[i])],
            scores={label: float(label_scores[i, k]) for k, label in enumerate(labels)},
            probabilities={label: float(probabilities[i, k]) for k, label in enumerate(labels)},
            word_scores={word: float(word_scores[i, j]) for j, word in enumerate(words)},
            gold=None if gold is None else str(gold[i]),
        )
        for i in range(n)
    ]
    accuracy = None
    if gold is not None:
        accuracy = float(np.mean([p.label == p.gold for p in predictions]))
    multi_words = [words[j] for j in np.nonzero((~single).any(axis=0))[0]]
    return ClozeResult(predictions=predictions, labels=labels, template=template,
                       aggregate=aggregate, accuracy=accuracy, multi_token_words=multi_words,
                       windowed_texts=windowed)
