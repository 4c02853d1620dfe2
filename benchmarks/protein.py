"""Variant-effect scoring speed: mlmkit against a straightforward implementation of each
strategy's definition (tests/protein/esm_reference.py: one sequence per forward pass, the
full logits, one mutation at a time, as esm's predict.py scores a mutant).

Both sides score the same BLAT_ECOLX single mutants (Stiffler et al. 2015, ../shared/data/
protein) with the same random ESM-2 8M (seeded) in the same process, on the CPU with the
same threads; the scores must agree within 1e-5. Masked- and wt-marginals score the
mutants of the first `--positions` positions (19 substitutions each); PLL, the costliest
(a pass per residue and mutant), the first 1 and 20 of them (`--pll-mutants`): the
score is PLL(mutant) − PLL(wild type), and mlmkit scores the wild type once for all
mutants where the reference, one mutant at a time, scores it with each. The `passes`
columns count the forward passes of each side; `per pass` is the speed ratio per pass.
Times are CPU seconds of this process (honest on a shared machine), and so is the
matmul peak behind MFU. MFU counts the FLOPs each strategy needs (masked-marginals: one
pass per mutated position; wt-marginals: one pass; PLL: one pass per residue of each
distinct sequence), the same for both sides (benchmarks/flops.py); "run MFU" counts the
FLOPs each side runs (the reference: every pass in full, its head at every position).

    .venv/bin/python benchmarks/protein.py                       # about 20 CPU minutes
    .venv/bin/python benchmarks/protein.py --positions 40 --pll-mutants 4
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
import torch

import mlmkit
from mlmkit.core.devices import native_bf16
from mlmkit.models import build_mlm
from mlmkit.protein import protein_tokenizer, read_sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "protein"))
from esm_reference import Reference  # noqa: E402
from flops import forward_flops, matmul_peak, mfu_text  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "protein"


def timed(function):
    start = time.process_time()
    value = function()
    return value, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="esm2-8m")
    parser.add_argument("--positions", type=int, default=12,
                        help="score the mutants of the first N mutated positions")
    parser.add_argument("--pll-mutants", default="1,20",
                        help="comma-separated mutant counts of the PLL rows")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sequence = read_sequence(str(DATA / "BLAT_ECOLX_wildtype.fasta"))
    rows = list(csv.DictReader((DATA / "BLAT_ECOLX_Ranganathan2015.csv").open()))
    positions = sorted({int(r["mutant"][1:-1]) for r in rows})[:args.positions]
    mutants = [r["mutant"] for r in rows if int(r["mutant"][1:-1]) in positions]
    tokenizer = protein_tokenizer()
    model = build_mlm(args.preset, tokenizer, seed=0).eval()
    mlm = mlmkit.load((model, tokenizer), device="cpu", threads=args.threads)
    reference = Reference(model, tokenizer)
    peak = matmul_peak(threads=args.threads, clock=time.process_time)
    length, residues = len(sequence) + 2, len(sequence)
    pll_counts = [int(n) for n in str(args.pll_mutants).split(",")]
    print(f"BLAT_ECOLX ({residues} residues), {args.preset} (random, seeded), "
          f"{args.threads} thread(s), CPU seconds; {len(mutants)} mutants at {len(positions)} "
          f"positions, PLL on {', '.join(map(str, pll_counts))}", flush=True)
    one = forward_flops(model.config, length, 1)  # a pass read at one position
    full = forward_flops(model.config, length, length)  # a pass read everywhere
    # (strategy, mutants, mlmkit passes, reference passes)
    cases = [("masked-marginals", mutants, len(positions), len(mutants)),
             ("wt-marginals", mutants, 1, len(mutants))]
    cases += [("pll", mutants[:n], (n + 1) * residues, 2 * n * residues) for n in pll_counts]
    print(f"{'strategy':<18} {'mutants':>7} {'passes':>6} {'ref passes':>10} {'mlmkit s':>9} "
          f"{'reference s':>12} {'ratio':>6} {'per pass':>8} {'max |diff|':>11}", flush=True)
    mfus, run_mfus, pll_reference = {}, {}, {}
    mlm.variant_effects(sequence, mutants[:2], offset=24)  # warm-up: first-call allocations
    for strategy, chosen, passes, reference_passes in cases:
        ours, ours_s = timed(lambda s=strategy, c=chosen: mlm.variant_effects(
            sequence, c, strategy=s, offset=24))
        theirs, theirs_s = timed(lambda s=strategy, c=chosen: reference.score(
            s, sequence, c, offset=24))
        difference = float(np.max(np.abs(ours - theirs)))
        per_pass = theirs_s / reference_passes / (ours_s / passes)
        print(f"{strategy:<18} {len(chosen):>7} {passes:>6} {reference_passes:>10} "
              f"{ours_s:>9.2f} {theirs_s:>12.2f} {theirs_s / ours_s:>5.1f}× {per_pass:>7.2f}× "
              f"{difference:>11.2e}", flush=True)
        label = strategy if strategy != "pll" else f"pll×{len(chosen)}"
        if strategy == "pll":
            pll_reference[len(chosen)] = theirs, theirs_s, reference_passes
        # the FLOPs needed: the wt-marginals pass reads the mutated positions only
        needed = (forward_flops(model.config, length, len(positions))
                  if strategy == "wt-marginals" else passes * one)
        mfus[f"{label} mlmkit"] = needed / ours_s / peak
        mfus[f"{label} reference"] = needed / theirs_s / peak
        run_mfus[f"{label} mlmkit"] = needed / ours_s / peak
        run_mfus[f"{label} reference"] = reference_passes * full / theirs_s / peak
    if native_bf16(torch.device("cpu")):
        # bf16 autocast (AMX/AVX-512 BF16): faster, but its scores move by about 1e-2, far
        # past the 1e-5 the fp32 default keeps; shown for the trade, never the default.
        chosen = mutants[:pll_counts[0]]
        theirs, theirs_s, reference_passes = pll_reference[pll_counts[0]]
        bf16 = mlmkit.load((model, tokenizer), device="cpu", threads=args.threads,
                           precision="bf16")
        fast, fast_s = timed(lambda: bf16.variant_effects(sequence, chosen, strategy="pll",
                                                          offset=24))
        passes = (len(chosen) + 1) * residues
        print(f"{'pll (bf16)':<18} {len(chosen):>7} {passes:>6} {reference_passes:>10} "
              f"{fast_s:>9.2f} {theirs_s:>12.2f} {theirs_s / fast_s:>5.1f}× "
              f"{theirs_s / reference_passes / (fast_s / passes):>7.2f}× "
              f"{float(np.max(np.abs(fast - theirs))):>11.2e}  (against the fp32 reference)")
    print(mfu_text(mfus, peak, clock="CPU time"))
    print("run " + mfu_text(run_mfus, peak, clock="CPU time"))


if __name__ == "__main__":
    main()
