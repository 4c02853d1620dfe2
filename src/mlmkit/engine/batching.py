"""The one batching layer: jobs → length-bucketed, token-budget batches → the primitive →
per-job results in input order.

A *job* is one row to run through the encoder (token ids, with any masks already in it)
and the columns of that row where the MLM head is read. Every feature that runs a
masked LM on many inputs (PLL scoring, probes, AUL, fill-mask, the ELBO, the server's
request batcher) is a set of jobs plus a *reducer* that turns one batch's
log-probabilities into one value per job. This module does everything else, once:

- sorts jobs by length so a batch carries little padding, and ends a batch where the
  length changes when that keeps it at least half full: a batch of one length (PLL's
  copies of a text) has no padding and runs without an attention mask;
- cuts batches so rows × padded length ≤ `batch_tokens` (default, `default_batch_tokens`:
  sized for the model's shape, about 1 GiB of activations on a GPU and half the
  last-level cache on a CPU), and so the head's
  [positions, V] output stays bounded (`max_reads_for_head`); a job longer than the budget
  still runs, alone (never dropped, never truncated);
- runs each batch once through `masked_log_probs` (or `masked_logits`, or your own
  forward) under `torch.inference_mode`, eval mode and the resolved precision's autocast;
- hands `reduce(batch, out)` the padded batch and the head's output, and stores what it
  returns per job in input order; draws one progress bar (stderr only).

Usage — the log-probability of the token at one column of each text, unmasked::

    import numpy as np
    from mlmkit.engine.batching import run_jobs, pick

    ids = [mlm.tokenizer(t)["input_ids"] for t in texts]
    jobs = [(row, [1]) for row in ids]            # read column 1 of every row

    def reduce(batch, log_probs):                 # log_probs: [n_positions, V], row-major
        return pick(log_probs, batch.tokens_at_positions()).cpu().numpy()

    values = run_jobs(mlm, jobs, reduce, batch_tokens=4096, precision="auto")
    # values: float64 array [len(jobs)], values[i] belongs to jobs[i]

`reduce` returns one value per row of the batch (an array or tensor of length b: results
come back as one numpy array; a list: results come back as a list), or None: the reducer
keeps what it needs itself (callback style; `run_jobs` then returns None). `batch.index`
says which jobs the rows are. Helpers for the usual reductions: `pick` (the log-prob of
a given token at each position), `row_sums` / `row_means` (per-row totals of per-position
values, float64).

Jobs are either a list of `(token_ids, read_columns)` pairs (or a `TokenJobs`), or any
object with `lengths` ([J] row lengths), optionally `reads` ([J] positions read per row),
and `build(index, pad_id) -> BatchArrays` — how the PLL engine builds its N masked copies
per text lazily, by one gather, instead of materialising them. Passing `call=None` skips
the primitive (`reduce(batch, None)`) for loops that call it several times per batch
(joint fill-mask, iterative unmasking) while still batching, padding and ordering here.
"""

from __future__ import annotations

import functools
import glob
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from mlmkit.core.devices import autocast, resolve_precision
from mlmkit.core.progress import Progress
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.models import as_mlm, masked_log_probs, masked_logits

WORKING_MEMORY_BYTES = 1 << 30  # activations of one batch; the model and results come on top
HEAD_MEMORY_BYTES = 384 << 20  # the [positions, V] logits and log-probs of one batch
MIN_BATCH_TOKENS, MAX_BATCH_TOKENS = 256, 32768
CPU_MAX_BATCH_TOKENS = 4096  # a CPU batch past this only spills (`default_batch_tokens`)
CALLS = ("log_probs", "logits")
BATCH_COST_TOKENS = 384  # a forward pass's fixed cost, in padded tokens (padding_segments)


def default_batch_tokens(model, max_length: int) -> int:
    """The padded-token budget of a batch when none is given.

    On a GPU: the most that keeps one batch's activations within about 1 GiB (per padded
    token, inference keeps roughly 8 hidden-size vectors, 2 intermediate-size vectors and
    2 rows of attention scores (heads × length) alive, in float32). On a CPU: fewer, so
    that the widest activation of a batch (tokens × intermediate size, float32) fills
    about half of the last-level cache (`cache_bytes`): matmuls whose operands stay in
    cache run faster than the same work in batches that spill to memory. And at most
    `CPU_MAX_BATCH_TOKENS`: a virtual machine reports its host's whole last-level cache
    (hundreds of MiB) of which one process holds a share, and a CPU matmul is already at
    its best rate over a few thousand rows, so a larger batch only adds cache misses
    (benchmarks/batch_budget.py measures budgets on a machine; the PLL copies of a
    265-token protein ran faster 8 to 16 a batch than 64 or 128).
    """
    config = model.config
    hidden = getattr(config, "hidden_size", None) or getattr(config, "dim", 768)
    intermediate = (getattr(config, "intermediate_size", None)
                    or getattr(config, "hidden_dim", None) or 4 * hidden)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", 12)
    per_token = 4 * (8 * hidden + 2 * intermediate + 2 * heads * max(1, int(max_length)))
    budget = WORKING_MEMORY_BYTES // per_token
    if _device_type(model) == "cpu":
        budget = min(budget, cache_bytes() // 2 // (4 * intermediate), CPU_MAX_BATCH_TOKENS)
    return int(np.clip(budget, MIN_BATCH_TOKENS, MAX_BATCH_TOKENS))


def _device_type(model) -> str:
    try:
        return next(model.parameters()).device.type
    except (AttributeError, StopIteration):
        return "cpu"


def _training_modules(net) -> list:
    """The modules of `net` in training mode (a plain walk: `Module.modules()` builds names
    and a memo set, which costs more than the walk on every call)."""
    found, stack = [], [net]
    while stack:
        module = stack.pop()
        if getattr(module, "training", False):
            found.append(module)
        stack.extend(m for m in getattr(module, "_modules", {}).values() if m is not None)
    return found


@functools.lru_cache(maxsize=1)
def cache_bytes() -> int:
    """The size of this machine's last-level CPU cache (Linux sysfs), else 32 MiB. Read once
    per process: a server's small calls each asked sysfs again (~1 ms of CPU per call)."""
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else 32 << 20


def max_reads_for_head(vocab_size: int) -> int:
    """How many head positions one batch may read so that its [n, V] output stays bounded."""
    return max(1, HEAD_MEMORY_BYTES // (3 * 4 * max(1, vocab_size)))


max_rows_for_head = max_reads_for_head  # one read per row: the PLL engine's name for it


def cut_batches(lengths: np.ndarray, batch_tokens: int, max_rows: int,
                reads: np.ndarray | None = None,
                max_reads: int | None = None) -> list[tuple[int, int]]:
    """[start, end) ranges over `lengths` (sorted ascending) with rows × max length ≤ budget,
    at most `max_rows` rows and (when `reads` is given) at most `max_reads` reads. A batch
    ends where the length changes when its rows of the first length fill at least half of
    it: such a batch has no padding and runs without an attention mask.

    A single job longer than the budget (or reading more) still forms a batch of one.

    First the sorted run is split where padding would cost more than another batch
    (`padding_segments`); each segment is then cut as above.
    """
    lengths = np.asarray(lengths)
    read_ends = None
    if reads is not None and max_reads is not None:
        read_ends = np.cumsum(np.asarray(reads, dtype=np.int64))
    ranges = []
    for start, stop in padding_segments(lengths, batch_tokens):
        ranges += _cut_segment(lengths, start, stop, batch_tokens, max_rows, read_ends,
                               max_reads)
    return ranges


def _cut_segment(lengths: np.ndarray, i: int, n: int, batch_tokens: int, max_rows: int,
                 read_ends: np.ndarray | None, max_reads: int | None) -> list[tuple[int, int]]:
    """`cut_batches`' cuts of lengths[i:n], one segment of `padding_segments`."""
    ranges = []
    while i < n:
        end = min(n, i + max(1, min(max_rows, batch_tokens // max(1, int(lengths[i])))))
        while end - i > 1 and (end - i) * int(lengths[end - 1]) > batch_tokens:
            end = i + max(1, batch_tokens // int(lengths[end - 1]))
        if read_ends is not None:
            before = int(read_ends[i - 1]) if i else 0
            fits = int(np.searchsorted(read_ends, before + max_reads, side="right"))
            end = max(i + 1, min(end, fits))
        if lengths[end - 1] != lengths[i]:
            # One length, no padding and no attention mask, when that keeps at least half
            # of the batch (PLL's copies of a text all share its length).
            same = i + int(np.searchsorted(lengths[i:end], lengths[i], side="right"))
            if 2 * (same - i) >= end - i:
                end = same
        ranges.append((i, end))
        i = end
    return ranges


def padding_segments(lengths: np.ndarray, batch_tokens: int) -> list[tuple[int, int]]:
    """Where to split `lengths` (sorted ascending) so that padding does not cost more than
    the batches it saves: the split into runs of whole length groups that minimises padded
    tokens + `BATCH_COST_TOKENS` per batch (a run of r rows up to length L counted as r × L
    tokens in ⌈r × L / budget⌉ batches), by dynamic programming over the distinct lengths.

    A call of a few texts of many lengths, such as a server's gathered requests (each text's
    masked copies share its length), pads several times fewer tokens split here than under
    the budget cuts alone, and padding is work the encoder does for nothing. A long corpus run, whose length groups fill batches on their own, is split
    at length changes, where it loses at most one partly filled batch per length.
    """
    n = len(lengths)
    if n == 0:
        return [(0, 0)]
    starts = np.concatenate([[0], np.nonzero(np.diff(lengths))[0] + 1]).astype(np.int64)
    groups = len(starts)
    if groups == 1:
        return [(0, n)]
    bounds = np.concatenate([starts, [n]])
    group_length = np.asarray(lengths, dtype=np.int64)[starts]
    cost = np.zeros(groups + 1)
    back = np.zeros(groups + 1, dtype=np.int64)
    budget = max(1, int(batch_tokens))
    for g in range(1, groups + 1):
        first = np.arange(g)
        padded = (bounds[g] - bounds[first]) * group_length[g - 1]
        total = cost[first] + padded + BATCH_COST_TOKENS * np.ceil(padded / budget)
        back[g] = int(np.argmin(total))
        cost[g] = total[back[g]]
    segments, g = [], groups
    while g > 0:
        segments.append((int(bounds[back[g]]), int(bounds[g])))
        g = int(back[g])
    return segments[::-1]


@dataclass
class BatchArrays:
    """What a job source builds for one batch (numpy, on the host)."""

    input_ids: np.ndarray  # [b, L] int64, padded
    attention_mask: np.ndarray  # [b, L] int64 (1 = token, 0 = padding)
    positions: np.ndarray  # [n, 2] int64 (row, column) read, row-major order
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # per-row or per-position data


@dataclass
class Batch:
    """One batch as the reducer sees it: tensors on the model's device."""

    index: np.ndarray
    """[b] the jobs (input order numbers) of the rows, in row order."""
    input_ids: object  # torch.Tensor [b, L]
    attention_mask: object  # torch.Tensor [b, L]
    positions: object  # torch.Tensor [n, 2] (row, col), row-major
    extra: dict
    """The job source's extra arrays, as tensors on the device (e.g. the PLL targets)."""
    model: object = None
    """The torch model (for reducers that call the primitive themselves, `call=None`)."""

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def row_of_position(self):
        """[n] the row each read position belongs to."""
        return self.positions[:, 0]

    def tokens_at_positions(self):
        """[n] the input token at each read position (what an unmasked read predicts)."""
        return self.input_ids[self.positions[:, 0], self.positions[:, 1]]


class TokenJobs:
    """Jobs given as token-id rows, each with the columns to read (the common case)."""

    def __init__(self, ids: Sequence[Sequence[int]], columns: Sequence[Sequence[int]]):
        if len(ids) != len(columns):
            raise InvalidArgument(f"{len(ids)} token rows but {len(columns)} lists of columns")
        rows = [np.asarray(row, dtype=np.int64).reshape(-1) for row in ids]
        cols = [np.asarray(c, dtype=np.int64).reshape(-1) for c in columns]
        self.lengths = np.array([len(r) for r in rows], dtype=np.int64)
        self.reads = np.array([len(c) for c in cols], dtype=np.int64)
        for i, (row, c) in enumerate(zip(rows, cols, strict=True)):
            if len(c) and (c.min() < 0 or c.max() >= len(row)):
                raise InvalidArgument(f"job {i}: a read column is outside 0..{len(row) - 1}")
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        self.col_offsets = np.concatenate([[0], np.cumsum(self.reads)]).astype(np.int64)
        self.cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.lengths)

    def build(self, index: np.ndarray, pad_id: int) -> BatchArrays:
        lengths = self.lengths[index]
        k = np.arange(int(lengths.max()), dtype=np.int64)[None, :]
        valid = k < lengths[:, None]
        flat = np.concatenate([self.flat, [pad_id]])
        ids = flat[np.where(valid, self.offsets[index][:, None] + k, len(flat) - 1)]
        counts = self.reads[index]
        rows = np.repeat(np.arange(len(index), dtype=np.int64), counts)
        cols = self.cols[concatenated_ranges(self.col_offsets[index], counts)]
        return BatchArrays(ids, valid.astype(np.int64), np.stack([rows, cols], axis=1))


def concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated aranges [starts[k], starts[k] + counts[k]) without a Python loop."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + (np.arange(total) - first)


def pick(out, tokens):
    """float64 [n]: the value of `tokens[i]` in row i of `out` ([n, V] log-probs)."""
    return out.gather(1, tokens.reshape(-1, 1).long()).squeeze(1).double()


def row_sums(batch: Batch, values):
    """float64 [b]: per-row sums of per-position `values` [n] (rows reading nothing: 0)."""
    totals = torch.zeros(batch.rows, dtype=torch.float64, device=values.device)
    return totals.index_add_(0, batch.row_of_position, values.double())


def row_means(batch: Batch, values):
    """float64 [b]: per-row means of per-position `values` [n] (rows reading nothing: NaN)."""
    counts = torch.bincount(batch.row_of_position, minlength=batch.rows).double()
    return row_sums(batch, values) / counts


def check_budget(batch_tokens) -> int | None:
    """`batch_tokens` as an int ≥ 1 (None = the default), else an InvalidArgument."""
    if batch_tokens is None:
        return None
    if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, (int, np.integer)) \
            or batch_tokens < 1:
        raise InvalidArgument(f"batch_tokens={batch_tokens!r} (--batch-tokens) must be a whole "
                              "number ≥ 1, or None for a budget sized for the model")
    return int(batch_tokens)


def _as_source(jobs):
    if hasattr(jobs, "lengths") and hasattr(jobs, "build"):
        return jobs
    jobs = list(jobs)
    return TokenJobs([j[0] for j in jobs], [j[1] for j in jobs])


def run_jobs(
    model,
    jobs,
    reduce: Callable[[Batch, object], object],
    *,
    batch_tokens: int | None = None,
    precision: str = "auto",
    progress: bool | None = False,
    description: str = "scoring",
    unit: str = "jobs",
    call: str | Callable | None = "log_probs",
    max_length: int | None = None,
    name_of: Callable[[int], str] | None = None,
):
    """Run every job through the model in token-budget batches; per-job results in order.

    `model`: an `MLM`, a name or path, or a (model, tokenizer) pair (`mlmkit.models.as_mlm`);
    the batches run on the device the model is on. `jobs`: (token_ids, read_columns) pairs,
    a `TokenJobs`, or a job source (see the module docstring). `reduce(batch, out)`: `out`
    is the head's output at `batch.positions` ([n, V] float32 log-probs for
    `call="log_probs"`, logits for `"logits"`, whatever a callable
    `call(model, ids, attention, positions)` returns, or None for `call=None`).
    `precision`: auto/fp32/bf16 (`runtime.devices.resolve_precision`, inference: auto =
    fp32). `max_length`: a job longer than this is an error naming it (`name_of(i)`), never
    cut. `progress`: a bar on stderr counting jobs (None: when stderr is a terminal).

    Returns a numpy array (reduce returned arrays/tensors), a list (it returned lists), or
    None (it returned None), indexed like `jobs`.
    """
    mlm = as_mlm(model)
    budget = check_budget(batch_tokens)
    if isinstance(call, str) and call not in CALLS:
        raise InvalidArgument(f"call={call!r} is not known: use one of {', '.join(CALLS)}, "
                              "a function or None")
    device = mlm.device
    precision = resolve_precision(precision, device, "inference")
    source = _as_source(jobs)
    lengths = np.asarray(source.lengths, dtype=np.int64)
    total = len(lengths)
    if max_length is not None and total:
        too_long = np.nonzero(lengths > max_length)[0]
        if len(too_long):
            i = int(too_long[0])
            name = name_of(i) if name_of is not None else f"input {i}"
            raise InvalidData(f"{name} has {lengths[i]} tokens, more than the model's "
                              f"{max_length}: shorten it (inputs are never truncated)")
    if total == 0:
        return np.zeros(0, dtype=np.float64)
    net, tokenizer = mlm.model, mlm.tokenizer
    if budget is None:
        budget = default_batch_tokens(net, int(lengths.max()))
    forward = {"log_probs": masked_log_probs, "logits": masked_logits}.get(call, call) \
        if isinstance(call, str) else call
    primitives = (masked_log_probs, masked_logits)
    vocab = int(getattr(net.config, "vocab_size", None) or len(tokenizer))
    reads = getattr(source, "reads", None)
    order = np.argsort(lengths, kind="stable")
    max_reads = max_reads_for_head(vocab)
    sorted_reads = None if reads is None else np.asarray(reads, dtype=np.int64)[order]
    batches = cut_batches(lengths[order], budget, max_reads if reads is None else total,
                          sorted_reads, max_reads)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results, collected = None, None
    # Eval mode only when something is in training mode: `Module.eval()` walks and sets
    # every submodule, a few ms of CPU per call that a server's one-text calls paid each time.
    training = _training_modules(net)
    if training:
        net.eval()
    try:
        with torch.inference_mode(), autocast(precision, device), \
                Progress(description, total=total, unit=unit, enabled=progress) as bar:
            for lo, hi in batches:
                index = order[lo:hi]
                arrays = source.build(index, pad)
                batch = Batch(
                    index=index,
                    input_ids=torch.from_numpy(arrays.input_ids).to(device),
                    attention_mask=torch.from_numpy(arrays.attention_mask).to(device),
                    positions=torch.from_numpy(arrays.positions).to(device),
                    extra={k: torch.from_numpy(np.asarray(v)).to(device)
                           for k, v in arrays.extra.items()},
                    model=net,
                )
                attention = batch.attention_mask
                if forward in primitives and lengths[index[0]] == lengths[index[-1]] \
                        and hi - lo > 1:
                    attention = None  # one length: no padding, no mask arithmetic
                out = None if forward is None else forward(
                    net, batch.input_ids, attention, batch.positions)
                value = reduce(batch, out)
                del out
                if value is not None:
                    if isinstance(value, torch.Tensor):
                        value = value.detach().cpu().numpy()
                    if collected is None:
                        collected = "array" if isinstance(value, np.ndarray) else "list"
                        results = (np.zeros((total, *value.shape[1:]), dtype=value.dtype)
                                   if collected == "array" else [None] * total)
                    if len(value) != len(index):
                        raise RuntimeError(f"reduce returned {len(value)} values for a batch "
                                           f"of {len(index)} rows")
                    if collected == "array":
                        results[index] = value
                    else:
                        for i, v in zip(index.tolist(), value, strict=True):
                            results[i] = v
                bar.advance(hi - lo)
    finally:
        for module in training:  # back to exactly the modes of before
            module.training = True
    return results
