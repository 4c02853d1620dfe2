"""The host data path alone: packed blocks → masked batch ready for the model, per CPU core.

What a pretraining step does before the forward pass — gather the step's packed blocks
(python-docs, the run's tokenizer), mask them with the run's policy, collate the rows into
the tensors the objective reads — timed on one thread, with each mask stream:

- `row`: a generator per row (a Python call per row; what runs saved before the counter
  stream existed resume with);
- `counter`: the counter-based stream, the whole batch in a few tensor ops (the default).

Printed per policy and sequence length: tokens per CPU-second of each stream (one thread:
its rate on one core, whatever else the machine runs), the ratio, and the counter stream's
tokens per wall second (lower than per CPU-second when other jobs share the core).

    python benchmarks/data_path.py                    # about a minute
    python benchmarks/data_path.py --seq-len 512 --batch-size 64 --policies default bert
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mlmkit.pretraining import PretrainConfig  # noqa: E402
from mlmkit.pretraining.data import (  # noqa: E402
    build_data,
    prepare_rows,
    rank_rows,
    resolve_tokenizer,
)
from mlmkit.training.objectives.mlm import MLMObjective  # noqa: E402
from mlmkit.training.runtime import build_runtime  # noqa: E402

POLICIES = {"default": "default", "bert": "bert", "span": "span", "diffusion": "diffusion"}


def time_stream(objective, blocks, stream: str, batch_size: int, steps: int,
                seed: int = 0) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) of `steps` batches: gather, mask, collate (one
    process)."""
    rng = np.random.default_rng(seed)
    rows = rank_rows(batch_size, 0, 1)
    all_rows = torch.arange(batch_size)
    seconds, cpu_seconds, tokens = 0.0, 0.0, 0
    for step in range(steps + 1):
        indices = rng.integers(0, len(blocks), batch_size)
        started, cpu_started = time.perf_counter(), time.process_time()
        prepared, _ = prepare_rows(objective, blocks, indices, rows, step, seed,
                                   stream=stream, device=torch.device("cpu"))
        prepared.rows(all_rows, "cpu")  # the micro-batch the model reads
        if step:  # the first batch warms the caches
            seconds += time.perf_counter() - started
            cpu_seconds += time.process_time() - cpu_started
            tokens += batch_size * blocks.length
    return seconds, cpu_seconds, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES),
                        choices=list(POLICIES))
    args = parser.parse_args()
    torch.set_num_threads(1)  # per core
    runtime = build_runtime("cpu", "fp32", threads=1)
    print(f"one thread; batch {args.batch_size} blocks; tokens per CPU-second (the rate on "
          "one core) and per wall second count every position of a block (padding "
          f"included); load average (1 min) {os.getloadavg()[0]:.2f}")
    print(f"{'policy':<10} {'seq':>5} {'row stream':>14} {'counter stream':>16} {'ratio':>7} "
          f"{'counter, wall':>14}")
    for seq_len in args.seq_len:
        base = PretrainConfig(model="mini", seq_len=seq_len, batch_size=args.batch_size,
                              progress=False, fill_mask_examples=0, steps=10, threads=1)
        tokenizer = resolve_tokenizer(base, show_progress=False)
        data = build_data(base, tokenizer, show_progress=False)
        for name in args.policies:
            config = base.replace(masking=POLICIES[name])
            objective = MLMObjective(config, tokenizer, runtime)
            rates, wall = {}, {}
            for stream in ("row", "counter"):
                seconds, cpu_seconds, tokens = time_stream(objective, data.train, stream,
                                                           args.batch_size, args.steps)
                rates[stream], wall[stream] = tokens / cpu_seconds, tokens / seconds
            print(f"{name:<10} {seq_len:>5} {rates['row']:>14,.0f} {rates['counter']:>16,.0f} "
                  f"{rates['counter'] / rates['row']:>6.1f}× {wall['counter']:>14,.0f}",
                  flush=True)
    print(f"load average (1 min) at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
