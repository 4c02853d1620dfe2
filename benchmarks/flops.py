"""FLOP models and the measured matmul peak behind every benchmark's MFU line.

MFU = (the FLOPs the task needs) / seconds / (the best FLOP/s of a square matmul measured
on this machine in the same run, same threads, same precision). The FLOPs the task needs
are counted once, the same for mlmkit and its baseline, so their MFU ratio is their speed
ratio; work a side does that the result never reads (padding, the MLM head at unread
positions, the last layer's queries and feed-forward where nothing is read) is not counted.
A matmul of [m, k] × [k, n] is 2·m·k·n FLOPs; norms, activations and softmax are left out.
Training counts 3× the forward (the backward computes input and weight gradients); with
frozen weights (LoRA) 2×. Helpers per task: `pll_flops` (scoring), `forward_flops` /
`forwards_flops` (fill-mask, generation and sampling: one forward per row per call, read
where it may reveal), `train_flops_per_token` (pretraining), `classifier_train_flops`
(fine-tuning), and `mfu` / `mfu_text` for the line every benchmark prints.
"""

from __future__ import annotations

import time


def matmul_peak(dtype=None, size: int = 1024, seconds: float = 2.0, threads: int | None = None,
                clock=time.perf_counter, device: str = "cpu"):
    """Best FLOP/s of a square matmul on this machine, measured now (same contention).
    `clock=time.process_time`: per CPU second of this process (on a machine shared with
    other jobs, the peak of the cores it got; compare with rates timed the same way).
    On a GPU (`device="cuda"`) the clock is the wall clock, synchronised around each round,
    and the matrices are at least 8192² (smaller products stay under a Hopper GPU's peak:
    the MFU of a run would read high)."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    dtype = dtype or torch.float32
    cuda = str(device).startswith("cuda")
    if cuda:
        size, clock = max(size, 8192), time.perf_counter
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b

    def sync():
        if cuda:
            torch.cuda.synchronize()

    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        sync()
        start = clock()
        for _ in range(4):
            a @ b
        sync()
        best = max(best, 4 * 2 * size**3 / max(clock() - start, 1e-9))
    return best


def mfu(flops: float, seconds: float, peak: float) -> float:
    """Model FLOPs utilisation: the task's FLOPs per second over the measured peak."""
    return flops / max(seconds, 1e-12) / peak


def mfu_text(shares: dict, peak: float, clock: str = "wall clock") -> str:
    """The MFU line: `MFU (benchmarks/flops.py; peak P GFLOP/s, CLOCK): a 12.3%, b 4.5%`.
    `shares`: label -> MFU (a fraction), or None where there is nothing to count."""
    parts = [f"{label} " + ("n/a" if v is None else f"{100 * v:.1f}%")
             for label, v in shares.items()]
    return (f"MFU (benchmarks/flops.py; matmul peak {peak / 1e9:.1f} GFLOP/s, {clock}): "
            + ", ".join(parts))


GLU_FAMILIES = ("modernbert", "eurobert", "neobert", "llama")  # FFN in: d × 2·inter


def _shape(config):
    d = getattr(config, "hidden_size", None) or config.dim
    inter = getattr(config, "intermediate_size", None) or config.hidden_dim
    layers = getattr(config, "num_hidden_layers", None) or config.n_layers
    # the FFN's matmuls per token, in units of d·inter: 2 (in, out), 3 with a gated unit
    ffn = 3 if getattr(config, "model_type", "") in GLU_FAMILIES else 2
    return d, inter, layers, config.vocab_size, ffn


def forward_flops(config, length: int, reads: float, head_out: int | None = None) -> float:
    """Forward FLOPs of one row of `length` tokens whose head is read at `reads` of them:
    every layer but the last at every token; the last layer's keys and values at every
    token, its queries, attention output and feed-forward at the reads; the head (d×d
    transform + d×V decoder; `head_out` outputs instead of V, e.g. a classifier's labels)
    at the reads."""
    d, inter, layers, vocab, ffn = _shape(config)
    per_token = 2 * (4 * d * d + ffn * d * inter)  # Q, K, V, O and the FFN matmuls
    attention = 4 * length * d  # QK^T and AV, per query
    full = length * (per_token + attention)
    last = length * 2 * (2 * d * d) + reads * (2 * (2 * d * d + ffn * d * inter) + attention)
    head = reads * 2 * (d * d + d * (vocab if head_out is None else head_out))
    return (layers - 1) * full + last + head


def forwards_flops(config, rows) -> float:
    """FLOPs of many forwards: `rows` is (length, reads) per row per model call, e.g. one
    pair per row per unmasking step (reads: the masked positions the step may reveal)."""
    return float(sum(forward_flops(config, n, r) for n, r in rows))


def classifier_train_flops(config, lengths, labels: int = 2, frozen: bool = False) -> float:
    """Fine-tuning FLOPs of rows of `lengths` tokens (no padding) under a sequence
    classifier read at [CLS] (pooler d×d + d×labels): 3× the forward, 2× with frozen weights
    (LoRA: only input gradients flow back; the adapters' FLOPs are left out)."""
    factor = 2 if frozen else 3
    return float(sum(factor * forward_flops(config, n, 1, head_out=labels) for n in lengths))


def pll_flops(config, lengths) -> float:
    """FLOPs of PLL over texts of `lengths` tokens (with [CLS]/[SEP]): each of a text's
    length − 2 copies is a forward of the whole text read at one position."""
    return float(sum((n - 2) * forward_flops(config, n, 1) for n in lengths))


def train_flops_per_token(config, seq_len: int, read_share: float) -> float:
    """Training FLOPs per input token, forward and backward (3× the forward): blocks of
    `seq_len` tokens whose head is read at `read_share` of them (the masked tokens)."""
    return 3 * forward_flops(config, seq_len, read_share * seq_len) / seq_len


def masking_rate(masking="default", phase_rate=None) -> float:
    """The share of tokens a pretraining run reads (its masking rate), for
    `train_flops_per_token`: a phase's rate (a (start, end) pair: their mean) when given,
    else the run's masking policy (mlmkit's MLM default when "default"); a rate schedule
    counts at its mean start and end where it has them, else 0.3."""
    if phase_rate is not None:
        return float(sum(phase_rate) / len(phase_rate))
    from mlmkit.masking.config import resolve
    from mlmkit.training.objectives.mlm import default_masking

    policy = default_masking() if masking in (None, "default") else masking
    rate = resolve(policy)["rate"] if not isinstance(policy, dict) or "rate" not in policy \
        else policy["rate"]
    if isinstance(rate, (int, float)):
        return float(rate)
    if isinstance(rate, dict) and "start" in rate and "end" in rate:
        return (float(rate["start"]) + float(rate["end"])) / 2
    return 0.3

