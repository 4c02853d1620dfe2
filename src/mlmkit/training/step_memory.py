"""The largest micro-batch that fits, measured: trial forward and backward passes at a few
sizes, their peak memory read from the device, the rest fitted by a line.

An estimate from the model's shape (`mlmkit.pretraining.guards`) misses what the kernels
actually keep (SDPA's workspace, the compiled code's buffers, the allocator's rounding);
a measurement does not. Peak memory grows linearly with the rows of a micro-batch (every
activation has a row dimension), so two small trials give the fixed part and the cost of
a row; the largest size the line allows within the budget is then tried itself, and a
smaller one taken while the trial says it does not fit (or runs out of memory).

Gauges read a trial's peak: `CudaGauge` from the caching allocator
(`torch.cuda.max_memory_allocated`, within the device's free memory and what the process
already holds, less a safety margin for fragmentation); `CpuGauge` from the process's
peak resident memory (Linux `VmHWM`, reset through `/proc/self/clear_refs`), within the
host's available memory. Where neither can measure, `gauge_for` says why, and the caller
keeps the micro-batch it was given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from mlmkit.errors import InvalidArgument

SAFETY_MARGIN = 0.15
"""The share of the memory budget kept free: the allocator's fragmentation, the growth of
a later step's buffers (a longer masked-token list), another library's workspace."""


class CudaGauge:
    """The peak bytes the caching allocator hands out during a trial, on one GPU."""

    name = "GPU memory"

    def __init__(self, device: torch.device, margin: float = SAFETY_MARGIN):
        self.device, self.margin = device, margin

    def budget(self) -> int:
        """What the process may hold at its peak: the free memory and what its allocator
        already reserved, less the margin."""
        free, _ = torch.cuda.mem_get_info(self.device)
        return int((free + torch.cuda.memory_reserved(self.device)) * (1 - self.margin))

    def peak(self, trial: Callable[[], None]) -> int | None:
        """The trial's peak allocated bytes (weights included), or None when it ran out of
        memory (its tensors are freed and the cache emptied)."""
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        try:
            trial()
            torch.cuda.synchronize(self.device)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            return None
        return int(torch.cuda.max_memory_allocated(self.device))


class CpuGauge:
    """The process's peak resident memory during a trial (Linux)."""

    name = "host memory"
    STATUS, CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")

    def __init__(self, margin: float = SAFETY_MARGIN):
        self.margin = margin

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this process cannot measure its peak memory, or None when it can."""
        if _status_bytes(cls.STATUS, "VmHWM") is None:
            return f"{cls.STATUS} has no VmHWM line (not Linux?)"
        try:
            cls.CLEAR.write_text("5")
        except OSError as error:
            return f"{cls.CLEAR} cannot be written ({error.strerror})"
        return None

    def budget(self) -> int:
        available = _status_bytes(Path("/proc/meminfo"), "MemAvailable") or 0
        resident = _status_bytes(self.STATUS, "VmRSS") or 0
        return int((available + resident) * (1 - self.margin))

    def peak(self, trial: Callable[[], None]) -> int | None:
        self.CLEAR.write_text("5")  # the peak restarts from the resident memory now
        try:
            trial()
        except MemoryError:
            return None
        return _status_bytes(self.STATUS, "VmHWM")


def _status_bytes(path: Path, key: str) -> int | None:
    """A `key: N kB` line of a /proc file, in bytes."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def gauge_for(device: torch.device) -> tuple[CudaGauge | CpuGauge | None, str | None]:
    """The gauge of `device`, or None and why it cannot measure there."""
    if device.type == "cuda":
        return CudaGauge(device), None
    if device.type == "cpu":
        why = CpuGauge.unavailable()
        return (None, why) if why else (CpuGauge(), None)
    return None, f"no memory gauge for {device.type} devices"


@dataclass
class Fit:
    """The chosen micro-batch and the figures it was chosen from."""

    rows: int
    peak: int  # the measured peak bytes of a trial of `rows` rows
    budget: int  # what the peak, with `reserve`, had to stay within
    reserve: int  # bytes the trials do not hold but a step does (optimizer state)
    trials: dict[int, int | None]  # rows -> measured peak (None: out of memory)


def largest_micro_batch(candidates: list[int], peak: Callable[[int], int | None],
                        budget: int, reserve: int = 0) -> Fit:
    """The largest of `candidates` (row counts, e.g. the divisors of a step's rows) whose
    trial's `peak(rows)`, plus `reserve`, stays within `budget`.

    The two smallest candidates are measured, the line through them predicts the rest; the
    largest predicted to fit is measured, and smaller ones in turn while a measurement
    says it does not fit. Raises `InvalidArgument` when even the smallest does not."""
    candidates = sorted(set(candidates))
    trials: dict[int, int | None] = {}

    def fits(rows: int) -> bool:
        if rows not in trials:
            trials[rows] = peak(rows)
        return trials[rows] is not None and trials[rows] + reserve <= budget

    smallest = candidates[0]
    if not fits(smallest):
        measured = trials[smallest]
        need = "ran out of memory" if measured is None else \
            f"needs {measured + reserve:,} bytes"
        raise InvalidArgument(f"--batch-tokens auto: a micro-batch of {smallest} block(s) "
                              f"{need}, more than the {budget:,} bytes available: lower "
                              "--seq-len or use a smaller model")
    chosen = smallest
    if len(candidates) > 1 and fits(candidates[1]):
        chosen = candidates[1]
        first, second = trials[smallest], trials[candidates[1]]
        per_row = max((second - first) / (candidates[1] - smallest), 1.0)
        fixed = first - per_row * smallest
        predicted = [r for r in candidates[2:] if fixed + per_row * r + reserve <= budget]
        for rows in reversed(predicted):
            if fits(rows):
                chosen = rows
                break
    return Fit(rows=chosen, peak=trials[chosen], budget=budget, reserve=reserve,
               trials=trials)
