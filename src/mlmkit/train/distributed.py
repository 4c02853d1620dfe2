"""Data-parallel pretraining under torchrun: DistributedDataParallel, gloo on CPU, nccl on GPU.

    torchrun --nproc_per_node 2 -m mlmkit pretrain --model mini --batch-size 64

`build_runtime_from_env` returns the single-process `Runtime` unless torchrun's environment
(WORLD_SIZE > 1) says otherwise; then it joins the process group and returns a
`DistributedRuntime`, which the loop uses through the same methods.

How the work is split (see `mlmkit.objectives`): every process corrupts the same global
batch of a step, deterministically from (seed, step), and trains on its own rows of it
(rows rank, rank + W, ...), micro-batch by micro-batch. The objective divides its loss by
the step's global counts, so gradients are *summed* over processes (a comm hook replaces
DDP's averaging) and equal those of the whole batch on one process. Gradients are only
synchronised on the last micro-step (`no_sync` before). Only rank 0 logs, evaluates and
writes checkpoints; the training state does not depend on the world size, so a run
resumes on any number of processes that divides the (unchanged) global batch.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from mlmkit.errors import MlmkitError
from mlmkit.objectives import LossOutput
from mlmkit.train.runtime import Runtime, build_runtime

DEFAULT_TIMEOUT_S = 1800.0


def torchrun_world_size() -> int:
    """WORLD_SIZE from torchrun's environment (1 when not launched by torchrun)."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        return int(value)
    except ValueError as error:
        raise MlmkitError(f"environment variable WORLD_SIZE={value!r} is not a number") \
            from error


def _sum_gradients(process_group, bucket):
    """DDP comm hook: all-reduce SUM (not mean), since losses are divided by global counts."""
    group = process_group if process_group is not None else dist.group.WORLD
    work = dist.all_reduce(bucket.buffer(), group=group, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])


class ObjectiveLoss(torch.nn.Module):
    """An objective's loss as one module's forward, so that DDP sees every trainable part
    (objectives call their models' submodules directly, e.g. the encoder and head
    separately, which DDP would not notice)."""

    def __init__(self, objective):
        super().__init__()
        self.parts = torch.nn.ModuleDict(objective.modules)
        self.compute = objective.loss

    def forward(self, tensors: dict, totals: dict):
        out = self.compute(tensors, totals)
        return out.loss, out.metrics


@dataclass
class DistributedRuntime(Runtime):
    """A process of a torchrun job; the process group is initialised by the builder."""

    local_rank: int = 0
    _wrapped: dict = field(default_factory=dict, repr=False)

    def wrap_objective(self, objective) -> None:
        """Route `objective.loss` through a DistributedDataParallel module."""
        module = ObjectiveLoss(objective)
        ddp = torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[self.device.index] if self.device.type == "cuda" else None,
            forward_sync_buffers=False)  # no buffers change during training
        ddp.register_comm_hook(None, _sum_gradients)
        self._wrapped[id(objective)] = ddp

        def loss(tensors, totals) -> LossOutput:
            value, metrics = ddp(tensors, totals)
            return LossOutput(loss=value, metrics=metrics)

        objective.loss = loss

    def no_sync(self, model, last_micro_step: bool):
        ddp = self._wrapped.get(id(model))
        if ddp is None or last_micro_step:
            return contextlib.nullcontext()
        return ddp.no_sync()

    def _reduce(self, value: float, op) -> float:
        device = self.device if dist.get_backend() == "nccl" else torch.device("cpu")
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=op)
        return float(tensor.item())

    def sum(self, value: float) -> float:
        return self._reduce(value, dist.ReduceOp.SUM)

    def mean(self, value: float) -> float:
        return self.sum(value) / self.world_size

    def max(self, value: float) -> float:
        return self._reduce(value, dist.ReduceOp.MAX)

    def any(self, flag: bool) -> bool:
        return self.max(1.0 if flag else 0.0) > 0

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def build_distributed_runtime(device: str = "auto", precision: str = "fp32",
                              threads: int | None = None,
                              timeout_s: float = DEFAULT_TIMEOUT_S) -> DistributedRuntime:
    """Join torchrun's process group: nccl on CUDA (one GPU per local rank), gloo on CPU."""
    single = build_runtime(device, precision, threads)  # validates device and precision
    rank = int(os.environ.get("RANK", "0"))
    world = torchrun_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if single.device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise MlmkitError(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} "
                              "GPUs here: use --nproc_per_node at most the number of GPUs")
        resolved = torch.device("cuda", local_rank)
        torch.cuda.set_device(resolved)
        backend = "nccl"
    else:
        resolved, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s),
                                **({"device_id": resolved} if backend == "nccl" else {}))
    return DistributedRuntime(device=resolved, precision=single.precision, rank=rank,
                              world_size=world, local_rank=local_rank)


def build_runtime_from_env(device: str = "auto", precision: str = "fp32",
                           threads: int | None = None) -> Runtime:
    """A `DistributedRuntime` under torchrun with more than one process, else a `Runtime`."""
    if torchrun_world_size() > 1:
        return build_distributed_runtime(device, precision, threads)
    return build_runtime(device, precision, threads)
