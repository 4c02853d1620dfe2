"""Benchmark: pretraining throughput and per-rank data time at 1 and 2 processes, DDP and
FSDP (gloo on CPU), in one run.

The same run (model, batch, steps, seed; python-docs, a WordPiece tokenizer trained on it)
is trained by: 1 process; 2 processes under DDP; 2 processes under FSDP (FSDP2). Each
process uses `--threads` threads (default 1: on a small machine two processes then take
two cores). Reported per configuration: tokens/s (the whole job, the slowest rank's step
time), rank 0's data time (reading, masking and collating its rows: with 2 ranks each
does half the rows) per step, and the last logged training loss (FSDP and DDP should
agree). The processes are started with torch.multiprocessing (as torchrun's workers),
the gloo process group over loopback. Each row's MFU (benchmarks/flops.py: training FLOPs
per token at the run's length and masking rate, over the processes × a matmul peak
measured in this run at `--threads`, wall clock) follows the table.

    .venv/bin/python benchmarks/scale.py [--model mini] [--steps 8] [--batch-size 16] [--seq-len 128]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world: int, port: int, config: dict, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      GLOO_SOCKET_IFNAME="lo")
    import torch

    torch.set_num_threads(config["threads"])
    from mlmkit.pretraining import PretrainConfig, pretrain

    result = pretrain(PretrainConfig(**config))
    Path(out, f"rank{rank}.json").write_text(json.dumps(
        {**result.summary, "final_dir": str(result.final_dir)}))


def run(world: int, config: dict) -> dict:
    import torch.multiprocessing as mp

    out = tempfile.mkdtemp(prefix="mlmkit-scale-")
    started = time.perf_counter()
    if world == 1:
        _worker(0, 1, _free_port(), config, out)
    else:
        mp.start_processes(_worker, args=(world, _free_port(), config, out), nprocs=world,
                           start_method="spawn")
    wall = time.perf_counter() - started
    summary = json.loads(Path(out, "rank0.json").read_text())
    history = [json.loads(line) for line in
               Path(config["run_dir"], "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in history if r.get("split") == "train"]
    return {"tokens_per_s": summary["tokens_per_s"], "train_s": summary["train_seconds"],
            "data_ms_per_step": 1000 * summary["data_seconds"] / summary["steps"],
            "last_loss": losses[-1], "wall_s": wall, "final_dir": summary["final_dir"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mini")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mlmkit-scale-runs-"))
    base = dict(model=args.model, steps=args.steps, batch_size=args.batch_size,
                seq_len=args.seq_len, warmup=0.0, eval_every=0, eval_blocks=1,
                pppl_sentences=0, save_every=0, log_every=1, progress=False,
                fill_mask_examples=0, threads=args.threads, precision="fp32",
                tokenizer_kind="wordpiece", vocab_size=8192)
    # the tokenizer and shards once, outside the timing
    run(1, {**base, "steps": 1, "run_dir": str(root / "warmup")})
    rows = []
    for name, world, parallel in (("1 process", 1, "ddp"), ("2 processes, DDP", 2, "ddp"),
                                  ("2 processes, FSDP", 2, "fsdp")):
        result = run(world, {**base, "parallel": parallel,
                             "run_dir": str(root / name.replace(" ", "").replace(",", "-"))})
        rows.append((name, result))
    print(f"model {args.model}, batch {args.batch_size} × {args.seq_len}, {args.steps} steps, "
          f"{args.threads} thread(s) per process, gloo, {os.cpu_count()} CPU(s), "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'':<20} {'tokens/s':>9} {'data ms/step (rank 0)':>22} {'last loss':>10} "
          f"{'wall s':>7}")
    for name, r in rows:
        print(f"{name:<20} {r['tokens_per_s']:>9.0f} {r['data_ms_per_step']:>22.1f} "
              f"{r['last_loss']:>10.4f} {r['wall_s']:>7.1f}")
    from flops import masking_rate, matmul_peak, mfu_text, train_flops_per_token
    from transformers import AutoConfig

    rate = masking_rate(base.get("masking", "default"))
    needed = train_flops_per_token(AutoConfig.from_pretrained(rows[0][1]["final_dir"]),
                                   args.seq_len, rate)
    peak = matmul_peak(threads=args.threads)
    worlds = {"1 process": 1}
    print(mfu_text({name: r["tokens_per_s"] * needed / (worlds.get(name, 2) * peak)
                    for name, r in rows}, peak, f"wall clock, per process at {args.threads} "
                   f"thread(s); masked share {rate:g}"))
    one = rows[0][1]
    for name, r in rows[1:]:
        print(f"{name}: {r['tokens_per_s'] / one['tokens_per_s']:.2f}× the tokens/s of 1 "
              f"process; data time per step {r['data_ms_per_step'] / one['data_ms_per_step']:.2f}×")


if __name__ == "__main__":
    main()
