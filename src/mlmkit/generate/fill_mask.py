"""`fill_mask`: the k likeliest tokens at each mask of a text, independently or jointly.

Independent mode is one encoder pass per batch with the MLM head applied only at the mask
positions (`mlmkit.models.masked_log_probs`); it matches transformers' FillMaskPipeline.
Joint mode fills the masks one at a time, the most confident first, each step seeing the
tokens already filled: one encoder pass per step, batched across texts. `[MASK]` and
`<mask>` are both accepted whatever the model's own spelling.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mlmkit.errors import MlmkitError
from mlmkit.models import MASK_SPELLINGS, as_mlm, masked_log_probs

MODES = ("independent", "joint")


@dataclass
class Candidate:
    """A token proposed for a mask, with its probability under the model."""

    token: str
    """The token decoded on its own, as FillMaskPipeline's `token_str`."""
    token_id: int
    score: float
    """Probability (softmax over the vocabulary at this mask)."""


@dataclass
class MaskFill:
    """The candidates at one mask, best first."""

    index: int
    """Which mask of the text, 0 = leftmost."""
    position: int
    """The mask's token position in the model input (special tokens included)."""
    step: int
    """Joint mode: when this mask was filled (0 = first, the most confident); else 0."""
    candidates: list[Candidate]


@dataclass
class FillResult:
    """Fill-mask predictions for one text."""

    text: str
    mode: str
    masks: list[MaskFill]
    filled: str
    """The text with every mask replaced by its best candidate (decoded by the tokenizer)."""
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


def read_fill_inputs(path: str | Path, tokenizer=None) -> list[str]:
    """The non-blank lines of an inputs file; a line without a mask is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise MlmkitError(f"inputs file {str(path)!r} does not exist: give a text file with "
                          f"one input per line, each with {accepted_spellings(tokenizer)}")
    pattern = mask_pattern(tokenizer) if tokenizer is not None else re.compile(
        "|".join(re.escape(s) for s in MASK_SPELLINGS))
    texts = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                raise MlmkitError(f"{str(path)!r} line {number} is not valid UTF-8 "
                                  f"({error.reason}): save the file as UTF-8") from error
            if number == 1:
                text = text.removeprefix("\ufeff")  # a byte-order mark is not text
            if not text.strip():
                continue
            if not pattern.search(text):
                raise MlmkitError(f"{str(path)!r} line {number} has no mask: write "
                                  f"{accepted_spellings(tokenizer)} where a token is to be "
                                  f"predicted")
            texts.append(text)
    if not texts:
        raise MlmkitError(f"inputs file {str(path)!r} is empty: write one input per line")
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
            raise MlmkitError(f"{which(i)} has no mask: write {accepted_spellings(tokenizer)} "
                              f"where a token is to be predicted")
        rewritten.append(new_text)
        counts.append(count)
    encoded = tokenizer(rewritten, add_special_tokens=True)["input_ids"]
    mask_id = tokenizer.mask_token_id
    for i, ids in enumerate(encoded):
        if len(ids) > max_length:
            raise MlmkitError(f"{which(i)} is {len(ids)} tokens long; the model takes at most "
                              f"{max_length}: shorten it (nothing is truncated silently)")
        if sum(token == mask_id for token in ids) != counts[i]:
            raise MlmkitError(f"{which(i)}: the tokenizer did not keep its {counts[i]} mask(s) "
                              f"as {tokenizer.mask_token!r} tokens; write the mask as a "
                              f"separate word")
    return encoded


def _pad(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    length = max(len(row) for row in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), length), dtype=torch.long)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[r, : len(row)] = 1
    return ids.to(device), attention.to(device)


def _independent(model, ids, attention, masked, top_k):
    """Top-k at every mask from one pass: [B, L, k] ids and log-probs, steps all 0."""
    log_probs = masked_log_probs(model, ids, attention, masked)
    top_lp, top_ids = log_probs.topk(top_k, dim=-1)
    cand_ids = torch.zeros((*ids.shape, top_k), dtype=torch.long, device=ids.device)
    cand_lp = torch.zeros((*ids.shape, top_k), dtype=torch.float32, device=ids.device)
    cand_ids[masked], cand_lp[masked] = top_ids, top_lp
    return cand_ids, cand_lp, torch.zeros_like(ids)


def _joint(model, ids, attention, masked, top_k):
    """Fill the most confident remaining mask of each row per step, conditioned on the rest."""
    ids, remaining = ids.clone(), masked.clone()
    cand_ids = torch.zeros((*ids.shape, top_k), dtype=torch.long, device=ids.device)
    cand_lp = torch.zeros((*ids.shape, top_k), dtype=torch.float32, device=ids.device)
    step_of = torch.zeros_like(ids)
    step = 0
    while bool(remaining.any()):
        rows = remaining.any(dim=1).nonzero().squeeze(1)
        sub_remaining = remaining[rows]
        log_probs = masked_log_probs(model, ids[rows], attention[rows], sub_remaining)
        best = log_probs.max(dim=-1).values
        confidence = torch.full(sub_remaining.shape, -math.inf, device=ids.device)
        confidence[sub_remaining] = best
        cols = confidence.argmax(dim=1)
        row_of_position = torch.full(sub_remaining.shape, -1, dtype=torch.long, device=ids.device)
        row_of_position[sub_remaining] = torch.arange(len(log_probs), device=ids.device)
        picked = log_probs[row_of_position[torch.arange(len(rows), device=ids.device), cols]]
        top_lp, top_ids = picked.topk(top_k, dim=-1)
        cand_ids[rows, cols], cand_lp[rows, cols] = top_ids, top_lp
        ids[rows, cols] = top_ids[:, 0]
        remaining[rows, cols] = False
        step_of[rows, cols] = step
        step += 1
    return cand_ids, cand_lp, step_of


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int):
    """Yield `advance(n)`: a rich bar of texts done, with texts/s (a no-op when disabled)."""
    if not enabled:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("fill-mask"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]} texts/s"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("fill-mask", total=total, rate="-")
        started = time.perf_counter()

        def advance(n: int) -> None:
            bar.advance(task, n)
            done = bar.tasks[0].completed
            bar.update(task, rate=f"{done / max(time.perf_counter() - started, 1e-9):,.1f}")

        yield advance


def _filled_text(tokenizer, ids: list[int], masked: list[bool], special: set[int]) -> str:
    """Decode the filled row: the input's special tokens dropped, the fills always kept."""
    kept = [t for t, is_mask in zip(ids, masked, strict=True) if is_mask or t not in special]
    return tokenizer.decode(kept, skip_special_tokens=False)


def fill_mask(
    model,
    text_or_texts: str | Sequence[str],
    top_k: int = 5,
    mode: str = "independent",
    batch_size: int = 32,
    tokenizer=None,
    progress: bool = False,
) -> FillResult | list[FillResult]:
    """The `top_k` likeliest tokens at each mask of each text, best first.

    `model` is an `MLM`, a name or path (loaded with `load_mlm`), or a model with its
    `tokenizer`. `mode="independent"` predicts every mask from the input as given (as
    FillMaskPipeline); `mode="joint"` fills masks one at a time, most confident first,
    each conditioned on the masks already filled (its candidates are the distribution at
    the step the mask was filled). One text gives a `FillResult`, a list a list.
    `progress` shows a rich progress bar (texts/s, ETA) on stderr.
    """
    if mode not in MODES:
        raise MlmkitError(f"unknown fill-mask mode {mode!r}: use one of {list(MODES)}")
    if batch_size < 1:
        raise MlmkitError(f"batch_size must be at least 1, got {batch_size}")
    single = isinstance(text_or_texts, str)
    texts = [text_or_texts] if single else list(text_or_texts)
    if not all(isinstance(text, str) for text in texts):
        raise MlmkitError("fill_mask takes a text or a list of texts (str)")
    mlm = as_mlm(model, tokenizer)
    tok, net = mlm.tokenizer, mlm.model
    vocab = net.get_output_embeddings().weight.shape[0] if net.get_output_embeddings() is not None \
        else net.config.vocab_size
    if not 1 <= top_k <= vocab:
        raise MlmkitError(f"top_k must be between 1 and the vocabulary size {vocab}, got {top_k}")
    if not texts:
        return []
    encoded = _encode(tok, texts, mlm.max_length)
    order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # less padding
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    special = set(tok.all_special_ids)
    run = _independent if mode == "independent" else _joint
    results: list[FillResult | None] = [None] * len(texts)
    was_training = net.training
    net.eval()
    try:
        with torch.inference_mode(), _progress_bar(progress, len(texts)) as advance:
            for start in range(0, len(order), batch_size):
                members = order[start:start + batch_size]
                ids, attention = _pad([encoded[i] for i in members], pad_id, mlm.device)
                masked = (ids == tok.mask_token_id) & attention.bool()
                cand_ids, cand_lp, steps = run(net, ids, attention, masked, top_k)
                for row, i in enumerate(members):
                    results[i] = _result(tok, texts[i], mode, encoded[i], masked[row],
                                         cand_ids[row], cand_lp[row], steps[row], special)
                advance(len(members))
    finally:
        net.train(was_training)
    return results[0] if single else results


def _result(tok, text, mode, input_ids, masked, cand_ids, cand_lp, steps, special):
    positions = masked.nonzero().squeeze(1).tolist()
    ids_k, lp_k = cand_ids[positions].tolist(), cand_lp[positions].double()
    scores = lp_k.exp().tolist()
    unique = sorted({t for row in ids_k for t in row})
    names = dict(zip(unique, tok.batch_decode([[t] for t in unique]), strict=True))
    masks = [
        MaskFill(index=n, position=p, step=int(steps[p]),
                 candidates=[Candidate(names[t], t, s)
                             for t, s in zip(ids_k[n], scores[n], strict=True)])
        for n, p in enumerate(positions)
    ]
    filled = list(input_ids)
    for n, p in enumerate(positions):
        filled[p] = ids_k[n][0]
    is_mask = masked[: len(input_ids)].tolist()
    return FillResult(text=text, mode=mode, masks=masks,
                      filled=_filled_text(tok, filled, is_mask, special),
                      log_prob=float(lp_k[:, 0].sum()))
