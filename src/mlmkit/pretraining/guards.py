"""A run's sizes and schedule checked against its data, its machine and its clock, so that
hours are not spent on a run that cannot be what was meant.

Each check runs before the first step (`build_run`) or right after the first steps (the
estimated time to finish), and says what to change:

- a batch larger than the training data repeats blocks inside each step (a warning);
- a step whose batch, or whose micro-batch, needs more memory than the machine has
  available is refused (the estimate: the step's rows as tensors, the model's weights,
  gradients and optimizer state, and one micro-batch's activations);
- a schedule that keeps the learning rate below 1e-8 for more than a few steps (a warm-up
  given as a share of a huge budget) is said, with the steps it lasts;
- after the first steps, the time to finish at the measured speed is printed, and a warning
  comes when it exceeds the run's `--time-bound`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.training.schedule import Schedule

TINY_LR = 1e-8
"""A learning rate below which AdamW's updates are lost in float32 rounding of the weights."""

TINY_LR_STEPS = 10
"""Steps at a tiny learning rate said to be too many (a warm-up's first step or two is not)."""

ROW_TENSOR_BYTES = 6 * 8
"""Bytes per token of a prepared batch: ids, labels, attention mask and masks, int64 and
bool tensors with their staging copies (an upper bound)."""


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1024
    return f"{n:,.1f} PB"


def human_duration(seconds: float) -> str:
    """`45 s`, `12 min`, `3.2 h`, `4.1 days`, `3,170 years`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:,.1f} days"
    return f"{seconds / (365.25 * 86400):,.0f} years"


# ---- the batch against the data


def batch_repeats_warning(batch_size: int, n_blocks: int, seq_len: int) -> str | None:
    """A warning when one step's batch holds more blocks than the training data has: each
    step then reads every block several times (a smaller batch learns as much, faster)."""
    if batch_size <= n_blocks:
        return None
    return (f"--batch-size {batch_size:,} is larger than the training data ({n_blocks:,} "
            f"blocks of {seq_len} tokens): each step reads every block about "
            f"{batch_size / n_blocks:,.0f} times; use --batch-size {n_blocks:,} or less, or "
            "give more data")


# ---- the step against the memory


def available_memory(device: torch.device) -> int | None:
    """Bytes this process can still allocate on `device`: free GPU memory, or the host's
    available memory (Linux /proc/meminfo); None where it cannot be read."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type != "cpu":
        return None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def activation_bytes_per_token(model_config, seq_len: int, bytes_per_value: int,
                               checkpointed: bool = False) -> float:
    """Activations kept for the backward pass, per token: per layer about 17 hidden-sized
    values and 2.5 attention scores per head and key (Korthikanti et al. 2022, without
    recomputation), plus the input embeddings; with activation checkpointing, each layer's
    input and one layer's full set."""
    hidden = getattr(model_config, "hidden_size", None) or getattr(model_config, "dim", 256)
    layers = (getattr(model_config, "num_hidden_layers", None)
              or getattr(model_config, "n_layers", 4))
    heads = (getattr(model_config, "num_attention_heads", None)
             or getattr(model_config, "n_heads", 4))
    per_layer = 17 * hidden + 2.5 * heads * seq_len
    if checkpointed:
        return bytes_per_value * (layers * hidden + per_layer + 2 * hidden)
    return bytes_per_value * (layers * per_layer + 2 * hidden)


def step_memory(config, model_configs, parameters: int, micro_rows: int, step_rows: int,
                precision: str, shards: int = 1) -> dict[str, float]:
    """The estimated bytes of one training step on one process, by part (`model_configs`:
    the configs of the models trained together, e.g. ELECTRA's generator and discriminator;
    `shards`: the processes FSDP spreads the weights and optimizer state over)."""
    value = 2 if precision == "bf16" else 4
    per_token = sum(activation_bytes_per_token(c, config.seq_len, value,
                                               config.activation_checkpointing)
                    for c in model_configs)
    return {
        "batch": step_rows * config.seq_len * ROW_TENSOR_BYTES,
        # fp32 weights, gradients and two AdamW moments
        "weights": parameters * 16 / shards,
        "activations": micro_rows * config.seq_len * per_token,
    }


def check_step_memory(config, model_configs, parameters: int, micro_rows: int,
                      step_rows: int, precision: str, device: torch.device,
                      available: int | None = None, shards: int = 1) -> None:
    """Refuse a step whose estimated memory exceeds what `device` has available, naming
    the part that does not fit and the flag that shrinks it."""
    available = available_memory(device) if available is None else available
    if available is None:
        return
    parts = step_memory(config, model_configs, parameters, micro_rows, step_rows, precision,
                        shards)
    needed = sum(parts.values())
    if needed <= available:
        return
    where = f"{device.type} memory available ({human_bytes(available)})"
    if parts["batch"] + parts["weights"] > available:
        raise InvalidArgument(
            f"--batch-size {step_rows:,} (× --seq-len {config.seq_len}) needs about "
            f"{human_bytes(needed)} for one step, more than the {where}: lower --batch-size")
    rows = max(1, int((available - parts["batch"] - parts["weights"])
                      / (parts["activations"] / micro_rows)))
    tokens = 2 ** int(math.log2(max(rows * config.seq_len, config.seq_len)))
    raise InvalidArgument(
        f"a micro-batch of {micro_rows:,} blocks × {config.seq_len} tokens needs about "
        f"{human_bytes(needed)} for the model's activations, weights and batch, more than "
        f"the {where}: bound the micro-batch with --batch-tokens {max(tokens, config.seq_len)}"
        " (it raises --grad-accum; the step and its result stay), or lower --batch-size")


# ---- the schedule


def steps_of_budget(config) -> int | None:
    """The run's length in steps when its budget says (steps, or tokens of full blocks)."""
    counts = [config.steps] if config.steps else []
    if config.tokens:
        counts.append(math.ceil(config.tokens / (config.batch_size * config.seq_len)))
    return min(counts) if counts else None


def tiny_lr_steps(config, schedule: Schedule, total_steps: int) -> int:
    """How many of the first steps train at a learning rate below `TINY_LR` (the start of
    the warm-up; the whole run when even the peak is below it)."""
    def tiny(step: int) -> bool:
        return config.lr * schedule.factor(step / total_steps) < TINY_LR

    peak = min(total_steps, math.ceil(schedule.warmup * total_steps))
    if tiny(peak):
        return total_steps
    if not tiny(0):
        return 0
    low, high = 0, peak  # tiny(low) holds, tiny(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if tiny(middle) else (low, middle)
    return high


def tiny_lr_warning(config, schedule: Schedule) -> str | None:
    """A warning when the learning rate stays below 1e-8 for more than a few steps at the
    start of the run (a warm-up given as a share of a very long budget)."""
    if config.phases is not None:
        return None  # phases give their own learning-rate pieces
    total = steps_of_budget(config)
    if not total:
        return None
    count = tiny_lr_steps(config, schedule, total)
    if count <= TINY_LR_STEPS:
        return None
    warmup = (f"--warmup {config.warmup:g} is {round(schedule.warmup * total):,} steps of "
              f"{total:,}" if config.warmup < 1 else f"--warmup {config.warmup:g}")
    return (f"the learning rate stays below {TINY_LR:g} for the first {count:,} steps "
            f"({warmup}): the weights barely move; give --warmup in steps (e.g. --warmup "
            f"{min(1000, max(1, total // 20))}) or a smaller budget")


# ---- the clock


def time_to_finish(done: float, elapsed: float, left: float) -> float | None:
    """Seconds to train the `left` share of the budget when the `done` share took
    `elapsed` seconds (None before any progress)."""
    if done <= 0 or elapsed <= 0:
        return None
    return elapsed * left / done


def eta_lines(done: float, elapsed: float, bound: float | None, step: int, *, left: float
              ) -> tuple[str | None, str | None]:
    """(the estimate line, a warning when it exceeds `bound` seconds, else None)."""
    left = time_to_finish(done, elapsed, left)
    if left is None:
        return None, None
    line = (f"estimated time to finish: {human_duration(left)} (at the speed of the first "
            f"{step:,} step(s))")
    if bound is None or left <= bound:
        return line, None
    return line, (f"at the measured speed this run needs {human_duration(left)} more, beyond "
                  f"--time-bound {human_duration(bound)}: lower --steps/--tokens, or stop it "
                  "(Ctrl-C saves the state; --resume continues it)")
