"""One resolver for `device`, `precision` and `threads`, used by every entry point.

Threads: torch's default (all cores it sees) is several times slower than fewer threads on
a shared machine, so mlmkit uses the cores this process may run on
(`os.sched_getaffinity`), overridable by `threads=` / `--threads` or `MLMKIT_THREADS`.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch

from mlmkit.errors import DeviceError, InvalidArgument

PRECISIONS = ("auto", "fp32", "bf16")
MAX_THREADS = 1024  # far above any machine's cores; larger counts only exhaust the OS


def available_cores() -> int:
    """Cores this process may run on (affinity mask; the CPU count where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int | None = None) -> int:
    """The thread count to use: `threads`, else `$MLMKIT_THREADS`, else the usable cores."""
    if threads is None:
        env = os.environ.get("MLMKIT_THREADS", "").strip()
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise InvalidArgument(f"MLMKIT_THREADS={env!r}: set it to a whole number of "
                                      "threads ≥ 1, or unset it") from None
            if not 1 <= threads <= MAX_THREADS:
                raise InvalidArgument(f"MLMKIT_THREADS={env!r}: set it to a whole number of "
                                      f"threads from 1 to {MAX_THREADS}, or unset it")
            return threads
        return available_cores()
    if isinstance(threads, bool) or not isinstance(threads, int) \
            or not 1 <= threads <= MAX_THREADS:
        raise InvalidArgument(f"threads={threads!r}: use a whole number from 1 to "
                              f"{MAX_THREADS} (--threads), or leave it unset to use the cores "
                              "this process may run on")
    return threads


_asked_threads: int | None = None  # the count last asked for by name in this process


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads; returns the count set. A count asked for by name
    (`threads=`, `--threads`) holds for the rest of the process: a later call with
    `threads=None` keeps it (a CLI command's --threads held only until the first library
    call it made, which reset the default); without one, `resolve_threads`' default."""
    global _asked_threads
    if threads is not None:
        count = _asked_threads = resolve_threads(threads)
    else:
        count = _asked_threads or resolve_threads(None)
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count


@contextlib.contextmanager
def run_settings_kept():
    """Inside: a training run sets process-wide settings as usual (its thread count, maybe
    chosen from the load, for its own evaluations; TF32 matrix products on a GPU). After:
    the count asked for by name, torch's count and the TF32 flags as they were before, so a
    score computed later in the same process is the float32 one (TF32 moves it ~1e-3)."""
    global _asked_threads
    asked, count = _asked_threads, torch.get_num_threads()
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        yield
    finally:
        _asked_threads = asked
        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def available_devices() -> list[str]:
    """The device names this machine has, e.g. ['cpu', 'cuda:0', 'cuda:1']."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        names.append("mps")
    return names


def resolve_device(device=None):
    """A `torch.device` for `device` ('auto'/None: the first GPU if any, else cpu).

    An unknown name or a device this machine lacks is a `DeviceError` that lists the
    devices it has.
    """
    if isinstance(device, torch.device):
        return device
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    have = available_devices()
    try:
        resolved = torch.device(str(device))
    except (RuntimeError, ValueError):
        raise DeviceError(f"device {device!r} is not a device name: use auto or one of "
                          f"{', '.join(have)} (--device)") from None
    if resolved.type == "cuda":
        index = resolved.index or 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise DeviceError(f"device {device!r} is not on this machine: it has "
                              f"{', '.join(have)}; use --device auto or one of those")
    elif resolved.type == "mps" and "mps" not in have:
        raise DeviceError(f"device {device!r} is not on this machine: it has "
                          f"{', '.join(have)}; use --device auto or one of those")
    elif resolved.type not in ("cpu", "cuda", "mps"):
        raise DeviceError(f"device {device!r} is not supported: use auto or one of "
                          f"{', '.join(have)}")
    return resolved


def native_bf16(device) -> bool:
    """Whether `device` multiplies bf16 matrices in hardware (faster than fp32): a CUDA GPU
    with bf16 support, or a CPU with AVX512-BF16 or AMX. Elsewhere bf16 is emulated, slowly."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        capabilities = getattr(torch.cpu, "get_capabilities", dict)()
        return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))
    return False


def resolve_precision(precision: str | None, device, task: str = "inference") -> str:
    """'fp32' or 'bf16'. `auto` (and None) picks the fastest precision that keeps the
    task's numbers: for training, bf16 autocast where `device` runs it natively; for
    inference (scores, probabilities, samples, which people compare across machines), fp32.
    """
    if precision is None:
        precision = "auto"
    if precision not in PRECISIONS:
        raise InvalidArgument(f"precision {precision!r} is not known: use one of "
                              f"{', '.join(PRECISIONS)} (--precision)")
    if precision == "auto":
        return "bf16" if task == "training" and native_bf16(device) else "fp32"
    return precision


def prepare(device=None, precision: str | None = "auto", threads: int | None = None,
            task: str = "inference"):
    """Resolve device and precision and set the thread count: (torch.device, precision)."""
    resolved = resolve_device(device)
    precision = resolve_precision(precision, resolved, task)
    if precision == "bf16" and not native_bf16(resolved) and resolved.type not in _EMULATED:
        _EMULATED.add(resolved.type)  # said once a process: a job may prepare many times
        warnings.warn(f"precision bf16 on {resolved}, which does not multiply bf16 natively: "
                      "it is emulated, slower than fp32 (--precision auto picks fp32 there)",
                      stacklevel=2)
    set_threads(threads)
    return resolved, precision


_EMULATED: set[str] = set()  # device types bf16 was asked on without native support


def autocast(precision: str, device):
    """The autocast context for a resolved precision (a no-op for fp32)."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
