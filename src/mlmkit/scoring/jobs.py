"""Scoring jobs: one masked copy per (sequence, target position), in flat numpy arrays.

A job says which sequence to copy, which window of it to keep (for sequences longer than
the model accepts), which column of the copy is scored, and which other columns are
masked with it (PLL-word-l2r). Keeping jobs as arrays is what lets a batch be built with
one gather instead of a Python loop per copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlmkit.errors import InvalidArgument, InvalidData

METRICS = ("pll", "pll_word_l2r")


@dataclass
class Jobs:
    """All masked copies of a scoring run, one entry per copy (CSR-grouped by sequence)."""

    seq: np.ndarray  # [J] index of the source sequence
    start: np.ndarray  # [J] first content token kept in the copy (window start)
    width: np.ndarray  # [J] number of content tokens kept
    prefix: np.ndarray  # [J] leading special tokens of the source sequence
    content: np.ndarray  # [J] content tokens of the source sequence (window or not)
    column: np.ndarray  # [J] column of the scored token in the copy
    token: np.ndarray  # [J] the token id being scored
    length: np.ndarray  # [J] length of the copy (prefix + width + suffix)
    extra_offsets: np.ndarray  # [J + 1] CSR offsets into extra_columns
    extra_columns: np.ndarray  # columns masked along with `column` (l2r: later subwords)
    per_sequence: np.ndarray  # [S + 1] CSR offsets of each sequence's jobs

    def __len__(self) -> int:
        return len(self.seq)


def special_runs(ids: np.ndarray, special_ids: np.ndarray) -> tuple[int, int]:
    """Lengths of the leading and trailing runs of special tokens ([CLS] …, … [SEP])."""
    is_special = np.isin(ids, special_ids)
    n = len(ids)
    if is_special.all():
        return n, 0
    prefix = int(np.argmin(is_special))
    suffix = int(np.argmin(is_special[::-1]))
    return prefix, suffix


def window_starts(content_index: np.ndarray, n_content: int, width: int, stride: int) -> np.ndarray:
    """Per target, the start of the window (of `width` content tokens) that centres it best.

    Windows start at multiples of `stride` (and at the last possible start); each target is
    scored in the one where its context is most balanced. Cost does not depend on the
    stride: every target is its own masked copy either way.
    """
    last = n_content - width
    ideal = np.clip(content_index - (width - 1) / 2.0, 0, last)
    low = np.floor(ideal / stride) * stride
    high = np.minimum(low + stride, last)
    best = np.where(ideal - low <= high - ideal, low, high)
    return best.astype(np.int64)


def _l2r_extras(word_ids, positions: np.ndarray) -> list[np.ndarray]:
    """For each target position, the later positions of the same word (PLL-word-l2r)."""
    words = np.array([-1 if w is None else w for w in word_ids], dtype=np.int64)
    extras = []
    for p in positions:
        w = words[p]
        if w < 0:
            extras.append(np.zeros(0, dtype=np.int64))
            continue
        later = np.nonzero(words[p + 1:] == w)[0] + p + 1
        extras.append(later)
    return extras


def build_jobs(
    sequences: list[np.ndarray],
    targets: list[np.ndarray],
    special_ids: np.ndarray,
    max_length: int,
    metric: str,
    word_ids=None,
    stride: int = 1,
) -> Jobs:
    """Flatten every (sequence, target) into a job, windowing sequences over `max_length`."""
    if metric not in METRICS:
        raise InvalidArgument(f"unknown metric {metric!r}: use one of {list(METRICS)}")
    if metric == "pll_word_l2r" and word_ids is None:
        raise InvalidArgument("metric 'pll_word_l2r' needs word_ids (encoding.word_ids() per text)")
    if stride < 1:
        raise InvalidArgument(f"stride={stride} (--stride) must be at least 1")
    parts = {k: [] for k in ("seq", "start", "width", "prefix", "content", "column", "token",
                             "length")}
    extra_lengths, extra_columns, counts = [], [], []
    for i, (ids, pos) in enumerate(zip(sequences, targets, strict=True)):
        n = len(ids)
        if len(pos) and (pos.min() < 0 or pos.max() >= n):
            raise InvalidArgument(f"sequence {i}: a target position is outside 0..{n - 1}")
        prefix, suffix = special_runs(ids, special_ids)
        n_content = n - prefix - suffix
        room = max_length - prefix - suffix
        if n > max_length and room < 1:
            raise InvalidData(f"sequence {i}: max_length {max_length} leaves no room for text")
        in_content = (pos >= prefix) & (pos < prefix + n_content)
        if n <= max_length:
            start = np.zeros(len(pos), dtype=np.int64)
            width = n_content
        else:
            # past the content there is no other multiple of the stride (and a huge int
            # would overflow numpy): the same windows as the stride itself
            start = window_starts(pos - prefix, n_content, room, min(stride, n_content))
            outside = in_content & ((pos - prefix < start) | (pos - prefix >= start + room))
            if outside.any():  # windows at multiples of a stride past the window leave gaps
                # no index: a streamed file's call holds one chunk, not the whole input
                raise InvalidArgument(
                    f"stride={stride} (--stride) leaves tokens of a text in no window: a text "
                    f"longer than the model's {max_length} tokens is scored in windows of "
                    f"{room} tokens that start at multiples of the stride; use a stride of at "
                    f"most {room}")
            start = np.where(in_content, start, np.where(pos < prefix, 0, n_content - room))
            width = room

        def to_column(p, start=start, prefix=prefix, n_content=n_content, width=width):
            return np.where(p < prefix, p, np.where(p < prefix + n_content, p - start,
                                                   p - n_content + width))

        column = to_column(pos)
        if metric == "pll_word_l2r":
            for j, later in enumerate(_l2r_extras(word_ids[i], pos)):
                cols = later - start[j]
                keep = cols < prefix + width  # later subwords past the window are unseen anyway
                extra_columns.append(cols[keep])
                extra_lengths.append(int(keep.sum()))
        else:
            extra_lengths.extend([0] * len(pos))
        parts["seq"].append(np.full(len(pos), i, dtype=np.int64))
        parts["start"].append(start)
        parts["width"].append(np.full(len(pos), width, dtype=np.int64))
        parts["prefix"].append(np.full(len(pos), prefix, dtype=np.int64))
        parts["content"].append(np.full(len(pos), n_content, dtype=np.int64))
        parts["column"].append(column)
        parts["token"].append(ids[pos])
        parts["length"].append(np.full(len(pos), prefix + width + suffix, dtype=np.int64))
        counts.append(len(pos))
    arrays = {k: (np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64))
              for k, v in parts.items()}
    extra_offsets = np.concatenate([[0], np.cumsum(extra_lengths, dtype=np.int64)])
    extras = (np.concatenate(extra_columns).astype(np.int64) if extra_columns
              else np.zeros(0, np.int64))
    per_sequence = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    return Jobs(**arrays, extra_offsets=extra_offsets.astype(np.int64), extra_columns=extras,
                per_sequence=per_sequence.astype(np.int64))
