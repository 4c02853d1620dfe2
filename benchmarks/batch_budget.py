"""Is the default token budget a good one on this CPU? PLL scoring speed at several budgets.

`default_batch_tokens` sizes a CPU batch so that its widest activation (tokens ×
intermediate size, float32) fills half of the last-level cache (issue 20: a rule, not a
constant). This script checks that rule on the machine it runs on: the same random
models, sentences and token ids as benchmarks/scoring.py (BLiMP, 30,522-token
vocabulary), scored by mlmkit's engine at a ladder of `batch_tokens` around the rule's
choice, in rounds that interleave the budgets (a shared machine's load moves over
minutes, so each budget's best round is kept). Printed per preset: texts per CPU-second
of each budget with its MFU (the PLL FLOPs of benchmarks/flops.py per CPU-second over
the fp32 matmul peak per CPU-second, same threads), the rule's budget and how far it is from the best one, and the CPU kind
(AVX512-BF16 or AVX2). Scores are checked to be equal across budgets.

    .venv/bin/python benchmarks/batch_budget.py                    # mini and base, 1 thread
    .venv/bin/python benchmarks/batch_budget.py --presets mini --threads 2 --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from flops import matmul_peak, pll_flops
from scoring import blimp_sentences, build_model, remapped_ids, tokenizer_dir


def cpu_kind() -> str:
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    return "AVX512-BF16" if "avx512_bf16" in flags else "AVX2" if "avx2" in flags else "other"


def ladder(rule: int) -> list[int]:
    """Budgets from a quarter of the rule's to eight times it (and the old 1 GiB cap)."""
    return sorted({max(256, rule // 4), max(256, rule // 2), rule, rule * 2, rule * 4,
                   min(rule * 8, 32768), 32768})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["mini", "base"])
    parser.add_argument("--sentences", type=int, nargs="+", default=[200, 24],
                        help="sentences per preset (same order as --presets)")
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer

    from mlmkit.engine.batching import cache_bytes, default_batch_tokens
    from mlmkit.models import LoadedMLM
    from mlmkit.scoring.masked_copies import score_token_ids

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(
        tokenizer_dir(Path(tempfile.gettempdir()) / "mlmkit-bench-scoring"))
    peak = matmul_peak(torch.float32, clock=time.process_time, threads=args.threads)
    print(f"CPU: {cpu_kind()}, last-level cache {cache_bytes() >> 20} MiB, "
          f"{args.threads} thread(s), fp32 matmul peak {peak / 1e9:.1f} GFLOP per CPU-second; "
          f"PLL scoring, vocabulary {args.vocab:,}")
    counts = args.sentences + [args.sentences[-1]] * len(args.presets)
    for preset, count in zip(args.presets, counts, strict=False):
        ids = remapped_ids(tokenizer, blimp_sentences(count), args.vocab)
        model = build_model(tokenizer, preset, args.vocab)
        mlm = LoadedMLM(model=model, tokenizer=tokenizer, name=f"{preset}-v{args.vocab}")
        flops = pll_flops(model.config, [len(x) for x in ids])
        rule = default_batch_tokens(model, model.config.max_position_embeddings)
        budgets = ladder(rule)
        score_token_ids(mlm, ids[:4], batch_tokens=rule)  # warm-up
        best = dict.fromkeys(budgets, 0.0)
        reference = None
        for _ in range(args.rounds):
            for budget in budgets:
                start = time.process_time()
                scores = np.concatenate(score_token_ids(mlm, ids, batch_tokens=budget))
                rate = len(ids) / max(time.process_time() - start, 1e-9)
                best[budget] = max(best[budget], rate)
                if reference is None:
                    reference = scores
                assert np.allclose(scores, reference, atol=1e-5), f"scores differ at {budget}"
        top = max(best, key=best.get)
        print(f"{preset} ({count} sentences): texts per CPU-second by --batch-tokens "
              "(best of the rounds)")
        for budget in budgets:
            note = " <- the rule (default)" if budget == rule else ""
            print(f"  {budget:6d}  {best[budget]:8.2f}  {best[budget] / best[top]:6.1%} of the "
                  f"best, MFU {flops * best[budget] / len(ids) / peak:5.1%}{note}")
        print(f"  rule {rule} gives {best[rule] / best[top]:.1%} of the best budget ({top}); "
              f"{best[rule] / best[32768]:.2f}x the 32,768 cap")


if __name__ == "__main__":
    main()
