"""Embedding training: `mlmkit.train_embeddings` against sentence-transformers'
`SentenceTransformerTrainer`, same model, loss, data and settings, then the STS-B validation
Spearman each reaches.

Both sides train the same saved masked LM (`--model`, e.g. the output of `make demo`; by
default a random `--preset` BERT with a python-docs tokenizer, where the Spearman means
little) with the CoSENT loss on STS-B's training pairs (`--pairs` of them, all by default),
`--epochs` epochs of batches of `--batch-size` in a seeded random order, AdamW at `--lr`
with 10% linear warm-up, weight decay 0.01, gradient clipping at 1.0, mean pooling, float32,
`--threads` threads. sentence-transformers runs its trainer (Hugging Face's `Trainer`
underneath: a padded batch per column, the first column in its own forward pass);
mlmkit runs every text of a step in one pass over length groups, each padded to its own
longest text (`mlmkit.finetuning.embedding_encoder`).

Each side runs in its own subprocess, one after the other. Timed: the training call alone
(`trainer.train()`; `mlmkit.train_embeddings` without validation, its tokenizing and the
saving of its folder included), examples/s = training pairs × epochs / seconds. Then both
trained models are scored by the same code on STS-B validation (Spearman of the cosine,
×100), sentence-transformers' through its saved folder.

    .venv/bin/python benchmarks/embed_train.py --model runs/pretrain/final --threads 1
    .venv/bin/python benchmarks/embed_train.py --pairs 1000          # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
STSB = ROOT.parent / "shared" / "data" / "stsb"


def build(directory: Path, preset: str) -> Path:
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(python_docs("train")[:3000], directory / "tokenizer",
                                kind="wordpiece", vocab_size=8192, show_progress=False)
    build_mlm(f"bert-{preset}", tokenizer, max_length=512, seed=0).save_pretrained(
        directory / "model")
    tokenizer.save_pretrained(directory / "model")
    return directory / "model"


def training_pairs(path: Path, count: int | None):
    from mlmkit.embeddings.pairs import read_sts_pairs

    firsts, seconds, scores = read_sts_pairs(path)
    count = count or len(scores)
    return firsts[:count], seconds[:count], scores[:count]


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    if args.worker == "mlmkit":
        import mlmkit
        import mlmkit.finetuning  # imported before the clock starts, as the other side's

        began, cpu_began = time.perf_counter(), time.process_time()
        result = mlmkit.train_embeddings(
            args.model, str(out / "train.tsv"), loss="cosent", epochs=args.epochs,
            batch_size=args.batch_size, lr=args.lr, warmup=0.1, weight_decay=0.01,
            max_length=128, pooling="mean", run_dir=str(out / "run"), device="cpu",
            precision="fp32", threads=args.threads, seed=0, progress=False)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        loop = result.train_seconds
        folder = result.model_dir
    else:
        from datasets import Dataset
        from sentence_transformers import (
            SentenceTransformer,
            SentenceTransformerTrainer,
            SentenceTransformerTrainingArguments,
        )
        from sentence_transformers.models import Pooling, Transformer
        from sentence_transformers.sentence_transformer.losses import CoSENTLoss

        firsts, seconds_, scores = training_pairs(out / "train.tsv", None)
        transformer = Transformer(args.model, max_seq_length=128)
        model = SentenceTransformer(modules=[transformer, Pooling(
            transformer.get_embedding_dimension(), "mean")], device="cpu")
        data = Dataset.from_dict({"sentence1": firsts, "sentence2": seconds_,
                                  "score": [float(s) for s in scores]})
        settings = SentenceTransformerTrainingArguments(
            output_dir=str(out / "st-run"), num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
            warmup_ratio=0.1, weight_decay=0.01, max_grad_norm=1.0, seed=0, use_cpu=True,
            save_strategy="no", report_to="none", logging_steps=10_000,
            disable_tqdm=True, dataloader_drop_last=False)
        trainer = SentenceTransformerTrainer(model=model, args=settings, train_dataset=data,
                                             loss=CoSENTLoss(model))
        began, cpu_began = time.perf_counter(), time.process_time()
        trainer.train()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        loop = seconds
        folder = str(out / "st-model")
        model.save(folder)
    import mlmkit
    from mlmkit.evaluation.sts import evaluate_sts

    sts = evaluate_sts(mlmkit.load(folder, device="cpu", threads=args.threads),
                       STSB / "validation.tsv", pooling="mean")
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "loop_seconds": loop,
                      "spearman": sts.spearman, "pearson": sts.pearson}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a saved masked LM (default: a random --preset BERT)")
    parser.add_argument("--preset", default="mini", help="a BERT size: tiny, mini, small, base")
    parser.add_argument("--pairs", type=int, default=None, help="training pairs (default all)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model or str(build(tmp, args.preset))
        firsts, seconds, scores = training_pairs(STSB / "train.tsv", args.pairs)
        (tmp / "train.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(
            f"{a}\t{b}\t{s}\n" for a, b, s in zip(firsts, seconds, scores, strict=True)))
        results = {}
        for side in ("sentence-transformers", "mlmkit"):
            done = subprocess.run(
                [sys.executable, __file__, "--worker", side, "--model", model, "--out",
                 str(tmp), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                 "--lr", str(args.lr), "--threads", str(args.threads)],
                capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
    examples = len(scores) * args.epochs
    print(f"embedding training: CoSENT on {len(scores):,} STS-B training pairs, {args.epochs} "
          f"epoch(s), batch {args.batch_size}, lr {args.lr:g}, mean pooling, float32, "
          f"{args.threads} thread(s), CPU; model {args.model or 'bert-' + args.preset}")
    for name, r in results.items():
        print(f"  {name:<22} {examples / r['seconds']:>8,.1f} examples/s ({r['seconds']:.1f} s "
              f"wall, {r['cpu_seconds']:.1f} s CPU; the step loop {r['loop_seconds']:.1f} s)  "
              f"STS-B validation Spearman {100 * r['spearman']:.2f}")
    st, ours = results["sentence-transformers"], results["mlmkit"]
    print(f"  speed-up: {st['seconds'] / ours['seconds']:.2f}x wall, "
          f"{st['cpu_seconds'] / ours['cpu_seconds']:.2f}x CPU time (target >= 1.5x); Spearman "
          f"difference {100 * (ours['spearman'] - st['spearman']):+.2f} points (target >= -1)")


if __name__ == "__main__":
    main()
