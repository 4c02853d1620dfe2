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

`--loss cached-mnrl` trains instead with GradCache's in-batch-negatives loss on the STS-B
training pairs scored 4 or more (sentence1 → sentence2 as anchor → positive), a large
`--batch-size` embedded in pieces of `--mini-batch-size` texts: mlmkit's `cached-mnrl`
against sentence-transformers' `CachedMultipleNegativesRankingLoss`, and mlmkit's plain
`mnrl` on the same batches for the memory it needs without the cache.

`--loss splade` trains SPLADE on the same anchor → positive pairs: mlmkit's `splade` against
sentence-transformers' SparseEncoder (MLMTransformer + SpladePooling) with
`SpladeLoss(SparseMultipleNegativesRankingLoss)` and its trainer's default quadratic warm-up
of the regulariser weights (5e-5 on queries, 3e-5 on documents on both sides); both models
are then scored by the Spearman of the validation pairs' dot products, with the vectors'
mean number of non-zeros beside it.

Each side runs in its own subprocess, one after the other. Timed: the training call alone
(`trainer.train()`; `mlmkit.train_embeddings` without validation, its tokenizing and the
saving of its folder included), examples/s = training pairs × epochs / seconds; peak memory:
how far the process's peak resident set rose above its size when the call began. Then the
trained models are scored by the same code on STS-B validation (Spearman of the cosine,
×100), sentence-transformers' through its saved folder.

    .venv/bin/python benchmarks/embed_train.py --model runs/pretrain/final --threads 1
    .venv/bin/python benchmarks/embed_train.py --pairs 1000          # a quick look
    .venv/bin/python benchmarks/embed_train.py --loss cached-mnrl --batch-size 512 --mini-batch-size 32
    .venv/bin/python benchmarks/embed_train.py --loss splade --batch-size 16
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def resident_mib() -> float:
    """The process's resident set now (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_mib() -> float:
    """The process's peak resident set so far (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    data = out / {"cosent": "train.tsv", "splade": "anchors.tsv"}.get(args.loss, "pairs.tsv")
    if args.worker.startswith("mlmkit"):
        import mlmkit
        import mlmkit.finetuning  # imported before the clock starts, as the other side's

        loss = "mnrl" if args.worker == "mlmkit-mnrl" else args.loss
        extra = {"mini_batch_size": args.mini_batch_size} if loss == "cached-mnrl" else {}
        began, cpu_began, resident = time.perf_counter(), time.process_time(), resident_mib()
        result = mlmkit.train_embeddings(
            args.model, str(data), loss=loss, epochs=args.epochs,
            batch_size=args.batch_size, lr=args.lr, warmup=0.1, weight_decay=0.01,
            max_length=128, pooling="mean", run_dir=str(out / args.worker), device="cpu",
            precision="fp32", threads=args.threads, seed=0, progress=False, **extra)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        peak = peak_mib() - resident
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
        from sentence_transformers.sentence_transformer.losses import (
            CachedMultipleNegativesRankingLoss,
            CoSENTLoss,
        )

        if args.loss == "splade":
            seconds, cpu, peak, folder = sparse_trainer(args, data, out)
            loop = seconds
            print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "loop_seconds": loop,
                              "peak_mib": peak, **sparse_sts(folder, args.threads)}))
            return
        firsts, seconds_, scores = training_pairs(data, None)
        transformer = Transformer(args.model, max_seq_length=128)
        model = SentenceTransformer(modules=[transformer, Pooling(
            transformer.get_embedding_dimension(), "mean")], device="cpu")
        if args.loss == "cosent":
            dataset = Dataset.from_dict({"sentence1": firsts, "sentence2": seconds_,
                                         "score": [float(s) for s in scores]})
            loss = CoSENTLoss(model)
        else:
            dataset = Dataset.from_dict({"anchor": firsts, "positive": seconds_})
            loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=args.mini_batch_size)
        settings = SentenceTransformerTrainingArguments(**trainer_settings(args, out))
        trainer = SentenceTransformerTrainer(model=model, args=settings, train_dataset=dataset,
                                             loss=loss)
        began, cpu_began, resident = time.perf_counter(), time.process_time(), resident_mib()
        trainer.train()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        peak = peak_mib() - resident
        loop = seconds
        folder = str(out / "st-model")
        model.save(folder)
    if args.loss == "splade":
        print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "loop_seconds": loop,
                          "peak_mib": peak, **sparse_sts(folder, args.threads)}))
        return
    import mlmkit
    from mlmkit.evaluation.sts import evaluate_sts

    sts = evaluate_sts(mlmkit.load(folder, device="cpu", threads=args.threads),
                       STSB / "validation.tsv", pooling="mean")
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "loop_seconds": loop,
                      "peak_mib": peak, "spearman": sts.spearman, "pearson": sts.pearson}))


def trainer_settings(args, out: Path) -> dict:
    """The training arguments both sentence-transformers trainers get: the run's epochs,
    batch and learning rate, the schedule mlmkit's side uses, no saving, logging or bars."""
    return dict(output_dir=str(out / "st-run"), num_train_epochs=args.epochs,
                per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
                warmup_ratio=0.1, weight_decay=0.01, max_grad_norm=1.0, seed=0, use_cpu=True,
                save_strategy="no", report_to="none", logging_steps=10_000,
                disable_tqdm=True, dataloader_drop_last=False)


def sparse_trainer(args, data: Path, out: Path):
    """sentence-transformers' SPLADE training: (seconds, CPU seconds, peak MiB, folder)."""
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import (
        SparseEncoder,
        SparseEncoderTrainer,
        SparseEncoderTrainingArguments,
    )
    from sentence_transformers.sparse_encoder.losses import (
        SparseMultipleNegativesRankingLoss,
        SpladeLoss,
    )
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    from mlmkit.embeddings.pairs import read_examples

    anchors, positives = read_examples(data).columns
    model = SparseEncoder(modules=[MLMTransformer(args.model, max_seq_length=128),
                                   SpladePooling("max")], device="cpu")
    loss = SpladeLoss(model, SparseMultipleNegativesRankingLoss(model),
                      document_regularizer_weight=3e-5, query_regularizer_weight=5e-5)
    settings = SparseEncoderTrainingArguments(**trainer_settings(args, out))
    trainer = SparseEncoderTrainer(model=model, args=settings, loss=loss,
                                   train_dataset=Dataset.from_dict(
                                       {"anchor": anchors, "positive": positives}))
    began, cpu_began, resident = time.perf_counter(), time.process_time(), resident_mib()
    trainer.train()
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    peak = peak_mib() - resident
    folder = str(out / "st-model")
    model.save(folder)
    return seconds, cpu, peak, folder


def sparse_sts(folder: str, threads: int) -> dict:
    """STS-B validation: Spearman and Pearson of the SPLADE vectors' dot products (mlmkit's
    embed_sparse on either side's folder), and their mean number of non-zeros."""
    import numpy as np

    import mlmkit
    from mlmkit.core.correlation import pearson, spearman
    from mlmkit.embeddings.pairs import read_sts_pairs

    firsts, seconds, gold = read_sts_pairs(STSB / "validation.tsv")
    mlm = mlmkit.load(folder, device="cpu", threads=threads)
    vectors = mlm.embed_sparse(firsts + seconds, top_k=int(mlm.model.config.vocab_size),
                               progress=False)
    weights = [dict(zip(v.token_ids, v.weights, strict=True)) for v in vectors]
    dots = np.array([sum(w * weights[len(firsts) + i].get(t, 0.0) for t, w in a.items())
                     for i, a in enumerate(weights[:len(firsts)])])
    return {"spearman": spearman(dots, gold), "pearson": pearson(dots, gold),
            "active_dims": float(np.mean([len(v.token_ids) for v in vectors]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a saved masked LM (default: a random --preset BERT)")
    parser.add_argument("--preset", default="mini", help="a BERT size: tiny, mini, small, base")
    parser.add_argument("--pairs", type=int, default=None, help="training pairs (default all)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--loss", choices=("cosent", "cached-mnrl", "splade"), default="cosent")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--mini-batch-size", type=int, default=32,
                        help="cached-mnrl: texts per forward pass")
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
        close = [k for k, s in enumerate(scores) if s >= 4]  # the positives of cached-mnrl
        (tmp / "pairs.tsv").write_text("sentence1\tsentence2\tscore\n" + "".join(
            f"{firsts[k]}\t{seconds[k]}\t{scores[k]}\n" for k in close))
        (tmp / "anchors.tsv").write_text("anchor\tpositive\n" + "".join(  # splade's
            f"{firsts[k]}\t{seconds[k]}\n" for k in close))
        results = {}
        sides = ("sentence-transformers", "mlmkit") if args.loss in ("cosent", "splade") else \
            ("sentence-transformers", "mlmkit", "mlmkit-mnrl")
        for side in sides:
            done = subprocess.run(
                [sys.executable, __file__, "--worker", side, "--model", model, "--out",
                 str(tmp), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                 "--lr", str(args.lr), "--threads", str(args.threads), "--loss", args.loss,
                 "--mini-batch-size", str(args.mini_batch_size)],
                capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
    pairs = len(scores) if args.loss == "cosent" else len(close)
    examples = pairs * args.epochs
    what = f"CoSENT on {pairs:,} STS-B training pairs" if args.loss == "cosent" else \
        f"SPLADE on {pairs:,} STS-B training pairs scored >= 4" if args.loss == "splade" else \
        (f"cached MNRL on {pairs:,} STS-B training pairs scored >= 4, mini-batches of "
         f"{args.mini_batch_size} texts")
    print(f"embedding training: {what}, {args.epochs} "
          f"epoch(s), batch {args.batch_size}, lr {args.lr:g}, mean pooling, float32, "
          f"{args.threads} thread(s), CPU; model {args.model or 'bert-' + args.preset}")
    for name, r in results.items():
        label = "mlmkit (plain mnrl)" if name == "mlmkit-mnrl" else name
        print(f"  {label:<22} {examples / r['seconds']:>8,.1f} examples/s ({r['seconds']:.1f} s "
              f"wall, {r['cpu_seconds']:.1f} s CPU; the step loop {r['loop_seconds']:.1f} s; "
              f"peak memory +{r['peak_mib']:,.0f} MiB)  "
              f"STS-B validation Spearman {100 * r['spearman']:.2f}"
              + (f", {r['active_dims']:,.0f} non-zeros a vector" if "active_dims" in r else ""))
    st, ours = results["sentence-transformers"], results["mlmkit"]
    print(f"  speed-up: {st['seconds'] / ours['seconds']:.2f}x wall, "
          f"{st['cpu_seconds'] / ours['cpu_seconds']:.2f}x CPU time (target >= 1.5x); Spearman "
          f"difference {100 * (ours['spearman'] - st['spearman']):+.2f} points (target >= -1)")


if __name__ == "__main__":
    main()
