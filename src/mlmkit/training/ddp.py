"""Data-parallel pretraining under torchrun: DistributedDataParallel, gloo on CPU, nccl on GPU.

    torchrun --nproc_per_node 2 -m mlmkit pretrain --model mini --batch-size 64

`mlmkit.training.launch.build_runtime_from_env` returns the single-process `Runtime` unless
torchrun's environment (WORLD_SIZE > 1) says otherwise; then it joins the process group and
returns a `DistributedRuntime`, which the loop uses through the same methods.

How the work is split (see `mlmkit.training.objectives`): every process reads, masks and collates
only its own rows of a step's global batch (rows rank, rank + W, ...; each row corrupted
from (seed, step, global row), `mlmkit.pretraining.data.prepare_rows`), and trains on them
micro-batch by micro-batch. The step's counts are summed over processes and the objective
divides its loss by them, so gradients are *summed* over processes (a comm hook replaces
DDP's averaging) and equal those of the whole batch on one process. `--parallel fsdp`
shards the model instead (`mlmkit.training.fsdp`), with the same split of the data. Gradients are only
synchronised on the last micro-step (`no_sync` before). Only rank 0 logs, evaluates and
writes checkpoints; the training state does not depend on the world size, so a run
resumes on any number of processes that divides the (unchanged) global batch.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from mlmkit.engine.process_group import ProcessGroup
from mlmkit.training.objective import LossOutput
from mlmkit.training.runtime import Runtime


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
    group: ProcessGroup = field(default_factory=ProcessGroup)
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
        self.group.barrier()

    def close(self) -> None:
        self.group.finish()
