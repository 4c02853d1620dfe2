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

import numpy as np

from mlmkit.core.checks import choice
from mlmkit.engine.batching import (
    BatchArrays,
    concatenated_ranges,
    default_batch_tokens,
    pick,
    run_jobs,
)
from mlmkit.errors import InvalidArgument, ModelError
from mlmkit.models import as_mlm, masked_log_probs
from mlmkit.scoring.jobs import Jobs, build_jobs


class _MaskedCopies:
    """The job source of a PLL run: each job is a masked copy of a sequence, built lazily.

    A batch's padded ids, attention mask and scored positions come from one gather over
    the concatenated sequences (no per-copy Python loop); the scored token ids ride along
    as `extra["targets"]`.
    """

    def __init__(self, sequences: list[np.ndarray], jobs: Jobs, pad_id: int, mask_id: int):
        lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.concatenate(sequences) if sequences else np.zeros(1, np.int64)
        self.flat = np.concatenate([flat.astype(np.int64), [pad_id]])  # last = padding
        self.jobs, self.mask_id = jobs, mask_id
        self.lengths = jobs.length

    def build(self, batch: np.ndarray, pad_id: int) -> BatchArrays:
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
            extra = j.extra_columns[concatenated_ranges(j.extra_offsets[batch], counts)]
            ids[np.repeat(row_index, counts), extra] = self.mask_id
        positions = np.stack([row_index, j.column[batch]], axis=1)
        return BatchArrays(ids, valid.astype(np.int64), positions,
                           extra={"targets": j.token[batch]})


def _target_log_prob(batch, log_probs):
    return pick(log_probs, batch.extra["targets"])


UNK_MODES = ("score", "skip")


def unscored_ids(tokenizer, unk: str = "score") -> np.ndarray:
    """Token ids never scored: the special tokens ([CLS], [SEP], [PAD], ...), and [UNK] only
    with `unk="skip"`. minicons and Salazar et al. mask and score [UNK] like any token."""
    choice("unk", unk, UNK_MODES)
    ids = set(tokenizer.all_special_ids)
    if unk == "score" and tokenizer.unk_token_id is not None:
        ids.discard(tokenizer.unk_token_id)
    return np.array(sorted(ids), dtype=np.int64)


def score_token_ids(
    model,
    token_ids: list[list[int]],
    targets: list[list[int]] | None = None,
    *,
    metric: str = "pll",
    word_ids: list[list[int | None]] | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    progress: bool | None = False,
    max_length: int | None = None,
    stride: int = 1,
    unk: str = "score",
) -> list[np.ndarray]:
    """float64 log P(token | masked context) for each target of each sequence.

    `token_ids` are full sequences with their special tokens; `targets` the positions to
    score in each (None: every position but the special tokens; [UNK] is scored, as in
    minicons, unless `unk="skip"`). `metric="pll"` masks each target
    alone (Salazar et al. 2020); `"pll_word_l2r"` also masks the later subwords of the
    target's word (Kauf & Ivanova 2023; needs `word_ids`). Sequences longer than
    `max_length` (default: the model's) are scored in windows starting at multiples of
    `stride`, each target in the window that centres it best. Returns one array per
    sequence, in the order of its targets. Batching (token budget, length buckets,
    precision, progress) is `mlmkit.engine.batching.run_jobs`.
    """
    mlm = as_mlm(model)
    tokenizer = mlm.tokenizer
    if tokenizer.mask_token_id is None:
        raise ModelError(f"the tokenizer of {mlm.name!r} has no mask token: PLL needs one")
    sequences = [np.asarray(ids, dtype=np.int64).reshape(-1) for ids in token_ids]
    special_ids = unscored_ids(tokenizer, unk)
    if targets is None:
        chosen = [np.nonzero(~np.isin(ids, special_ids))[0] for ids in sequences]
    else:
        if len(targets) != len(sequences):
            raise InvalidArgument(f"targets has {len(targets)} entries for {len(sequences)} sequences")
        chosen = [np.asarray(t, dtype=np.int64).reshape(-1) for t in targets]
    if word_ids is not None and len(word_ids) != len(sequences):
        raise InvalidArgument(f"word_ids has {len(word_ids)} entries for {len(sequences)} sequences")
    limit = int(max_length or mlm.max_length)
    jobs = build_jobs(sequences, chosen, special_ids, limit, metric, word_ids, stride)
    scores = np.zeros(len(jobs), dtype=np.float64)
    if len(jobs):
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        copies = _MaskedCopies(sequences, jobs, pad, tokenizer.mask_token_id)
        if batch_tokens is None:
            batch_tokens = default_batch_tokens(mlm.model, limit)
        # `masked_log_probs` is looked up here, at call time, so a test can watch it.
        scores = run_jobs(mlm, copies, _target_log_prob, batch_tokens=batch_tokens,
                          precision=precision, progress=progress, description="scoring",
                          unit="tokens", call=masked_log_probs)
    return [scores[jobs.per_sequence[i]:jobs.per_sequence[i + 1]].copy()
            for i in range(len(sequences))]
