"""`fill_mask`: the k likeliest tokens at each mask of a text, independently or jointly.

Independent mode is one encoder pass per batch with the MLM head applied only at the mask
positions; it matches transformers' FillMaskPipeline. Joint mode fills the masks one at a
time, the most confident first, each step seeing the tokens already filled: one encoder
pass per step, batched across texts. Batching (token budget, length buckets, precision,
progress) is `mlmkit.engine.batching.run_jobs`. `[MASK]` and `<mask>` are both accepted
whatever the model's own spelling.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mlmkit.core import checks
from mlmkit.core.records import display_name, read_texts
from mlmkit.core.results import Result
from mlmkit.engine.batching import check_budget, run_jobs
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.generation.setup import check_texts
from mlmkit.models import MASK_SPELLINGS, masked_log_probs
from mlmkit.models.load import prepare_mlm

MODES = ("independent", "joint")


@dataclass
class Candidate(Result):
    """A token proposed for a mask, with its probability under the model."""

    token: str
    """The token decoded on its own, as FillMaskPipeline's `token_str` (a WordPiece
    continuation keeps its `##`)."""
    token_id: int
    score: float
    """Probability (softmax over the vocabulary at this mask)."""
    sequence: str
    """The text as written with this mask replaced by this token's text (the other masks
    left as written), as FillMaskPipeline's `sequence`."""


@dataclass
class MaskFill(Result):
    """The candidates at one mask, best first."""

    index: int
    """Which mask of the text, 0 = leftmost."""
    position: int
    """The mask's token position in the model input (special tokens included)."""
    step: int
    """Joint mode: when this mask was filled (0 = first, the most confident); else 0."""
    candidates: list[Candidate]


@dataclass
class FillResult(Result):
    """Fill-mask predictions for one text."""

    text: str
    mode: str
    masks: list[MaskFill]
    filled: str
    """The text as written with each mask replaced by its best token's text (a WordPiece
    continuation without its `##`), so the fills never merge into the words around them."""
    log_prob: float
    """Sum of the chosen tokens' log-probabilities (float64). Joint mode: the log-probability
    of the filled tokens in the order they were filled; independent: of each alone."""


def mask_pattern(tokenizer) -> re.Pattern:
    """A regex matching every accepted mask spelling, the tokenizer's own included."""
    spellings = dict.fromkeys((*MASK_SPELLINGS, str(tokenizer.mask_token)))
    return re.compile("|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True)))


def accepted_spellings(tokenizer=None) -> str:
    own = [] if tokenizer is None else [str(tokenizer.mask_token)]
    return " or ".join(dict.fromkeys((*MASK_SPELLINGS, *own)))


def read_fill_inputs(path: str | Path, tokenizer=None, encoding: str = "utf-8",
                     errors: str = "strict") -> list[str]:
    """The non-blank texts of an inputs file (`-`: standard input; text, or JSONL/TSV/CSV
    with a `text` field); a line without a mask is an error naming it."""
    pattern = mask_pattern(tokenizer) if tokenizer is not None else re.compile(
        "|".join(re.escape(s) for s in MASK_SPELLINGS))
    texts, blank = [], 0
    for number, text in read_texts(path, encoding=encoding, errors=errors):
        if not text.strip():
            blank += 1
            continue
        if not pattern.search(text):
            raise InvalidData(f"{display_name(path)} line {number} has no mask: write "
                              f"{accepted_spellings(tokenizer)} where a token is to be "
                              "predicted")
        texts.append(text)
    if not texts:
        raise InvalidData(f"inputs file {display_name(path)} is empty: write one input per "
                          "line")
    if blank:
        warnings.warn(f"{blank} blank line(s) of {display_name(path)} skipped: the results "
                      "are one per non-blank line", stacklevel=2)
    return texts


def _encode(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """Token ids with the model's mask spelling; errors for a missing mask or a long text."""
    pattern = mask_pattern(tokenizer)
    which = (lambda i: f"texts[{i}] ({texts[i][:60]!r})") if len(texts) > 1 else (
        lambda i: f"the input {texts[i][:60]!r}")
    rewritten, counts = [], []
    for i, text in enumerate(texts):
        new_text, count = pattern.subn(tokenizer.mask_token, text)
        if count == 0:
            raise InvalidArgument(f"{which(i)} has no mask: write "
                                  f"{accepted_spellings(tokenizer)} where a token is to be "
                                  "predicted")
        rewritten.append(new_text)
        counts.append(count)
    encoded = tokenizer(rewritten, add_special_tokens=True, verbose=False)["input_ids"]
    mask_id = tokenizer.mask_token_id
    for i, ids in enumerate(encoded):
        if len(ids) > max_length:
            raise InvalidArgument(f"{which(i)} is {len(ids)} tokens long; the model takes at "
                                  f"most {max_length}: shorten it (nothing is truncated "
                                  "silently)")
        if sum(token == mask_id for token in ids) != counts[i]:
            raise InvalidArgument(f"{which(i)}: the tokenizer did not keep its {counts[i]} "
                                  f"mask(s) as {tokenizer.mask_token!r} tokens; write the mask "
                                  "as a separate word")
    return encoded


def target_ids(tokenizer, targets) -> list[int] | None:
    """The token ids of `targets` (words the candidates are restricted to), as
    FillMaskPipeline finds them: a token of the vocabulary as written, else the word's one
    token (a RoBERTa `cat` is its `Ġcat`). A word of several tokens is refused rather than
    cut to its first (the pipeline's silent choice)."""
    if targets is None:
        return None
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets)
    if not targets or not all(isinstance(t, str) and t.strip() for t in targets):
        raise InvalidArgument("targets must be a non-empty list of words (e.g. "
                              "['cat', 'dog']), or None for the whole vocabulary")
    vocabulary = tokenizer.get_vocab()
    if len(targets) > len(vocabulary):
        raise InvalidArgument(f"{len(targets):,} targets for a vocabulary of "
                              f"{len(vocabulary):,}: give at most one per token")
    ids = []
    for target in targets:
        if target in vocabulary:
            ids.append(vocabulary[target])
            continue
        pieces = tokenizer(target, add_special_tokens=False, verbose=False)["input_ids"]
        if len(pieces) != 1:
            shown = tokenizer.convert_ids_to_tokens(pieces)
            raise InvalidArgument(f"target {target!r} is {len(pieces)} tokens {shown}, not one "
                                  "token of the model's vocabulary: give whole tokens "
                                  "(a mask predicts one token)")
        ids.append(pieces[0])
    return list(dict.fromkeys(ids))


def _log_probs(model, input_ids, attention_mask, positions):
    """The primitive (looked up at call time, so a test can watch it)."""
    return masked_log_probs(model, input_ids, attention_mask, positions)


def _top(log_probs, top_k, targets):
    """The top_k (log-probs, token ids) of each row, among `targets` when given."""
    if targets is None:
        return log_probs.topk(top_k, dim=-1)
    top_lp, columns = log_probs[:, targets].topk(top_k, dim=-1)
    return top_lp, targets[columns]


def _independent(batch, log_probs, top_k, mask_id, targets=None):
    """Per row: (candidate ids [m, k], log-probs [m, k], steps [m]) at its m masks, from the
    one pass `run_jobs` made at the mask positions."""
    top_lp, top_ids = _top(log_probs, top_k, targets)
    counts = torch.bincount(batch.row_of_position, minlength=batch.rows).tolist()
    return [(i.cpu(), lp.cpu(), torch.zeros(len(i), dtype=torch.long))
            for i, lp in zip(top_ids.split(counts), top_lp.split(counts), strict=True)]


def _joint(batch, _, top_k, mask_id, targets=None):
    """Fill the most confident remaining mask of each row per step, conditioned on the rest;
    per row: (candidate ids [m, k], log-probs [m, k], the step each mask was filled)."""
    ids = batch.input_ids.clone()
    remaining = (ids == mask_id) & batch.attention_mask.bool()
    masked = remaining.clone()
    cand_ids = torch.zeros((*ids.shape, top_k), dtype=torch.long, device=ids.device)
    cand_lp = torch.zeros((*ids.shape, top_k), dtype=torch.float32, device=ids.device)
    step_of = torch.zeros_like(ids)
    step = 0
    while bool(remaining.any()):
        rows = remaining.any(dim=1).nonzero().squeeze(1)
        sub_remaining = remaining[rows]
        log_probs = _log_probs(batch.model, ids[rows], batch.attention_mask[rows],
                               sub_remaining)
        best = (log_probs if targets is None else log_probs[:, targets]).max(dim=-1).values
        confidence = torch.full(sub_remaining.shape, -math.inf, device=ids.device)
        confidence[sub_remaining] = best
        cols = confidence.argmax(dim=1)
        row_of_position = torch.full(sub_remaining.shape, -1, dtype=torch.long, device=ids.device)
        row_of_position[sub_remaining] = torch.arange(len(log_probs), device=ids.device)
        picked = log_probs[row_of_position[torch.arange(len(rows), device=ids.device), cols]]
        top_lp, top_ids = _top(picked, top_k, targets)
        cand_ids[rows, cols], cand_lp[rows, cols] = top_ids, top_lp
        ids[rows, cols] = top_ids[:, 0]
        remaining[rows, cols] = False
        step_of[rows, cols] = step
        step += 1
    return [(cand_ids[r][masked[r]].cpu(), cand_lp[r][masked[r]].cpu(),
             step_of[r][masked[r]].cpu()) for r in range(ids.shape[0])]


def surface(tokenizer, token_id: int) -> str:
    """A token's text on its own, without spaces around it or a WordPiece `##` marker."""
    text = tokenizer.decode([token_id]).strip()
    return text[2:] if text.startswith("##") and len(text) > 2 else text


def fill_mask(
    model,
    texts: str | Sequence[str],
    *,
    top_k: int = 5,
    mode: str = "independent",
    targets: Sequence[str] | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
    tokenizer=None,
    batch_size: int | None = None,
) -> FillResult | list[FillResult]:
    """The `top_k` likeliest tokens at each mask of each text, best first.

    `model` is an `MLM`, a name or path, or a (model, tokenizer) pair (or a model with
    `tokenizer=`). `mode="independent"` predicts every mask from the input as given (as
    FillMaskPipeline); `mode="joint"` fills masks one at a time, most confident first,
    each conditioned on the masks already filled (its candidates are the distribution at
    the step the mask was filled). `targets` (words, as FillMaskPipeline's) restricts the
    candidates to those tokens, scored by their probability over the whole vocabulary
    (`top_k` is then at most their number). Each candidate carries its `sequence`, the
    text with that token at its mask. One text gives a `FillResult`, a list a list.
    `batch_tokens`: padded tokens per batch (default: sized for the model); `progress`: a
    bar on stderr (None: when stderr is a terminal). `batch_size` is deprecated (ignored
    in favour of the token budget, with a warning).
    """
    checks.choice("mode", mode, MODES)
    budget = check_budget(batch_tokens)
    if batch_size is not None:
        checks.count("batch_size", batch_size, 1)
        warnings.warn("fill_mask(batch_size=...) is deprecated and has no effect: batches are "
                      "cut by batch_tokens (padded tokens per batch)", DeprecationWarning,
                      stacklevel=2)
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    if not all(isinstance(text, str) for text in texts):
        raise InvalidArgument("fill_mask takes a text or a list of texts (str)")
    check_texts(texts, "text")
    if tokenizer is not None and not isinstance(model, tuple):
        model = (model, tokenizer)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    tok, net = mlm.tokenizer, mlm.model
    vocab = net.get_output_embeddings().weight.shape[0] if net.get_output_embeddings() is not None \
        else net.config.vocab_size
    top_k = checks.count("top_k", top_k, 1, vocab)
    wanted = target_ids(tok, targets)
    if wanted is not None:
        top_k = min(top_k, len(wanted))
        wanted = torch.tensor(wanted, dtype=torch.long, device=mlm.device)
    if not texts:
        return []
    encoded = _encode(tok, texts, mlm.max_length)
    mask_id = tok.mask_token_id
    jobs = [(ids, [c for c, t in enumerate(ids) if t == mask_id]) for ids in encoded]
    run = _independent if mode == "independent" else _joint
    per_row = run_jobs(mlm, jobs, lambda batch, out: run(batch, out, top_k, mask_id, wanted),
                       batch_tokens=budget, precision=precision, progress=progress,
                       description="fill-mask", unit="texts",
                       call=_log_probs if mode == "independent" else None)
    results = [_result(tok, texts[i], mode, jobs[i][1], *per_row[i])
               for i in range(len(texts))]
    return results[0] if single else results


def _result(tok, text, mode, positions, ids_k, lp_k, steps):
    ids_k, lp_k = ids_k.tolist(), lp_k.double()
    scores = lp_k.exp().tolist()
    unique = sorted({t for row in ids_k for t in row})
    names = dict(zip(unique, tok.batch_decode([[t] for t in unique]), strict=True))
    pattern = mask_pattern(tok)
    pieces, spellings = pattern.split(text), pattern.findall(text)
    surfaces = {t: surface(tok, t) for t in unique}

    def sequence(n: int, token_id: int) -> str:
        """The text with mask n replaced by the token's text, the others as written."""
        parts = [pieces[0]]
        for m, spelling in enumerate(spellings):
            parts += [surfaces[token_id] if m == n else spelling, pieces[m + 1]]
        return "".join(parts)

    masks = [
        MaskFill(index=n, position=p, step=int(steps[n]),
                 candidates=[Candidate(names[t], t, s, sequence(n, t))
                             for t, s in zip(ids_k[n], scores[n], strict=True)])
        for n, p in enumerate(positions)
    ]
    words = iter([surfaces[row[0]] for row in ids_k])
    filled = pattern.sub(lambda _: next(words), text)
    return FillResult(text=text, mode=mode, masks=masks, filled=filled,
                      log_prob=float(lp_k[:, 0].sum()) if len(ids_k) else 0.0)
