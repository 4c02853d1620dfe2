"""Batches ready before the step: a background thread builds the next steps' batches.

While the model trains on step s, one thread reads the packed blocks of steps s + 1 ...
s + depth, masks them and (on a GPU) pins and copies them to the device on a side stream,
so the step finds its batch waiting. The run's `BlockOrder` stays where the trained steps
left it: the producer draws the next steps' blocks from a copy of it, and each batch is a
pure function of (step, blocks, seed), so a resumed run rebuilds exactly the batches an
uninterrupted one trained on; the producer's position is the order's saved position.

Only what a batch is built from may be read ahead: a fixed batch size (no batch-size
warm-up), no phases (a phase changes the data), an objective whose `prepare` keeps no
state for its `loss` and a masking policy that does not learn (loss weights change with
every step). Otherwise the run builds each batch in the step (`can_prefetch`).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from mlmkit.pretraining.data import prepare_rows, rank_rows
from mlmkit.training.objective import Prepared

# Steps built ahead when --prefetch is not given, by device type. On a GPU the host builds
# and copies the next batches while the device computes: nothing is shared but the copy
# engine, and two steps ahead absorb a slow batch. On a CPU the counter stream builds a
# batch in a small share of the step, so there is little to overlap, and the producer's
# thread would take a core from the step's own threads; building in the step also keeps
# a step interruptible (`Run.interruptible`). benchmarks/pretrain.py --section data
# measures the streams and depths on a CPU.
DEFAULT_DEPTH = {"cuda": 2, "cpu": 0}


def prefetch_depth(prefetch: int | None, device) -> int:
    """--prefetch when given, else the default of the device's type (`DEFAULT_DEPTH`)."""
    if prefetch is not None:
        return prefetch
    return DEFAULT_DEPTH.get(torch.device(device).type, 0)


def can_prefetch(config, objective, phases) -> str | None:
    """None when the batches of later steps can be built ahead, else why not."""
    if config.batch_warmup_tokens:
        return "the batch-size warm-up sizes each batch from the tokens trained before it"
    if phases is not None:
        return "phases change the data between steps"
    if not getattr(objective, "prepare_ahead", False):
        return f"the {objective.name} objective's prepare keeps state for its loss"
    weights = getattr(getattr(objective, "policy", None), "weights", None)
    if getattr(weights, "learns", False):
        return "loss-based masking weights change after every step"
    return None


@dataclass
class _Job:
    step: int
    indices: np.ndarray
    future: object


class BatchProducer:
    """Builds `depth` steps ahead on one thread; `take` hands the run its step's batch."""

    def __init__(self, objective, blocks, *, depth: int, batch_size: int, runtime,
                 seed: int, stream: str):
        self.objective, self.blocks, self.depth = objective, blocks, int(depth)
        self.batch_size, self.runtime, self.seed, self.stream = batch_size, runtime, seed, stream
        self.rows = rank_rows(batch_size, runtime.rank, runtime.world_size)
        self.device = runtime.device
        self.cuda = self.device.type == "cuda"
        self.side_stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlmkit-batches")
        self.jobs: deque[_Job] = deque()
        self.ahead = None  # a copy of the run's BlockOrder, at the last job's blocks

    def _build(self, step: int, indices: np.ndarray):
        """(Prepared with tensors on the device, this rank's tokens, a CUDA event or None)."""
        if not self.cuda:
            prepared, tokens = prepare_rows(self.objective, self.blocks, indices, self.rows,
                                            step, self.seed, stream=self.stream,
                                            device=self.device)
            return prepared, tokens, None
        with torch.cuda.stream(self.side_stream):
            prepared, tokens = prepare_rows(self.objective, self.blocks, indices, self.rows,
                                            step, self.seed, stream=self.stream,
                                            device=self.device)
            tensors = {k: (v if v.is_cuda else v.pin_memory().to(self.device,
                                                                   non_blocking=True))
                       for k, v in prepared.tensors.items()}
            ready = torch.cuda.Event()
            ready.record(self.side_stream)
        return Prepared(tensors=tensors, counts=prepared.counts), tokens, ready

    def _submit(self, step: int, indices: np.ndarray) -> None:
        self.jobs.append(_Job(step, indices, self.pool.submit(self._build, step, indices)))

    def take(self, step: int, indices: np.ndarray, order) -> tuple[Prepared, int, float]:
        """The batch of `step` (its blocks `indices`, just drawn from the run's `order`),
        this rank's tokens and the seconds the step waited for it; then the next steps are
        queued."""
        while self.jobs and self.jobs[0].step < step:
            self.jobs.popleft().future.cancel()
        job = self.jobs[0] if self.jobs else None
        if job is None or job.step != step or not np.array_equal(job.indices, indices):
            for stale in self.jobs:  # another position (not expected): start over from it
                stale.future.cancel()
            self.jobs.clear()
            self.ahead = copy.deepcopy(order)
            self._submit(step, indices)
        job = self.jobs.popleft()
        last = self.jobs[-1].step if self.jobs else step
        while len(self.jobs) < self.depth:  # keep `depth` steps queued behind this one
            last += 1
            self._submit(last, self.ahead.next_indices(self.batch_size))
        started = time.perf_counter()
        prepared, tokens, ready = job.future.result()
        if ready is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(ready)
            for tensor in prepared.tensors.values():  # freed only after the step's use
                tensor.record_stream(current)
        return prepared, tokens, time.perf_counter() - started

    def close(self) -> None:
        for job in self.jobs:
            job.future.cancel()
        self.jobs.clear()
        self.pool.shutdown(wait=True)
