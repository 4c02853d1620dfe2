"""CrowS-Pairs (Nangia et al. 2020), scored exactly as the official metric.py.

For each pair, the two sentences (lowercased first for uncased models) are tokenized
with their special tokens; difflib aligns the two id sequences and keeps the `equal`
spans (the unmodified tokens). Leaving out the first and the last aligned token
([CLS] and [SEP]), each shared token is masked alone and its log-probability summed;
each sentence's sum is rounded to 3 decimals before the two are compared. The masked
copies of all 1,508 pairs go through the scoring engine in length-sorted batches.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Sequence

import numpy as np

from mlmkit.bias.crows_data import CrowsPair
from mlmkit.bias.pairs import PairScores
from mlmkit.core.progress import progress_wanted
from mlmkit.engine.batching import check_budget
from mlmkit.models.load import prepare_mlm
from mlmkit.scoring.masked_copies import score_token_ids

ROUND_DIGITS = 3
_CASE_PROBE = "The Cat And The Dog Were Here"


def is_uncased(tokenizer) -> bool:
    """True when the tokenizer ignores case (the official script lowercases for those)."""
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    return encode(_CASE_PROBE) == encode(_CASE_PROBE.lower())


def shared_positions(ids1: Sequence[int], ids2: Sequence[int]) -> tuple[list[int], list[int]]:
    """Positions of the tokens both sentences share, from difflib's `equal` opcodes.

    Ids are compared as strings, as the official script does (the alignment is the same).
    """
    seq1, seq2 = [str(x) for x in ids1], [str(x) for x in ids2]
    template1, template2 = [], []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, seq1, seq2).get_opcodes():
        if op == "equal":
            template1 += range(a0, a1)
            template2 += range(b0, b1)
    return template1, template2


def crows_inputs(tokenizer, pairs: Sequence[CrowsPair], lowercase: bool):
    """Token ids of sent1 and sent2 of every pair and the positions to mask in each.

    The official loop `for i in range(1, N - 1)` skips the first and last aligned
    positions, i.e. [CLS] and [SEP].
    """
    ids1, ids2, targets1, targets2 = [], [], [], []
    for pair in pairs:
        sent1, sent2 = pair.sent1, pair.sent2
        if lowercase:
            sent1, sent2 = sent1.lower(), sent2.lower()
        a = tokenizer.encode(sent1, add_special_tokens=True, verbose=False)
        b = tokenizer.encode(sent2, add_special_tokens=True, verbose=False)
        t1, t2 = shared_positions(a, b)
        ids1.append(a)
        ids2.append(b)
        targets1.append(t1[1:-1])
        targets2.append(t2[1:-1])
    return ids1, ids2, targets1, targets2


def _sequential_sum(values: np.ndarray) -> float:
    """Left-to-right float64 sum, as the official `+=` loop accumulates."""
    total = 0.0
    for v in values.tolist():
        total += v
    return total


def score_crows(
    model,
    pairs: Sequence[CrowsPair],
    *,
    lowercase: bool | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
) -> PairScores:
    """Score every pair as metric.py does; `lowercase=None` lowercases for uncased models."""
    check_budget(batch_tokens)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    if lowercase is None:
        lowercase = is_uncased(mlm.tokenizer)
    ids1, ids2, targets1, targets2 = crows_inputs(mlm.tokenizer, pairs, lowercase)
    long = [p for p, a, b in zip(pairs, ids1, ids2, strict=True)
            if max(len(a), len(b)) > mlm.max_length]
    if long:
        warnings.warn(f"{len(long)} pair(s) have a sentence longer than the model's "
                      f"{mlm.max_length} tokens (first: row {long[0].row}, line "
                      f"{long[0].line}): scored in sliding windows, which metric.py cannot do",
                      stacklevel=2)
    logp = score_token_ids(mlm, ids1 + ids2, targets1 + targets2, batch_tokens=batch_tokens,
                           precision=precision, progress=progress_wanted(progress))
    n = len(pairs)
    raw1 = np.array([_sequential_sum(x) for x in logp[:n]], dtype=np.float64)
    raw2 = np.array([_sequential_sum(x) for x in logp[n:]], dtype=np.float64)
    score1 = np.array([round(x, ROUND_DIGITS) for x in raw1.tolist()], dtype=np.float64)
    score2 = np.array([round(x, ROUND_DIGITS) for x in raw2.tolist()], dtype=np.float64)
    stereo = np.array([p.direction == "stereo" for p in pairs], dtype=bool)
    return PairScores(
        pairs=list(pairs),
        sent_more_score=np.where(stereo, score1, score2),
        sent_less_score=np.where(stereo, score2, score1),
        measure="crows", model=mlm.name,
        raw_more=np.where(stereo, raw1, raw2), raw_less=np.where(stereo, raw2, raw1),
        extras={"lowercase": lowercase,
                "masked_tokens": np.array([len(t) for t in targets1], dtype=np.int64)},
    )
