"""Fine-tuning speed and accuracy: `mlmkit.finetune` vs the Hugging Face Trainer, in one run.

The same saved model (a BERT of the `--preset` shape, random weights written once and loaded
by both; no pretrained model is available offline), the same SST-2 training rows and validation rows (../shared/data/sst2), the same
hyperparameters (mlmkit's defaults: batch 16, length 128, 10% linear warm-up, weight decay
0.01, gradient clipping 1.0, AdamW; the learning rate `--lr`, 1e-3 by default since the model
starts from random weights) and the same seed. The Trainer gets
`DataCollatorWithPadding` (dynamic padding, its standard recipe for GLUE) and its default
sampler; mlmkit uses its length-bucketed batches. Printed: training examples/s of each
(training steps only, evaluation excluded, both timed the same way), the ratio, the
validation accuracy each reaches, and mlmkit with LoRA (rank 8) beside full fine-tuning.
A second Trainer row uses `train_sampling_strategy="group_by_length"` (its own bucketing) so the
ratio is shown against the best Trainer setting too. The MFU of each row (benchmarks/flops.py:
3× the forward of each training row's real tokens, 2× for LoRA's frozen weights, over a
matmul peak measured in this run at the same threads, both in wall time) follows the table.

    python benchmarks/finetune.py                  # about 6 minutes on 2 busy CPU cores
    python benchmarks/finetune.py --train 1000 --valid 300 --epochs 1    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

SST2 = Path(__file__).resolve().parents[2] / "shared" / "data" / "sst2"


def write_sample(folder: Path, n_train: int, n_valid: int) -> tuple[Path, Path]:
    """The first rows of a seeded shuffle of each split, as TSV files both sides read."""
    out = []
    for name, count in (("train", n_train), ("validation", n_valid)):
        lines = (SST2 / f"{name}.tsv").read_text().splitlines()
        order = np.random.default_rng(0).permutation(len(lines) - 1)[:count] + 1
        path = folder / f"{name}.tsv"
        path.write_text("\n".join([lines[0], *(lines[i] for i in sorted(order))]) + "\n")
        out.append(path)
    return out[0], out[1]


def build_model(folder: Path, preset: str, train_file: Path) -> Path:
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    texts = [line.split("\t")[0] for line in train_file.read_text().splitlines()[1:]]
    extra = (SST2 / "train.tsv").read_text().splitlines()[1:20001]
    tok = train_tokenizer(texts + [line.split("\t")[0] for line in extra], folder / "tok",
                          kind="wordpiece", vocab_size=8192, show_progress=False)
    model = build_mlm(preset, tok, max_length=128, seed=0)
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    return folder / "model"


def run_mlmkit(model_dir, train, valid, args, **extra) -> dict:
    import mlmkit

    started = time.perf_counter()
    result = mlmkit.finetune(str(model_dir), "sst2", train=train, validation=valid,
                             epochs=args.epochs, lr=args.lr, seed=args.seed, device="cpu",
                             threads=args.threads, progress=False, **extra)
    run = result.runs[0]
    return {"examples_per_s": run.examples_per_s, "accuracy": run.history[-1]["accuracy"],
            "best_accuracy": run.metrics["accuracy"], "train_seconds": run.train_seconds,
            "wall_seconds": time.perf_counter() - started, "truncated": run.truncated}


def run_trainer(model_dir, train, valid, args, group_by_length: bool = False) -> dict:
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(model_dir)

    def load(path):
        rows = [line.split("\t") for line in Path(path).read_text().splitlines()[1:]]
        enc = tok([r[0] for r in rows], truncation=True, max_length=128)
        return [{"input_ids": ids, "attention_mask": mask, "labels": int(r[1])}
                for ids, mask, r in zip(enc["input_ids"], enc["attention_mask"], rows,
                                        strict=True)]

    train_rows, valid_rows = load(train), load(valid)
    started = time.perf_counter()
    torch.manual_seed(args.seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out, per_device_train_batch_size=16, per_device_eval_batch_size=64,
            learning_rate=args.lr, num_train_epochs=args.epochs, warmup_steps=0.1,
            weight_decay=0.01, max_grad_norm=1.0, lr_scheduler_type="linear",
            seed=args.seed, eval_strategy="no", save_strategy="no", report_to=[],
            logging_strategy="no", use_cpu=True, dataloader_num_workers=0,
            train_sampling_strategy="group_by_length" if group_by_length else "random",
            disable_tqdm=True)
        trainer = Trainer(model=model, args=targs, train_dataset=train_rows,
                          data_collator=DataCollatorWithPadding(tok))
        metrics = trainer.train().metrics
        predictions = trainer.predict(valid_rows)
    accuracy = float(np.mean(predictions.predictions.argmax(-1) == predictions.label_ids))
    return {"examples_per_s": len(train_rows) * args.epochs / metrics["train_runtime"],
            "accuracy": accuracy, "train_seconds": metrics["train_runtime"],
            "wall_seconds": time.perf_counter() - started}


def example_flops(model_dir, train) -> tuple[float, float]:
    """Mean training FLOPs of one training row (full fine-tuning, LoRA): its real tokens
    (truncated at 128, no padding), a classifier read at [CLS] (benchmarks/flops.py)."""
    from flops import classifier_train_flops
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    texts = [line.split("\t")[0] for line in Path(train).read_text().splitlines()[1:]]
    lengths = [len(ids) for ids in tok(texts, truncation=True, max_length=128)["input_ids"]]
    return tuple(classifier_train_flops(config, lengths, 2, frozen) / len(lengths)
                 for frozen in (False, True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert-tiny")
    parser.add_argument("--lr", type=float, default=1e-3, help="both sides (the model starts "
                        "from random weights: mlmkit's default 4e-5 suits pretrained ones)")
    parser.add_argument("--train", type=int, default=6000, help="training rows")
    parser.add_argument("--valid", type=int, default=1000, help="validation rows")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    from mlmkit.core.devices import set_threads

    threads = set_threads(args.threads)
    args.threads = threads
    load = os.getloadavg()[0]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        train, valid = write_sample(folder, args.train, args.valid)
        model_dir = build_model(folder, args.preset, train)
        rows["mlmkit"] = run_mlmkit(model_dir, train, valid, args)
        rows["HF Trainer"] = run_trainer(model_dir, train, valid, args)
        rows["HF Trainer, by length"] = run_trainer(model_dir, train, valid, args, True)
        rows["mlmkit --lora (r 8)"] = run_mlmkit(model_dir, train, valid, args, lora=True)
        per_example = example_flops(model_dir, train)
    from flops import matmul_peak, mfu_text

    peak = matmul_peak(threads=threads)
    base = rows["HF Trainer"]
    print(f"SST-2, {args.preset}, lr {args.lr:g}, {args.train} training rows × {args.epochs} epochs, "
          f"{args.valid} validation rows, {threads} thread(s), load average {load:.2f} at "
          f"start, {os.getloadavg()[0]:.2f} at the end")
    print(f"{'':30} {'examples/s':>10} {'vs Trainer':>10} {'accuracy':>9} {'train s':>8}")
    for name, row in rows.items():
        print(f"{name:30} {row['examples_per_s']:10.1f} "
              f"{row['examples_per_s'] / base['examples_per_s']:9.2f}× "
              f"{100 * row['accuracy']:8.2f}% {row['train_seconds']:8.1f}")
    gap = 100 * (rows["mlmkit"]["accuracy"] - base["accuracy"])
    print(f"mlmkit vs HF Trainer: {rows['mlmkit']['examples_per_s'] / base['examples_per_s']:.2f}×"
          f" examples/s, accuracy {gap:+.2f} points (last epoch, same validation rows)")
    shares = {name: row["examples_per_s"] * per_example[name.startswith("mlmkit --lora")]
              / peak for name, row in rows.items()}
    print(mfu_text(shares, peak))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows, "mfu": shares,
                                               "peak_flops": peak}, indent=1))


if __name__ == "__main__":
    main()
