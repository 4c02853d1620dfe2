"""Sharded scoring: under torchrun, and as independent jobs (`--shard I/N`).

Under torchrun each rank scores every world-th line; rank 0 merges. Line i goes to rank
i % world, so each rank's part file is already in input order and the merge is a
round-robin read (constant memory). The process group itself (backend, device per rank,
timeout) is `mlmkit.engine.process_group`.

As jobs (a Slurm array, separate machines, one after the other): `--shard I/N` scores the
pieces I, I + N, ... of `chunk_texts` lines each, and `merge_shards` joins the N outputs
back in input order (`mlmkit.engine.job_shards`, shared with `mlmkit embed --shard`).
"""

from __future__ import annotations

import os
from pathlib import Path

from mlmkit.engine.job_shards import MergeSummary, merge_line_shards
from mlmkit.errors import RunError


def merge_shards(shards, output="-") -> MergeSummary:
    """Join the outputs of `mlmkit score --shard I/N`, I = 0..N-1 (any order), into the
    file a single run writes (`-`: standard output). Refuses missing, duplicate or
    incomplete shards, and shards of different inputs, models or settings."""
    return merge_line_shards(shards, output, command="score")


def owns(index: int, rank: int, world: int) -> bool:
    """Whether input line `index` (0-based) is scored by `rank` of `world`."""
    return index % world == rank


def part_path(output: Path, rank: int, world: int) -> Path:
    return output.with_name(f".{output.name}.part{rank}-of-{world}")


def merge_parts(output: Path, world: int, n_lines: int) -> Path:
    """Interleave the ranks' part files back into input order; return the merged temp file."""
    merged = output.with_name(f".{output.name}.merged")
    parts = [part_path(output, r, world).open(encoding="utf-8") for r in range(world)]
    try:
        with merged.open("w", encoding="utf-8", newline="\n") as out:
            for i in range(n_lines):
                line = parts[i % world].readline()
                if not line:
                    raise RunError(f"rank {i % world}'s part of {str(output)!r} ended before "
                                   f"line {i + 1}: a rank failed; run the command again")
                out.write(line)
            out.flush()
            os.fsync(out.fileno())
    finally:
        for handle in parts:
            handle.close()
    for r in range(world):
        part_path(output, r, world).unlink(missing_ok=True)
    return merged
