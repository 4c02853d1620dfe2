"""A recipe against the default run, at mini scale, on held-out MLM accuracy (issue 19).

Two runs of the same length (steps × batch) on python-docs with the same tokenizer: the
default `mlmkit pretrain` config (modernbert-mini, 30% whole-word masking, linear decay,
128-token blocks) and `--recipe NAME` (default: modernbert: 80% of the steps at 64 tokens
with RoPE θ 10k, context extension to 128 tokens with θ 160k, a 1-sqrt decay on a
mixture). The recipe's tokenizer kind is set to the default run's, so both models read the
same token ids. One evaluator scores both: the same held-out python-docs blocks of 128
tokens, the same 15% of positions (seeded) replaced by [MASK], top-1 accuracy over them,
so neither run's own training mask decides the comparison. Each run's MFU
(benchmarks/flops.py: training FLOPs per token of each phase's length and masking rate,
over its training seconds and a matmul peak measured in this run, wall clock) is printed.

    python benchmarks/recipes.py                 # 80 steps: 26 minutes on 2 busy CPU cores
    python benchmarks/recipes.py --recipe mmbert --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mlmkit.models import load_mlm, masked_logits  # noqa: E402
from mlmkit.pretraining import PretrainConfig, pretrain  # noqa: E402
from mlmkit.pretraining.config import from_dict  # noqa: E402
from mlmkit.pretraining.recipes import recipe_config  # noqa: E402

RATE, EVAL_SEED = 0.15, 1234


def heldout_accuracy(model_dir: Path, blocks: int, seq_len: int) -> tuple[float, int]:
    """Top-1 accuracy at a fixed 15% of the held-out blocks' tokens, masked with [MASK]."""
    from mlmkit.corpus.packing import PackedBlocks
    from mlmkit.corpus.shards import tokenize_corpus
    from mlmkit.pretraining.data import corpus_documents

    mlm = load_mlm(model_dir, device="cpu")
    tok = mlm.tokenizer
    shards = tokenize_corpus(corpus_documents("python-docs", "validation"), tok,
                             name="python-docs (validation)", settings={"format": "shards-v1"},
                             show_progress=False)
    packed = PackedBlocks(shards, seq_len, cls_id=tok.cls_token_id, sep_id=tok.sep_token_id,
                          pad_id=tok.pad_token_id, packing="full")
    n = min(blocks, len(packed))
    generator = torch.Generator().manual_seed(EVAL_SEED)
    correct = total = 0
    with torch.no_grad():
        for start in range(0, n, 16):
            batch = packed[list(range(start, min(start + 16, n)))]
            ids, attn = batch.input_ids, batch.attention_mask
            special = torch.isin(ids, torch.tensor(tok.all_special_ids))
            chosen = (torch.rand(ids.shape, generator=generator) < RATE) & ~special & attn.bool()
            corrupted = ids.masked_fill(chosen, tok.mask_token_id)
            logits = masked_logits(mlm.model, corrupted, attn, chosen)
            correct += int((logits.argmax(-1) == ids[chosen]).sum())
            total += int(chosen.sum())
    return correct / total, total


def run_flops(config, run) -> float:
    """Training FLOPs of a run: each logged step's tokens (a batch warm-up makes them vary)
    × the FLOPs per token at its phase's length and masking rate (benchmarks/flops.py)."""
    import numpy as np
    from flops import masking_rate, train_flops_per_token
    from transformers import AutoConfig

    model = AutoConfig.from_pretrained(run.final_dir)
    phases = config.phases or [{"steps": config.steps}]
    ends = np.cumsum([p["steps"] for p in phases])
    total, tokens_before = 0.0, 0
    for record in (r for r in run.history if r["split"] == "train"):
        phase = phases[min(int(np.searchsorted(ends, record["step"], side="left")),
                           len(phases) - 1)]
        length = phase.get("seq_len", config.seq_len)
        rate = phase.get("masking_rate")
        rate = masking_rate(config.masking, None if rate is None else (
            rate if isinstance(rate, (list, tuple)) else (rate, rate)))
        total += (record["tokens"] - tokens_before) * train_flops_per_token(model, length, rate)
        tokens_before = record["tokens"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="modernbert")
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--eval-blocks", type=int, default=128)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("MLMKIT_THREADS",
                                                                          "2")))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    common = dict(steps=args.steps, eval_every=0, log_every=1, eval_blocks=32, pppl_sentences=0,
                  save_every=0, fill_mask_examples=0, progress=False, threads=args.threads,
                  precision="fp32", device="cpu")
    root = Path(tempfile.mkdtemp(prefix="mlmkit-recipes-"))
    default = PretrainConfig(**common, run_dir=str(root / "default"))
    recipe = from_dict(recipe_config(args.recipe, {
        **common, "run_dir": str(root / args.recipe),
        "tokenizer_kind": default.tokenizer_kind}), source=f"--recipe {args.recipe}")
    from flops import matmul_peak

    peak = matmul_peak(threads=args.threads)
    results = {}
    for name, config in (("default", default), (args.recipe, recipe)):
        started = time.perf_counter()
        run = pretrain(config)
        seconds = time.perf_counter() - started
        accuracy, masked = heldout_accuracy(run.final_dir, args.eval_blocks, 128)
        results[name] = {"heldout_accuracy": accuracy, "masked_positions": masked,
                         "train_seconds": run.summary["train_seconds"],
                         "wall_seconds": round(seconds, 1), "tokens": run.summary["tokens"],
                         "mfu": run_flops(config, run) / run.summary["train_seconds"]
                         / peak}
        print(f"{name}: held-out accuracy {accuracy:.4f} over {masked} masked positions; "
              f"{run.summary['tokens']:,} tokens in {run.summary['train_seconds']:.0f} s "
              f"of training; MFU {100 * results[name]['mfu']:.1f}% (benchmarks/flops.py; "
              f"matmul peak {peak / 1e9:.1f} GFLOP/s, wall clock)", flush=True)
    ratio = results[args.recipe]["heldout_accuracy"] / results["default"]["heldout_accuracy"]
    print(json.dumps({"recipe": args.recipe, "steps": args.steps, "batch_size": 16,
                      "results": results, "accuracy_ratio_recipe_over_default": ratio,
                      "machine": f"{platform.processor() or platform.machine()}, "
                                 f"{os.cpu_count()} cores, {args.threads} thread(s)"},
                     indent=1))


if __name__ == "__main__":
    main()
