"""How a run executes: device, precision, threads and process rank, kept out of the loop.

The loop asks the runtime for an autocast context, whether it is the main process and
how to average a number over processes. This module is world-size 1; a distributed
runtime (torchrun) replaces `Runtime` by one with the same methods.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from mlmkit.errors import MlmkitError
from mlmkit.train.config import PRECISIONS


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
        if self.precision == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the loop calls (a DDP wrapper in a distributed runtime)."""
        return model

    def wrap_objective(self, objective) -> None:
        """Route the objective's loss through DDP (distributed runtime only; issue 6)."""
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


def native_bf16(device: torch.device) -> bool:
    """Whether `device` multiplies bf16 matrices in hardware (faster than fp32): a CUDA GPU
    with bf16 support, or a CPU with AVX512-BF16 or AMX. Elsewhere bf16 is emulated, slowly."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", dict)()
        return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    return False


def resolve_precision(precision: str, device: torch.device) -> str:
    """fp32 or bf16: `auto` is bf16 where the device runs it natively, else fp32."""
    if precision not in PRECISIONS:
        raise MlmkitError(f"--precision {precision!r}: use one of {list(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def build_runtime(device: str = "auto", precision: str = "fp32",
                  threads: int | None = None) -> Runtime:
    """The single-process runtime for `device` (auto: cuda when available)."""
    if device == "auto":
        resolved = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif device in ("cpu", "cuda") or device.startswith("cuda:"):
        resolved = torch.device(device)
        if resolved.type == "cuda" and not torch.cuda.is_available():
            raise MlmkitError(f"--device {device}: CUDA is not available on this machine; "
                              "use --device cpu or auto")
    else:
        raise MlmkitError(f"--device {device!r}: use auto, cpu or cuda")
    precision = resolve_precision(precision, resolved)
    if threads:
        torch.set_num_threads(threads)
    if resolved.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return Runtime(device=resolved, precision=precision)
