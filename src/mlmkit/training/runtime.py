"""How a run executes: device, precision, threads and process rank, kept out of the loop.

The loop asks the runtime for an autocast context, whether it is the main process and
how to average a number over processes. This module is world-size 1; a distributed
runtime (torchrun) replaces `Runtime` by one with the same methods.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass

import torch

from mlmkit.core.devices import autocast, available_cores, prepare, resolve_threads
from mlmkit.core.libc import glibc as _glibc


@dataclass
class Runtime:
    """Device, precision and rank of this process."""

    device: torch.device
    precision: str = "fp32"
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.precision == "bf16" else None

    def autocast(self):
        """Mixed precision for the forward pass (a no-op in fp32)."""
        return autocast(self.precision, self.device)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the loop calls (a DDP wrapper in a distributed runtime)."""
        return model

    def wrap_objective(self, objective) -> None:
        """Route the objective's loss through DDP (distributed runtime only; one process has nothing to wrap)."""
        return None

    def no_sync(self, model: torch.nn.Module, last_micro_step: bool):
        """Skip gradient synchronisation on all but the last micro-step (DDP only)."""
        return contextlib.nullcontext()

    def mean(self, value: float) -> float:
        """The mean of `value` over processes."""
        return value

    def sum(self, value: float) -> float:
        return value

    def max(self, value: float) -> float:
        """The largest `value` over processes (e.g. step time, so time budgets agree)."""
        return value

    def any(self, flag: bool) -> bool:
        """Whether any process has `flag` (e.g. a stop signal), so all stop together."""
        return flag

    def barrier(self) -> None:
        return None

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def compile_layers_on(config, device: torch.device, compiler_ready: bool | None = None
                      ) -> bool:
    """Whether a run compiles its encoder layers (`--compile-layers`): as asked, else (None,
    the default) on a GPU that inductor compiles for (`compiler_ready`, by default
    `inductor_ready(device)`) unless the whole loss is compiled (`--compile`). On a GPU the
    compiled layers fuse the elementwise work between the matmuls that eager mode runs as
    separate kernels; on a CPU compiling costs minutes of a short run for little gain."""
    asked = getattr(config, "compile_layers", False)
    if asked is not None:
        return bool(asked)
    device = torch.device(device)
    if device.type != "cuda" or getattr(config, "compile", False):
        return False
    return inductor_ready(device) if compiler_ready is None else compiler_ready


def inductor_ready(device: torch.device) -> bool:
    """Whether torch.compile's default backend builds kernels for this GPU: triton
    installed and a device it supports (compute capability 7.0 or newer)."""
    return importlib.util.find_spec("triton") is not None and \
        torch.cuda.get_device_capability(device) >= (7, 0)


CUDA_GRAPHS = {"triton.cudagraphs": True, "triton.cudagraph_skip_dynamic_graphs": True}
"""torch.compile's mode "reduce-overhead" (its one option), and no graphs for code compiled
for dynamic shapes: the training step's static shapes get a graph each, while evaluation
and pseudo-perplexity scoring (a new length per batch) run their compiled code without
recording a graph per length."""


def compile_mode(config) -> dict:
    """torch.compile's keywords for a run's compiled regions: CUDA graphs with
    `--cuda-graphs` (`CUDA_GRAPHS`), else the default mode."""
    return {"options": dict(CUDA_GRAPHS)} if getattr(config, "cuda_graphs", False) else {}


def training_threads(threads: int | None = None) -> int | None:
    """Threads for a training run: `threads` or `$MLMKIT_THREADS` when given; else the usable
    cores (`os.sched_getaffinity`) less those other processes keep busy (the 1-minute load
    average), at least 1: threads that wait on cores other processes hold wait on each
    other at every synchronised op, so fewer threads than cores train faster there."""
    if threads is not None or os.environ.get("MLMKIT_THREADS", "").strip():
        return resolve_threads(threads)
    cores = available_cores()
    try:
        busy = int(round(os.getloadavg()[0]))
    except (AttributeError, OSError):
        busy = 0
    return max(1, cores - busy)


def threads_chosen_by_load(threads: int | None = None) -> bool:
    """Whether `training_threads` picks the count from the load average (no count given)."""
    return threads is None and not os.environ.get("MLMKIT_THREADS", "").strip()


def build_runtime(device: str = "auto", precision: str = "auto",
                  threads: int | None = None) -> Runtime:
    """The single-process runtime: device, precision and threads from the one resolver
    (`mlmkit.core.devices.prepare`, task "training": auto is bf16 where native), with
    `training_threads` as the thread count."""
    resolved, precision = prepare(device, precision, training_threads(threads),
                                  task="training")
    if resolved.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return Runtime(device=resolved, precision=precision)


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
# what a PyTorch process settles at under glibc's dynamic thresholds: blocks up to 32 MiB
# (DEFAULT_MMAP_THRESHOLD_MAX) from the heap, larger ones mapped; the heap top trimmed
# beyond twice that
_SETTLED = {_M_MMAP_THRESHOLD: 32 << 20, _M_TRIM_THRESHOLD: 64 << 20, _M_MMAP_MAX: 65536}


@contextlib.contextmanager
def retained_heap(device: torch.device):
    """Keep freed memory in the process's heap while training on a CPU (glibc only).

    A training step frees and re-allocates the same large tensors every step (the
    logits at the masked positions, activations, their gradients). glibc serves blocks
    above 32 MiB with a fresh `mmap` and unmaps them on free, and trims the heap top, so
    each step touched ~140 MB of new pages: 36,000 page faults a step on the default
    model (the kernel zeroing every page), about 0.13 s of system time a step. Here no
    block is mapped on its own and the heap is never trimmed, so a step reuses the last
    step's pages: same values, fewer faults. On exit the heap is trimmed and glibc's
    settled thresholds restored (`_SETTLED`). Yields whether it applied;
    `MLMKIT_RETAIN_HEAP=0` turns it off.
    """
    libc = _glibc() if device.type == "cpu" else None
    if libc is None or os.environ.get("MLMKIT_RETAIN_HEAP", "1").strip() == "0":
        yield False
        return
    libc.mallopt(_M_MMAP_MAX, 0)  # every block from the heap, none mapped on its own
    libc.mallopt(_M_TRIM_THRESHOLD, -1)  # never hand the heap top back between steps
    try:
        yield True
    finally:
        for parameter, value in _SETTLED.items():
            libc.mallopt(parameter, value)
        libc.malloc_trim(0)  # the freed pages go back to the system
