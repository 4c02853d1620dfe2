"""The sampler's options: how iterative unmasking (generate, infill) turns masks into tokens.

`mlmkit.generation.options.SamplerOptions` adds the checks and the plan to these fields; the
`generate` and `infill` functions take them as keywords, the commands as flags, the server's
generate and infill requests as JSON fields. Every float has a `range` (low, high): past it
a guidance weight makes the logits overflow (a cfg_scale of 1e300 gave empty text), and no
number is left unbounded, so `SamplerOptions` (the flags' and the keywords' check) and the
request schema (a 422 naming the field) refuse a value outside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlmkit.options import option

SAMPLING, FAST = "Sampling", "Fast sampling"


@dataclass(frozen=True)
class Sampling:
    """Every choice of the unmasking loop (each is a CLI flag and a request field of the same
    name)."""

    steps: int | None = option(
        None, "Sampler steps in all (default: one token per step). confidence/random: at most "
        "one per mask; ancestral: ≤ 10,000.", panel=SAMPLING)
    sampler: Literal["ancestral", "confidence", "random"] = option(
        "confidence", "ancestral (MDLM), confidence (LLaDA) or random.", panel=SAMPLING)
    confidence: Literal["prob", "margin", "entropy"] = option(
        "prob", "Confidence sampler: prob, margin or entropy.", panel=SAMPLING)
    temperature: float = option(
        1.0, "0 to 1e6: 0 = argmax; 1 = the model's distribution; higher is flatter.",
        panel=SAMPLING, range=(0.0, 1e6))
    top_k: int | None = option(None, "Sample among the k likeliest tokens.", panel=SAMPLING)
    top_p: float | None = option(None, "Nucleus sampling mass, in (0, 1].", panel=SAMPLING,
                               range=(0.0, 1.0))
    block_length: int | None = option(
        None, "Semi-autoregressive blocks of this many masks, left to right; in generate it "
        "must divide --length (in infill the last block may be shorter).", panel=SAMPLING)
    cfg_scale: float = option(
        0.0, "Classifier-free guidance weight, 0 to 100 (prompt masking).", panel=SAMPLING,
        range=(0.0, 100.0))
    seed: int = option(
        0, "Seed of every random choice (batch k of the inputs uses seed + k).",
        panel=SAMPLING)
    cache: bool = option(
        True, "Skip the model call when a step revealed nothing (exact).", panel=SAMPLING)
    reveal: Literal["count", "threshold", "factor", "entropy-bound"] = option(
        "count", "Masks revealed per step: count (the fixed --steps schedule), threshold "
        "(every prediction above tau, ≥ 1; Fast-dLLM), factor (Fast-dLLM's factor rule) or "
        "entropy-bound (EB-sampler). Adaptive ones need --sampler confidence.", panel=FAST)
    threshold: float | None = option(
        None, "tau in (0, 1] of --reveal threshold (default 0.9).", panel=FAST,
        range=(0.0, 1.0))
    factor: float | None = option(
        None, "f in (0, 1,000] of --reveal factor (default 1.0).", panel=FAST,
        range=(0.0, 1000.0))
    entropy_bound: float | None = option(
        None, "gamma in [0, 1,000] (nats) of --reveal entropy-bound (default 0.1).",
        panel=FAST, range=(0.0, 1000.0))
    min_gap: int | None = option(
        None, "With an adaptive --reveal: masks revealed in one step lie at least this many "
        "positions apart, the likeliest of each stretch first (default: no spacing).",
        panel=FAST)
    remask: Literal["cap", "rescale", "loop"] | None = option(
        None, "ReMDM remasking of revealed tokens: cap, rescale or loop.", panel=FAST)
    sigma: float | None = option(
        None, "eta in (0, 1] of --remask (defaults: cap 0.04, rescale 0.5, loop 0.1).",
        panel=FAST, range=(0.0, 1.0))
    remask_steps: int | None = option(
        None, "--remask loop: loop steps per block (default: half the block's steps).",
        panel=FAST)
    edit: float | None = option(
        None, "Replace a revealed token when the model gives another more than this "
        "probability, in (0, 1).", panel=FAST, range=(0.0, 1.0))
    block_cache: bool = option(
        False, "Reuse keys and values outside the active block (approximate; needs "
        "--block-length; BERT, RoBERTa, ModernBERT).", panel=FAST)
    max_steps: int | None = option(
        None, "Cap on all steps with --remask/--edit (default: twice the planned steps).",
        panel=FAST)
