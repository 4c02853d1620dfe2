"""What the playground shows beyond the library's results, computed through its public parts.

- `token_alternatives`: for each token `mlmkit.score` scores, the k likeliest tokens at that
  position when it is masked (the same masked copies PLL reads; the scores themselves always
  come from `mlmkit.score`). One `run_jobs` call through the shared batching layer.
- `StepStream`: an `on_step` hook of `generate` / `infill` that turns each `StepEvent` into a
  JSON-ready step (tokens, masks, what was revealed) with the probability the step's own
  predictions gave each revealed token (`StepEvent.probability`: the confidence the view
  colours by, at no extra model call). It also stops the loop when the client has gone
  (`cancelled`).
- `word_differences`: the words every compared model scored at the same characters, with
  each model's log-probability.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from mlmkit.engine.batching import run_jobs
from mlmkit.errors import InvalidArgument
from mlmkit.generation.trace import step_row
from mlmkit.scoring.jobs import build_jobs
from mlmkit.scoring.masked_copies import _MaskedCopies, unscored_ids
from mlmkit.scoring.text_scores import scored_positions
from mlmkit.scoring.texts import encode_texts


def token_alternatives(mlm, texts: list[str], k: int, unk: str = "score", *,
                       metric: str = "pll", stride: int = 1, spans=None, batch_tokens=None,
                       precision="auto") -> list[list[list[dict]]]:
    """Per text, per scored token (in `TextScore.tokens` order): [{token, token_id, prob}].

    The masked copies are the scoring engine's own (`build_jobs`: the same targets, the
    same sliding window of a text longer than the model takes, at the same `stride`, only in
    each text's span when `spans` are given, and
    with `metric="pll_word_l2r"` the later subwords of the word masked too), so each list
    is the distribution the token's score was read from."""

    tokenizer = mlm.tokenizer
    special = unscored_ids(tokenizer, unk)
    encoded, sequences, targets = _scored(tokenizer, texts, unk, spans)
    jobs = build_jobs(sequences, targets, special, int(mlm.max_length), metric,
                      [e.word_ids for e in encoded] if metric == "pll_word_l2r" else None,
                      stride)
    out: list[list[list[dict]]] = [[] for _ in texts]
    if not len(jobs):
        return out
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    copies = _MaskedCopies(sequences, jobs, pad, tokenizer.mask_token_id)

    def reduce(batch, log_probs):
        top = torch.topk(log_probs.float(), k, dim=-1)
        return [(ids, lp) for ids, lp in zip(top.indices.tolist(), top.values.exp().tolist(),
                                             strict=True)]

    found = run_jobs(mlm, copies, reduce, batch_tokens=batch_tokens, precision=precision,
                     progress=False, description="alternatives")
    names = {}
    for ids, _ in found:
        for t in ids:
            if t not in names:
                names[t] = tokenizer.convert_ids_to_tokens(t)
    for i, (ids, probs) in zip(jobs.seq.tolist(), found, strict=True):
        out[i].append([{"token": names[t], "token_id": t, "prob": p}
                       for t, p in zip(ids, probs, strict=True)])
    return out


def _scored(tokenizer, texts: list[str], unk: str, spans):
    """Each text's encoding, ids and the positions `mlmkit.score` scores in it."""
    encoded = encode_texts(tokenizer, texts)
    _, targets = scored_positions(tokenizer, encoded, unk, spans)
    return (encoded, [np.asarray(e.ids, dtype=np.int64) for e in encoded],
            [np.asarray(t, dtype=np.int64) for t in targets])


def stride_gap(mlm, texts: list[str], unk: str, stride: int, spans=None):
    """(index, message) of the first text whose scored tokens the engine's windows at
    `stride` leave uncovered, or None: the library's own check (`scoring.jobs.build_jobs`
    refuses a stride past the window), run per text so the server can name the text."""

    limit = int(mlm.max_length)
    if stride == 1 or not texts:
        return None
    special = unscored_ids(mlm.tokenizer, unk)
    _, sequences, targets = _scored(mlm.tokenizer, texts, unk, spans)
    for i, (ids, pos) in enumerate(zip(sequences, targets, strict=True)):
        if len(ids) <= limit:
            continue
        try:
            build_jobs([ids], [pos], special, limit, "pll", None, stride)
        except InvalidArgument as error:
            return i, str(error)
    return None


class Cancelled(Exception):
    """Raised inside the unmasking loop when its client has gone."""


class StepStream:
    """An `on_step` hook: each step as a dict, handed to `emit` (from the model's thread)."""

    def __init__(self, mlm, emit):
        self.mlm, self.emit = mlm, emit
        self.cancelled = threading.Event()

    def __call__(self, event) -> None:
        if self.cancelled.is_set():
            raise Cancelled("the client went away")

        # the fields of the CLI's --trace lines, confidence included
        rows = [{"row": event.first_row + row, **step_row(self.mlm.tokenizer, event, row)}
                for row in range(event.ids.shape[0])]
        self.emit({"step": event.step, "block": event.block, "model_calls": event.model_calls,
                   "seconds": event.seconds, "filled": event.filled, "rows": rows})


def word_differences(names: list[str], results: list[dict]) -> list[dict]:
    """Words that every model scored at the same character span: each model's log-prob, and
    the difference of each model from the first."""
    spans = None
    for result in results:
        here = {(w["start"], w["end"]): w for w in result.get("words") or []}
        spans = here.keys() if spans is None else spans & here.keys()
    out = []
    for start, end in sorted(spans or []):
        values = []
        for result in results:
            word = next(w for w in result["words"] if (w["start"], w["end"]) == (start, end))
            values.append(word["logprob"])
        word = next(w for w in results[0]["words"] if (w["start"], w["end"]) == (start, end))
        out.append({"word": word["word"], "start": start, "end": end,
                    "logprobs": dict(zip(names, values, strict=True)),
                    "difference": {n: None if v is None or values[0] is None else v - values[0]
                                   for n, v in zip(names[1:], values[1:], strict=True)}})
    return out
