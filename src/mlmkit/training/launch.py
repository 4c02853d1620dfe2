"""The training runtime torchrun's environment asks for: one process, DDP or FSDP.

Each runtime has the same methods (`mlmkit.training.runtime.Runtime`), so the loop has no
branch of its own; this module is the one place that chooses among them.
"""

from __future__ import annotations

import os

from mlmkit.engine.process_group import init, world_size
from mlmkit.training.ddp import DistributedRuntime
from mlmkit.training.fsdp import build_fsdp_runtime
from mlmkit.training.runtime import Runtime, build_runtime, training_threads


def build_runtime_from_env(device: str = "auto", precision: str = "auto",
                           threads: int | None = None, parallel: str = "ddp") -> Runtime:
    """A `DistributedRuntime` under torchrun with more than one process, else a `Runtime`.

    The process group is the one set-up of `mlmkit.engine.process_group` (nccl on a GPU, one
    per local rank; gloo on a CPU), shared with sharded scoring. `parallel="fsdp"` gives
    the FSDP runtime (`mlmkit.training.fsdp`); one process is the single-process runtime.
    """
    if world_size() <= 1:
        return build_runtime(device, precision, threads)
    if threads is None and not os.environ.get("MLMKIT_THREADS", "").strip():
        # the processes on this machine share its cores
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        threads = max(1, training_threads() // max(local, 1))
    single = build_runtime(device, precision, threads)  # validates device, precision, threads
    group, resolved = init(single.device.type if device in (None, "auto") else device)
    runtime = DistributedRuntime(device=resolved, precision=single.precision, rank=group.rank,
                                 world_size=group.world, local_rank=group.local_rank,
                                 group=group)
    if parallel == "fsdp":
        return build_fsdp_runtime(runtime)
    return runtime
