"""Embedding speed: `mlmkit embed` against sentence-transformers' `encode`, same model, same
texts, same threads, float32, mean pooling.

sentence-transformers sorts the texts by length and runs batches of `--st-batch` (its
default 32) padded to the batch's longest text, with an attention mask, through the encoder
(a `BertModel`, its pooler included). mlmkit sorts the texts by length, cuts batches under a
padded-token budget, runs a batch of one length without padding or attention mask, and never
builds the MLM head. Both embed the sentences of STS-B's validation split with a
`--preset` BERT whose WordPiece tokenizer is trained on python-docs (random weights: speed
does not depend on them), saved once and loaded by both sides from the same directory.

Each side runs in its own subprocess (`--repeats` times, the best kept), after a warm-up on
32 texts; the vectors of the two sides are compared (largest absolute difference). MFU
counts the encoder's matmul FLOPs at every real token (padding is not counted), over the
square-matmul peak measured in the same run and threads.

    .venv/bin/python benchmarks/embed.py                      # 3,000 sentences, 1 thread
    .venv/bin/python benchmarks/embed.py --texts 500 --threads 2 --preset small
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from flops import _shape, matmul_peak, mfu, mfu_text

ROOT = Path(__file__).resolve().parents[1]
STSB = ROOT.parent / "shared" / "data" / "stsb" / "validation.tsv"


def sentences(n: int) -> list[str]:
    from mlmkit.evaluation.sts import read_sts_pairs

    firsts, seconds, _ = read_sts_pairs(STSB)
    texts = [t for pair in zip(firsts, seconds, strict=True) for t in pair]
    return (texts * (n // len(texts) + 1))[:n]


def build(directory: Path, preset: str) -> None:
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(python_docs("train")[:3000], directory / "tokenizer",
                                kind="wordpiece", vocab_size=8192, show_progress=False)
    build_mlm(f"bert-{preset}", tokenizer, max_length=512, seed=0).save_pretrained(
        directory / "model")
    tokenizer.save_pretrained(directory / "model")


def encoder_flops(config, lengths) -> float:
    d, inter, layers, _, ffn = _shape(config)
    per_token = 2 * (4 * d * d + ffn * d * inter)
    return float(sum(layers * n * (per_token + 4 * n * d) for n in lengths))


def worker(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    texts = sentences(args.texts)
    model_dir = str(Path(args.dir) / "model")
    if args.worker == "mlmkit":
        import mlmkit

        mlm = mlmkit.load(model_dir, device="cpu", threads=args.threads)

        def run(subset):
            return mlm.embed(subset, pooling="mean", progress=False)
        config, tokenizer = mlm.model.config, mlm.tokenizer
    else:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.models import Pooling, Transformer

        transformer = Transformer(model_dir)
        st = SentenceTransformer(modules=[transformer, Pooling(
            transformer.get_embedding_dimension(), "mean")], device="cpu")

        def run(subset):
            return st.encode(subset, batch_size=args.st_batch, show_progress_bar=False,
                             convert_to_numpy=True)
        config, tokenizer = transformer.auto_model.config, transformer.tokenizer
    run(texts[:32])  # warm-up
    best = None
    for _ in range(args.repeats):
        began, cpu_began = time.perf_counter(), time.process_time()
        vectors = run(texts)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        if best is None or seconds < best[0]:
            best = (seconds, cpu)
    np.save(args.out, np.asarray(vectors, dtype=np.float32))
    lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    print(json.dumps({"seconds": best[0], "cpu_seconds": best[1],
                      "texts_per_s": len(texts) / best[0], "flops": encoder_flops(config, lengths),
                      "tokens": int(sum(lengths))}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--preset", default="mini", help="a BERT size: tiny, mini, small, base")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--st-batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build(tmp, args.preset)
        results = {}
        for side in ("sentence-transformers", "mlmkit"):
            out = tmp / f"{side}.npy"
            done = subprocess.run(
                [sys.executable, __file__, "--worker", side, "--dir", str(tmp), "--out",
                 str(out), "--texts", str(args.texts), "--threads", str(args.threads),
                 "--st-batch", str(args.st_batch), "--repeats", str(args.repeats)],
                capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
            results[side]["vectors"] = np.load(out)
        peak = matmul_peak(threads=args.threads)
    st, ours = results["sentence-transformers"], results["mlmkit"]
    difference = float(np.abs(st["vectors"] - ours["vectors"]).max())
    print(f"embed: {args.texts} STS-B sentences ({ours['tokens']:,} tokens), bert-{args.preset}, "
          f"mean pooling, float32, {args.threads} thread(s), CPU")
    for name, r in (("sentence-transformers encode", st), ("mlmkit embed", ours)):
        print(f"  {name:<29} {r['texts_per_s']:>9,.1f} texts/s  ({r['seconds']:.2f} s wall, "
              f"{r['cpu_seconds']:.2f} s CPU)")
    print(f"  speed-up: {ours['texts_per_s'] / st['texts_per_s']:.2f}x wall, "
          f"{st['cpu_seconds'] / ours['cpu_seconds']:.2f}x CPU time (target >= 1.5x)")
    print("  " + mfu_text({"sentence-transformers": mfu(st["flops"], st["seconds"], peak),
                           "mlmkit": mfu(ours["flops"], ours["seconds"], peak)}, peak))
    print(f"  largest difference of the vectors: {difference:.2e}")


if __name__ == "__main__":
    main()
