"""The PLL engine: every masked copy of every sequence, batched under a padded-token budget.

Each (sequence, target) pair is one job: a copy of the sequence with the target masked
(and, for PLL-word-l2r, the later subwords of its word). Jobs are sorted by length so
batches carry little padding, cut so that rows × padded length stays under the budget,
run through the encoder once, and the MLM head is applied only at each copy's target
column. Only the target token's log-probability is kept (float64); results come back in
input order. Sequences longer than the model accepts are scored through sliding windows
(`mlmkit.scoring.jobs.window_starts`): every token once, with balanced context.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import torch

from mlmkit.errors import MlmkitError
from mlmkit.models import as_mlm, masked_log_probs
from mlmkit.scoring.jobs import Jobs, build_jobs

PRECISIONS = ("fp32", "bf16")
WORKING_MEMORY_BYTES = 1 << 30  # activations of one batch; the model and results come on top
HEAD_MEMORY_BYTES = 384 << 20  # the [rows, V] logits and log-probs of one batch
MIN_BATCH_TOKENS, MAX_BATCH_TOKENS = 256, 32768


def default_batch_tokens(model: torch.nn.Module, max_length: int) -> int:
    """A padded-token budget that keeps one batch's activations within about 1 GiB.

    Per padded token, inference keeps roughly 8 hidden-size vectors, 2 intermediate-size
    vectors and 2 rows of attention scores (heads × length) alive, in float32.
    """
    config = model.config
    hidden = getattr(config, "hidden_size", None) or getattr(config, "dim", 768)
    intermediate = (getattr(config, "intermediate_size", None)
                    or getattr(config, "hidden_dim", None) or 4 * hidden)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", 12)
    per_token = 4 * (8 * hidden + 2 * intermediate + 2 * heads * max_length)
    return int(np.clip(WORKING_MEMORY_BYTES // per_token, MIN_BATCH_TOKENS, MAX_BATCH_TOKENS))


def max_rows_for_head(vocab_size: int) -> int:
    """How many copies one batch may hold so that its [rows, V] head output stays bounded."""
    return max(1, HEAD_MEMORY_BYTES // (3 * 4 * max(1, vocab_size)))


def cut_batches(lengths: np.ndarray, batch_tokens: int, max_rows: int) -> list[tuple[int, int]]:
    """[start, end) ranges over `lengths` (sorted ascending) with rows × max length ≤ budget.

    A single copy longer than the budget still forms a batch of one (never dropped).
    """
    ranges, i, n = [], 0, len(lengths)
    while i < n:
        end = min(n, i + max(1, min(max_rows, batch_tokens // int(lengths[i]))))
        while end - i > 1 and (end - i) * int(lengths[end - 1]) > batch_tokens:
            end = i + max(1, batch_tokens // int(lengths[end - 1]))
        ranges.append((i, end))
        i = end
    return ranges


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated aranges [starts[k], starts[k] + counts[k]) without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + (np.arange(total) - first)


class _BatchBuilder:
    """Builds the padded input ids, attention mask and scored positions of a batch of jobs."""

    def __init__(self, sequences: list[np.ndarray], jobs: Jobs, pad_id: int, mask_id: int,
                 device: torch.device):
        lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.concatenate(sequences) if sequences else np.zeros(1, np.int64)
        self.flat = np.concatenate([flat.astype(np.int64), [pad_id]])  # last = padding
        self.jobs, self.pad_id, self.mask_id, self.device = jobs, pad_id, mask_id, device

    def build(self, batch: np.ndarray):
        j = self.jobs
        rows = len(batch)
        length = j.length[batch]
        k = np.arange(int(length.max()), dtype=np.int64)[None, :]
        prefix, start = j.prefix[batch][:, None], j.start[batch][:, None]
        width, content = j.width[batch][:, None], j.content[batch][:, None]
        source = np.where(k < prefix, k, np.where(k < prefix + width, k + start,
                                                  k + content - width))
        valid = k < length[:, None]
        index = np.where(valid, self.offsets[j.seq[batch]][:, None] + source, len(self.flat) - 1)
        ids = self.flat[index]
        row_index = np.arange(rows)
        ids[row_index, j.column[batch]] = self.mask_id
        counts = j.extra_offsets[batch + 1] - j.extra_offsets[batch]
        if counts.any():
            extra = j.extra_columns[_ranges(j.extra_offsets[batch], counts)]
            ids[np.repeat(row_index, counts), extra] = self.mask_id
        positions = np.stack([row_index, j.column[batch]], axis=1)
        to = dict(device=self.device)
        return (torch.from_numpy(ids).to(**to), torch.from_numpy(valid.astype(np.int64)).to(**to),
                torch.from_numpy(positions).to(**to),
                torch.from_numpy(j.token[batch]).to(**to))


def _progress(total: int, enabled: bool):
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]} tokens/s"), TimeRemainingColumn(),
                    transient=True)


def score_token_ids(
    mlm,
    token_ids: list[list[int]],
    targets: list[list[int]] | None = None,
    *,
    metric: str = "pll",
    word_ids: list[list[int | None]] | None = None,
    batch_tokens: int | None = None,
    precision: str = "fp32",
    progress: bool = False,
    max_length: int | None = None,
    stride: int = 1,
) -> list[np.ndarray]:
    """float64 log P(token | masked context) for each target of each sequence.

    `token_ids` are full sequences with their special tokens; `targets` the positions to
    score in each (None: every non-special position). `metric="pll"` masks each target
    alone (Salazar et al. 2020); `"pll_word_l2r"` also masks the later subwords of the
    target's word (Kauf & Ivanova 2023; needs `word_ids`). Sequences longer than
    `max_length` (default: the model's) are scored in windows starting at multiples of
    `stride`, each target in the window that centres it best. Returns one array per
    sequence, in the order of its targets.
    """
    mlm = as_mlm(mlm)
    if precision not in PRECISIONS:
        raise MlmkitError(f"unknown precision {precision!r}: use one of {list(PRECISIONS)}")
    tokenizer, model = mlm.tokenizer, mlm.model
    if tokenizer.mask_token_id is None:
        raise MlmkitError(f"the tokenizer of {mlm.name!r} has no mask token: PLL needs one")
    sequences = [np.asarray(ids, dtype=np.int64).reshape(-1) for ids in token_ids]
    special_ids = np.array(sorted(set(tokenizer.all_special_ids)), dtype=np.int64)
    if targets is None:
        chosen = [np.nonzero(~np.isin(ids, special_ids))[0] for ids in sequences]
    else:
        if len(targets) != len(sequences):
            raise MlmkitError(f"targets has {len(targets)} entries for {len(sequences)} sequences")
        chosen = [np.asarray(t, dtype=np.int64).reshape(-1) for t in targets]
    if word_ids is not None and len(word_ids) != len(sequences):
        raise MlmkitError(f"word_ids has {len(word_ids)} entries for {len(sequences)} sequences")
    limit = int(max_length or mlm.max_length)
    jobs = build_jobs(sequences, chosen, special_ids, limit, metric, word_ids, stride)
    scores = np.zeros(len(jobs), dtype=np.float64)
    if len(jobs):
        budget = int(batch_tokens or default_batch_tokens(model, limit))
        if budget < 1:
            raise MlmkitError(f"batch_tokens {budget} must be positive")
        order = np.argsort(jobs.length, kind="stable")
        vocab = int(getattr(model.config, "vocab_size", len(tokenizer)))
        batches = cut_batches(jobs.length[order], budget, max_rows_for_head(vocab))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        builder = _BatchBuilder(sequences, jobs, pad, tokenizer.mask_token_id, mlm.device)
        autocast = torch.autocast(device_type=mlm.device.type, dtype=torch.bfloat16,
                                  enabled=precision == "bf16")
        with torch.inference_mode(), autocast, _progress(len(jobs), progress) as bar:
            task = bar.add_task("score", total=len(jobs), rate="-") if bar else None
            began, done = time.perf_counter(), 0
            for lo, hi in batches:
                batch = order[lo:hi]
                ids, attention, positions, wanted = builder.build(batch)
                log_probs = masked_log_probs(model, ids, attention, positions)
                picked = log_probs.gather(1, wanted.unsqueeze(1)).squeeze(1)
                scores[batch] = picked.double().cpu().numpy()
                del log_probs
                if bar is not None:
                    done += hi - lo
                    rate = done / max(time.perf_counter() - began, 1e-9)
                    bar.update(task, advance=hi - lo, rate=f"{rate:,.0f}")
    return [scores[jobs.per_sequence[i]:jobs.per_sequence[i + 1]].copy()
            for i in range(len(sequences))]
