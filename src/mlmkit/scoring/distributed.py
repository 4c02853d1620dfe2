"""Sharded scoring under torchrun: each rank scores every world-th line; rank 0 merges.

Line i goes to rank i % world, so each rank's part file is already in input order and
the merge is a round-robin read (constant memory). The process group is created with
a timeout so a crashed rank ends the run instead of hanging it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch

TIMEOUT_SECONDS = int(os.environ.get("MLMKIT_DIST_TIMEOUT", "600"))


@dataclass(frozen=True)
class Shard:
    """This process's place in the run (rank 0 of 1 when not under torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def owns(self, index: int) -> bool:
        return index % self.world == self.rank

    def part_path(self, output: Path, rank: int | None = None) -> Path:
        rank = self.rank if rank is None else rank
        return output.with_name(f".{output.name}.part{rank}-of-{self.world}")


def current_shard() -> Shard:
    """Read torchrun's environment; start the process group (gloo on CPU, nccl on GPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Shard()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local)
        dist.init_process_group(backend, timeout=timedelta(seconds=TIMEOUT_SECONDS))
    return Shard(rank, world, local)


def device_for(shard: Shard, device: str | None) -> str | None:
    """Each rank on its own GPU when there are GPUs and no device was forced."""
    if shard.world > 1 and device in (None, "auto") and torch.cuda.is_available():
        return f"cuda:{shard.local_rank}"
    return device


def barrier(shard: Shard) -> None:
    if shard.world > 1:
        import torch.distributed as dist

        dist.barrier()


def merge_parts(shard: Shard, output: Path, n_lines: int) -> Path:
    """Interleave the ranks' part files back into input order; return the merged temp file."""
    merged = output.with_name(f".{output.name}.merged")
    parts = [shard.part_path(output, r).open(encoding="utf-8") for r in range(shard.world)]
    try:
        with merged.open("w", encoding="utf-8") as out:
            for i in range(n_lines):
                line = parts[i % shard.world].readline()
                if not line:
                    raise RuntimeError(f"rank {i % shard.world}'s part ended before line {i + 1}")
                out.write(line)
    finally:
        for handle in parts:
            handle.close()
    for r in range(shard.world):
        shard.part_path(output, r).unlink(missing_ok=True)
    return merged


def finish(shard: Shard) -> None:
    if shard.world > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
