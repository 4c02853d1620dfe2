"""One process-group set-up for torchrun, used by DDP training and sharded scoring.

    group = init(device)            # reads RANK / WORLD_SIZE / LOCAL_RANK; joins the group
    if group.is_main: ...           # rank 0 writes, logs, merges
    group.barrier(); group.finish()

Without torchrun (WORLD_SIZE unset or 1) `init` returns the single-process group (rank 0
of 1) and starts nothing, so callers need no branch of their own. With torchrun, each
process joins with nccl on a GPU (one GPU per local rank) or gloo on a CPU, and a timeout
(`MLMKIT_DIST_TIMEOUT` seconds, default 1800), so a crashed rank ends the run instead of
hanging it.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from mlmkit.core.devices import resolve_device
from mlmkit.errors import DeviceError, InvalidArgument

DEFAULT_TIMEOUT_S = 1800.0


def _env_int(name: str, default: int, minimum: int) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"environment variable {name}={text!r} is not a whole number: "
                              "launch with torchrun, or unset it") from None
    if value < minimum:
        raise InvalidArgument(f"environment variable {name}={text!r} must be at least "
                              f"{minimum}: launch with torchrun, or unset it")
    return value


def timeout_seconds() -> float:
    """How long a collective may wait for the other ranks (`MLMKIT_DIST_TIMEOUT`)."""
    text = os.environ.get("MLMKIT_DIST_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise InvalidArgument(f"MLMKIT_DIST_TIMEOUT={text!r}: give a number of seconds > 0")
    return value


def world_size() -> int:
    """WORLD_SIZE of torchrun's environment (1 when not launched by torchrun)."""
    return _env_int("WORLD_SIZE", 1, 1)


@dataclass(frozen=True)
class ProcessGroup:
    """This process's place in a torchrun job (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str | None = None  # nccl or gloo; None for a single process

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def barrier(self) -> None:
        """Wait for every rank (a no-op for a single process)."""
        if self.distributed:
            if dist.is_initialized():
                dist.barrier()

    def finish(self) -> None:
        """Leave the process group (a no-op for a single process or when already left)."""
        if self.distributed:
            if dist.is_initialized():
                dist.destroy_process_group()


def rank_device(device=None, local_rank: int = 0, world: int = 1):
    """The torch.device of this rank for `device` (auto/None/cpu/cuda/cuda:N): under torchrun
    with GPUs, `auto` and `cuda` mean this rank's own GPU, `cuda:LOCAL_RANK`."""
    if world > 1 and (device in (None, "auto", "cuda")) and torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise DeviceError(f"LOCAL_RANK {local_rank} but this machine has "
                              f"{torch.cuda.device_count()} GPU(s): start torchrun with "
                              "--nproc_per_node at most the number of GPUs")
        return torch.device("cuda", local_rank)
    return resolve_device(device)


def init(device=None, timeout_s: float | None = None) -> tuple[ProcessGroup, object]:
    """Join torchrun's process group; returns (group, this rank's torch.device).

    Single process: (ProcessGroup(), the resolved device), nothing started. Under torchrun:
    nccl when this rank runs on a GPU (set as the current CUDA device), else gloo.
    """
    world = world_size()
    rank = _env_int("RANK", 0, 0)
    local_rank = _env_int("LOCAL_RANK", 0, 0)
    resolved = rank_device(device, local_rank, world)
    if world <= 1:
        return ProcessGroup(), resolved
    if rank >= world:
        raise InvalidArgument(f"RANK={rank} is not below WORLD_SIZE={world}: launch with "
                              "torchrun")
    backend = "nccl" if resolved.type == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(resolved)
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=timeout_s or timeout_seconds())
        extra = {"device_id": resolved} if backend == "nccl" else {}
        dist.init_process_group(backend=backend, rank=rank, world_size=world,
                                timeout=timeout, **extra)
    return ProcessGroup(rank=rank, world=world, local_rank=local_rank, backend=backend), \
        resolved


__all__ = ["DEFAULT_TIMEOUT_S", "ProcessGroup", "init", "rank_device", "timeout_seconds",
           "world_size"]
