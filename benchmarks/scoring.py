"""PLL scoring speed and memory: mlmkit's engine against a straightforward transformers baseline.

The baseline scores the way common tools do: for a batch of sentences, every masked copy
of every sentence goes through the full model in one forward pass, and log-softmax is
taken over the full logits [copies, length, vocab] before picking the masked positions.
mlmkit sorts all copies by length, batches them under a padded-token budget, and runs
the MLM head only at each copy's masked position.

Both sides score the same token ids of the same BLiMP sentences with the same random
`mini` BERT (seeded), once with a 30,522-token vocabulary (BERT) and once with 250,002
(XLM-R). Token ids come from a small WordPiece tokenizer trained on python-docs and are
remapped (seeded) into the full vocabulary, so the embeddings and head rows used span
it; the specials keep their ids.

When minicons is installed (`pip install -e '.[dev]'` brings it), a third side scores the
same token ids with minicons' own `MaskedLMScorer` (`prepare_text` + `compute_stats`, PLL
'original'), fed as a padded batch of `--baseline-batch` sentences, as a user of minicons
would run it; its scores must equal mlmkit's too.

Memory: each side runs in a fresh subprocess; "peak" is the growth of the process's
maximum resident set size (resource.getrusage ru_maxrss) from just before scoring to
just after, i.e. what scoring added on top of the loaded model and data (torch's CPU
allocations are invisible to tracemalloc, so RSS is the honest measure).

    .venv/bin/python benchmarks/scoring.py            # 500 sentences, both vocabularies
    .venv/bin/python benchmarks/scoring.py --sentences 100 --vocab 30522
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from flops import matmul_peak, pll_flops

ROOT = Path(__file__).resolve().parents[1]
BLIMP = ROOT.parent / "shared" / "data" / "blimp"


def blimp_sentences(n: int, seed: int = 0) -> list[str]:
    """`n` BLiMP sentences (good and bad alike), drawn with a fixed seed from all paradigms."""
    sentences = []
    for file in sorted(BLIMP.glob("*.jsonl")):
        for line in file.read_text().splitlines():
            row = json.loads(line)
            sentences += [row["sentence_good"], row["sentence_bad"]]
    return random.Random(seed).sample(sentences, n)


def tokenizer_dir(cache: Path) -> Path:
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.tokenizer import train_tokenizer

    path = cache / "tokenizer"
    if not (path / "tokenizer.json").exists():
        train_tokenizer(python_docs("train")[:3000], path, kind="wordpiece", vocab_size=4096,
                        show_progress=False)
    return path


def remapped_ids(tokenizer, texts: list[str], vocab: int, seed: int = 0) -> list[list[int]]:
    """Token ids of `texts`, non-special ids mapped (seeded, injective) into [0, vocab)."""
    specials = set(tokenizer.all_special_ids)
    rng = np.random.default_rng(seed)
    free = np.setdiff1d(np.arange(vocab), np.array(sorted(specials)))
    table = {i: (i if i in specials else int(v))
             for i, v in zip(range(len(tokenizer)), rng.choice(free, len(tokenizer),
                                                                replace=False), strict=True)}
    return [[table[i] for i in ids] for ids in tokenizer(texts)["input_ids"]]


def build_model(tokenizer, preset: str, vocab: int):
    import torch
    import transformers

    from mlmkit.models import preset_config

    config = preset_config(preset, tokenizer)
    config.vocab_size = vocab
    torch.manual_seed(0)
    return transformers.AutoModelForMaskedLM.from_config(config).eval()


def baseline_pll(model, tokenizer, token_ids: list[list[int]], batch_sentences: int):
    """Common practice: all masked copies of a batch in one pass, full logits everywhere."""
    import torch

    specials = set(tokenizer.all_special_ids)
    mask, pad = tokenizer.mask_token_id, tokenizer.pad_token_id
    out = []
    with torch.no_grad():
        for lo in range(0, len(token_ids), batch_sentences):
            batch = token_ids[lo:lo + batch_sentences]
            width = max(len(ids) for ids in batch)
            copies, attention, where = [], [], []
            for s, ids in enumerate(batch):
                for t, token in enumerate(ids):
                    if token in specials:
                        continue
                    row = list(ids) + [pad] * (width - len(ids))
                    row[t] = mask
                    copies.append(row)
                    attention.append([1] * len(ids) + [0] * (width - len(ids)))
                    where.append((s, t, token))
            logits = model(input_ids=torch.tensor(copies),
                           attention_mask=torch.tensor(attention)).logits
            log_probs = torch.log_softmax(logits, dim=-1)
            rows = torch.arange(len(where))
            cols = torch.tensor([t for _, t, _ in where])
            tokens = torch.tensor([w for _, _, w in where])
            picked = log_probs[rows, cols, tokens].double().numpy()
            per = [[] for _ in batch]
            for (s, _, _), value in zip(where, picked, strict=True):
                per[s].append(value)
            out += [np.array(p) for p in per]
    return out


def minicons_pll(model, tokenizer, token_ids: list[list[int]], batch_sentences: int):
    """minicons' MaskedLMScorer on the same ids: `prepare_text` of a padded batch (it masks
    every token but [CLS]/[SEP]/[PAD], one copy each) and `compute_stats` (one forward of
    all copies, full logits, log-softmax at the masked positions)."""
    import torch
    from minicons import scorer
    from transformers import BatchEncoding

    lm = scorer.MaskedLMScorer(model, device="cpu", tokenizer=tokenizer)
    pad, out = tokenizer.pad_token_id, []
    for lo in range(0, len(token_ids), batch_sentences):
        batch = token_ids[lo:lo + batch_sentences]
        width = max(len(ids) for ids in batch)
        encoded = BatchEncoding({
            "input_ids": torch.tensor([ids + [pad] * (width - len(ids)) for ids in batch]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids))
                                            for ids in batch])})
        scores = lm.compute_stats(lm.prepare_text(encoded, PLL_metric="original"),
                                  return_tensors=True)
        out += [s.double().numpy() for s in scores]
    return out


def minicons_installed() -> bool:
    try:
        import minicons.scorer  # noqa: F401
    except ImportError:
        return False
    return True


def worker(args) -> None:
    import torch
    from transformers import AutoTokenizer

    from mlmkit.models import LoadedMLM
    from mlmkit.scoring.masked_copies import score_token_ids

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    texts = blimp_sentences(args.sentences)
    ids = remapped_ids(tokenizer, texts, args.vocab)
    model = build_model(tokenizer, args.preset, args.vocab)
    mlm = LoadedMLM(model=model, tokenizer=tokenizer, name=f"{args.preset}-v{args.vocab}")

    def run(subset):
        if args.worker == "mlmkit":
            return score_token_ids(mlm, subset)
        if args.worker == "minicons":
            return minicons_pll(model, tokenizer, subset, args.baseline_batch)
        return baseline_pll(model, tokenizer, subset, args.baseline_batch)

    run(ids[:8])  # warm-up: first-call allocations and kernel selection on both sides
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    began, cpu_began = time.perf_counter(), time.process_time()
    scores = run(ids)
    seconds = time.perf_counter() - began
    cpu_seconds = time.process_time() - cpu_began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    np.save(args.out, np.concatenate(scores))
    flops = pll_flops(model.config, [len(x) for x in ids])
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds,
                      "texts_per_s": len(ids) / seconds, "flops": flops,
                      "peak_mib": (peak - before) / 1024, "rss_mib": peak / 1024,
                      "tokens": int(sum(len(x) - 2 for x in ids))}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--vocab", type=int, nargs="+", default=[30522, 250002])
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--baseline-batch", type=int, default=8,
                        help="sentences per baseline forward pass (all their masked copies)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-minicons", action="store_true",
                        help="leave out the minicons side even when it is installed")
    parser.add_argument("--worker", choices=["mlmkit", "baseline", "minicons"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.vocab = args.vocab[0]
        worker(args)
        return
    if not BLIMP.is_dir():
        sys.exit(f"BLiMP is not at {BLIMP} (see ../shared/data/README.md)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tok = tokenizer_dir(tmp)
        # MFU in CPU time (rates and peak alike): honest on a machine shared with other jobs
        peak = matmul_peak(threads=args.threads, clock=time.process_time)
        print(f"PLL of {args.sentences} BLiMP sentences, {args.preset} BERT (random, seeded), "
              f"{args.threads} thread(s), baseline batch {args.baseline_batch} sentences; "
              f"measured fp32 matmul peak {peak / 1e9:.1f} GFLOP per CPU second "
              f"(MFU: benchmarks/flops.py)")
        sides = ["mlmkit", "baseline"]
        if args.no_minicons or not minicons_installed():
            print("minicons: " + ("left out (--no-minicons)" if args.no_minicons else
                                  "not installed, its side is skipped (pip install -e "
                                  "'.[dev]' brings it)"))
        else:
            sides.append("minicons")
        for vocab in args.vocab:
            result = {}
            for side in sides:
                out = tmp / f"{side}-{vocab}.npy"
                command = [sys.executable, __file__, "--worker", side, "--vocab", str(vocab),
                           "--sentences", str(args.sentences), "--preset", args.preset,
                           "--baseline-batch", str(args.baseline_batch), "--threads",
                           str(args.threads), "--tokenizer", str(tok), "--out", str(out)]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{side} worker failed:\n{done.stderr[-3000:]}")
                result[side] = json.loads(done.stdout.strip().splitlines()[-1])
                result[side]["scores"] = np.load(out)
            m = result["mlmkit"]
            print(f"\nvocab {vocab:,} ({m['tokens']:,} scored tokens)")
            print(f"  {'':10} {'texts/s':>9} {'seconds':>8} {'CPU s':>8} {'GFLOP/CPU s':>11} "
                  f"{'MFU':>6} {'peak MiB':>9}")
            for side in sides:
                r = result[side]
                rate = r["flops"] / r["cpu_seconds"]
                print(f"  {side:10} {r['texts_per_s']:9.1f} {r['seconds']:8.2f} "
                      f"{r['cpu_seconds']:8.2f} {rate / 1e9:11.1f} {100 * rate / peak:5.1f}% "
                      f"{r['peak_mib']:9.0f}")
            for side in sides[1:]:
                b = result[side]
                diff = float(np.abs(m["scores"] - b["scores"]).max())
                print(f"  mlmkit vs {side}: speed-up {m['texts_per_s'] / b['texts_per_s']:.2f}x "
                      f"(CPU time {b['cpu_seconds'] / m['cpu_seconds']:.2f}x), peak memory "
                      f"{b['peak_mib'] / max(m['peak_mib'], 1):.1f}x lower, "
                      f"max |score difference| {diff:.2e}")


if __name__ == "__main__":
    main()
