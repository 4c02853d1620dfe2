"""FLOP models and the measured matmul peak behind every benchmark's MFU line.

MFU = (the FLOPs the task needs) / seconds / (the best FLOP/s of a square matmul measured
on this machine in the same run, same threads, same precision). The FLOPs the task needs
are counted once, the same for mlmkit and its baseline, so their MFU ratio is their speed
ratio; work a side does that the result never reads (padding, the MLM head at unread
positions, the last layer's queries and feed-forward where nothing is read) is not counted.
A matmul of [m, k] × [k, n] is 2·m·k·n FLOPs; norms, activations and softmax are left out.
"""

from __future__ import annotations

import time


def matmul_peak(dtype=None, size: int = 1024, seconds: float = 2.0, threads: int | None = None,
                clock=time.perf_counter):
    """Best FLOP/s of a square matmul on this machine, measured now (same contention).
    `clock=time.process_time`: per CPU second of this process (on a machine shared with
    other jobs, the peak of the cores it got; compare with rates timed the same way)."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    dtype = dtype or torch.float32
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = clock()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * size**3 / max(clock() - start, 1e-9))
    return best


def _shape(config):
    d = getattr(config, "hidden_size", None) or config.dim
    inter = getattr(config, "intermediate_size", None) or config.hidden_dim
    layers = getattr(config, "num_hidden_layers", None) or config.n_layers
    return d, inter, layers, config.vocab_size


def forward_flops(config, length: int, reads: int) -> float:
    """Forward FLOPs of one row of `length` tokens whose MLM head is read at `reads` of them:
    every layer but the last at every token; the last layer's keys and values at every
    token, its queries, attention output and feed-forward at the reads; the head (d×d
    transform + d×V decoder) at the reads."""
    d, inter, layers, vocab = _shape(config)
    per_token = 2 * (4 * d * d + 2 * d * inter)  # Q, K, V, O and the two FFN matmuls
    attention = 4 * length * d  # QK^T and AV, per query
    full = length * (per_token + attention)
    last = length * 2 * (2 * d * d) + reads * (2 * (2 * d * d + 2 * d * inter) + attention)
    head = reads * 2 * (d * d + d * vocab)
    return (layers - 1) * full + last + head


def pll_flops(config, lengths) -> float:
    """FLOPs of PLL over texts of `lengths` tokens (with [CLS]/[SEP]): each of a text's
    length − 2 copies is a forward of the whole text read at one position."""
    return float(sum((n - 2) * forward_flops(config, n, 1) for n in lengths))


def train_flops_per_token(config, seq_len: int, read_share: float) -> float:
    """Training FLOPs per input token, forward and backward (3× the forward): blocks of
    `seq_len` tokens whose head is read at `read_share` of them (the masked tokens)."""
    return 3 * forward_flops(config, seq_len, read_share * seq_len) / seq_len
