"""`--batch-tokens auto`: the run's micro-batch measured to fit its device, and the
gradient accumulation that keeps the configured step.

Before the first step, trial forward and backward passes of the run's own objective on
the first training blocks measure the peak memory of a few micro-batch sizes
(`mlmkit.training.step_memory`); the largest size that divides this process's rows of a
step and fits is kept, and `--grad-accum` becomes the step's rows over it. The step (its
blocks, their masks, the loss's normalisation by the step's totals) does not change, so
neither does what the run computes, beyond the order of float additions.

The trials leave no trace: gradients are dropped, the random state is restored, and so is
the objective's own state (a loss-based masking policy learns from every loss). The
chosen micro-batch goes into the run's config (`grad_accum`) and state (`micro_batch`),
so a resumed run uses it without measuring again, on any device.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from mlmkit.core.progress import status
from mlmkit.errors import InvalidArgument
from mlmkit.pretraining.config import AUTO, PretrainConfig
from mlmkit.pretraining.data import prepare_rows
from mlmkit.pretraining.guards import ROW_TENSOR_BYTES, human_bytes
from mlmkit.training.step_memory import Fit, gauge_for, largest_micro_batch

OPTIMIZER_COPIES = 3
"""Tensors per trained parameter a step holds that a trial does not: its gradient kept
between micro-steps and AdamW's two moments (float32, like the weights)."""


def check_auto_batch(config: PretrainConfig, world_size: int) -> None:
    """What `--batch-tokens auto` cannot measure for, refused before any work."""
    if config.batch_tokens != AUTO:
        return
    if config.batch_warmup_tokens:
        raise InvalidArgument("--batch-tokens auto with --batch-warmup-tokens: the warm-up's "
                              "batch sizes round to --grad-accum, which the measurement would "
                              "choose, so results would depend on the machine; give "
                              "--batch-tokens N or --grad-accum N")
    longest = max((int(phase.get("seq_len", config.seq_len)) for phase in config.phases or []
                   if isinstance(phase, dict)), default=config.seq_len)
    if longest > config.seq_len:
        raise InvalidArgument(f"--batch-tokens auto measures blocks of --seq-len "
                              f"{config.seq_len}, and a phase trains on blocks of {longest} "
                              "tokens: give --batch-tokens N that fits the longest phase")
    if config.parallel == "fsdp" and world_size > 1:
        raise InvalidArgument("--batch-tokens auto with --parallel fsdp: the trial steps would "
                              "gather weights over processes that may measure differently; "
                              "measure on one process and give --batch-tokens N")


def micro_batch_candidates(config: PretrainConfig, world_size: int) -> list[int]:
    """The micro-batch sizes (rows of one process) that keep the step: divisors of this
    process's rows of a step whose accumulation is at least the configured --grad-accum."""
    rows = config.batch_size // world_size
    return [d for d in range(1, rows + 1)
            if rows % d == 0 and rows // d >= config.grad_accum
            and config.batch_size % (rows // d * world_size) == 0]


def trial_step(objective, runtime, data, config: PretrainConfig):
    """A function of a row count that runs one forward and backward pass of the run's
    objective on that many of the first training blocks, then drops the gradients."""
    def run(rows: int) -> None:
        indices = np.arange(rows) % len(data.train)
        prepared, _ = prepare_rows(objective, data.train, indices, np.arange(rows), 0,
                                   config.seed, stream=config.mask_stream,
                                   device=runtime.device)
        tensors = prepared.rows(torch.arange(rows), runtime.device)
        try:
            with runtime.autocast():
                out = objective.loss(tensors, prepared.counts)
            out.loss.backward()
        finally:
            del tensors, prepared
            for module in objective.modules.values():
                module.zero_grad(set_to_none=True)
    return run


def measure_micro_batch(config: PretrainConfig, runtime, objective, data, gauge=None,
                        peak=None) -> Fit | None:
    """The largest micro-batch that fits (`gauge`: the device's, `peak`: a row count ->
    peak bytes, both for tests), or None when the device cannot be measured (said on
    standard error)."""
    if gauge is None:
        gauge, why = gauge_for(runtime.device)
        if gauge is None:
            if runtime.is_main:
                status(f"--batch-tokens auto: cannot measure memory here ({why}): "
                       f"--grad-accum stays {config.grad_accum}")
            return None
    parameters = sum(p.numel() * p.element_size() for m in objective.modules.values()
                     for p in m.parameters() if p.requires_grad)
    reserve = (OPTIMIZER_COPIES * parameters
               + config.batch_size // runtime.world_size * config.seq_len * ROW_TENSOR_BYTES)
    trial = trial_step(objective, runtime, data, config)
    peak = peak or (lambda rows: gauge.peak(lambda: trial(rows)))
    saved = copy.deepcopy(objective.state_dict())
    devices = [runtime.device] if runtime.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        try:
            return largest_micro_batch(micro_batch_candidates(config, runtime.world_size),
                                       peak, gauge.budget(), reserve)
        finally:
            objective.load_state_dict(saved)


def fit_micro_batch(config: PretrainConfig, runtime, objective, data,
                    saved_state: dict | None, gauge=None, peak=None
                    ) -> tuple[PretrainConfig, bool]:
    """The config whose --grad-accum gives the measured micro-batch (`--batch-tokens
    auto`; a resumed run's measured one when its state holds it), and whether the
    micro-batch was measured (then the estimate of `guards.check_step_memory`, which
    counts attention scores that fused kernels never store, is not asked)."""
    if config.batch_tokens != AUTO:
        return config, False
    stored = (saved_state or {}).get("micro_batch")
    if stored is not None:  # resumed: the micro-batch the run measured when it started
        if runtime.is_main:
            status(f"--batch-tokens auto: the micro-batch measured when the run started, "
                   f"{stored['rows']} block(s), --grad-accum {stored['grad_accum']}")
        return config.replace(grad_accum=stored["grad_accum"]), True
    fit = measure_micro_batch(config, runtime, objective, data, gauge, peak)
    if fit is None:
        return config, False
    rows = config.batch_size // runtime.world_size
    # every process takes the smallest micro-batch any of them measured
    accum = int(runtime.max(float(rows // fit.rows)))
    if runtime.is_main:
        status(f"--batch-tokens auto: a micro-batch of {rows // accum} block(s) "
               f"({rows // accum * config.seq_len:,} tokens) per process, --grad-accum "
               f"{accum} (peak {human_bytes(fit.peak)} measured at {fit.rows} block(s), "
               f"with {human_bytes(fit.reserve)} for gradients and optimizer state, within "
               f"{human_bytes(fit.budget)})")
    return config.replace(grad_accum=accum), True
