"""Fine-tuning speed: `mlmkit.finetune` against the Hugging Face Trainer at its best CPU
settings, in one run (SST-2, or AG News with `--task agnews`).

The baseline is the Trainer with `train_sampling_strategy="group_by_length"` (its own
length grouping: little padding), in bf16 (autocast, where the device multiplies bf16
natively) or fp32, whichever is faster in this run: for a small model on a CPU the casts
of bf16 autocast can cost more than its faster products save. mlmkit's rows:

- `mlmkit` (the default): packed batches, no padding and no length bucketing (examples
  meet in a random order, as in the Trainer's default sampler), where the model has
  unpadded attention (ModernBERT and its presets, BERT, RoBERTa, XLM-R, ELECTRA;
  finetuning/packing.py);
- `mlmkit, fp32`: the same without bf16 autocast (`precision="fp32"`);
- `mlmkit, padded + bucketed`: padded batches bucketed by length (the default of families
  without packing; bucketing changes which examples share a step).

Both sides train the same saved model (`--model`, else a random `--preset` model written
once) on the same SST-2 rows (../shared/data/sst2) with the same recipe (batch 16, length
128, 10% linear warm-up, weight decay 0.01, clipping 1.0, AdamW, `--lr`, seed). Each row
runs `--repeats` times, interleaved (the machine is shared: the best of the repeats is the
least disturbed). Printed per row: training examples/s (training steps only, evaluation
excluded, timed the same way on both sides), the ratio to the baseline, the last epoch's
validation accuracy, and the MFU (benchmarks/flops.py: 3× the forward of each row's real
tokens, over a matmul peak measured in this run: bf16 where native, else fp32).

    python benchmarks/finetune_speed.py                      # about 5 minutes on 2 CPU cores
    python benchmarks/finetune_speed.py --train 1000 --repeats 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from trainer_baseline import run_trainer  # noqa: E402

from mlmkit.finetuning.tasks import get_task  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SST2 = DATA / "sst2"


def task_rows(task: str) -> tuple[str, list[str], list[str] | None]:
    """(header, training lines, validation lines or None) of `task`'s TSV files, labels as
    numbers. AG News has a training file only (None: `write_sample` draws the validation
    rows from it, disjoint from the training sample)."""
    if task == "sst2":
        train = (SST2 / "train.tsv").read_text().splitlines()
        return train[0], train[1:], (SST2 / "validation.tsv").read_text().splitlines()[1:]
    lines = (DATA / "agnews" / "train.tsv").read_text().splitlines()
    labels = get_task(task).labels  # numbered as mlmkit's task numbers them
    numbered = [f"{text}\t{labels.index(label)}"
                for text, label in (line.rsplit("\t", 1) for line in lines[1:])]
    return lines[0], numbered, None


def write_sample(folder: Path, n_train: int, n_valid: int,
                 task: str = "sst2") -> tuple[Path, Path]:
    """A seeded sample of each split of `task` (sst2, agnews), as TSV files both sides read
    (labels as numbers)."""
    header, train, valid = task_rows(task)
    drawn = np.random.default_rng(0).permutation(len(train))
    samples = [(train, drawn[:n_train])]
    if valid is None:  # validation rows from those the training sample left
        if n_train + n_valid > len(train):
            raise SystemExit(f"--train {n_train} + --valid {n_valid}: {task} has "
                             f"{len(train)} rows; ask for fewer")
        samples.append((train, drawn[n_train:n_train + n_valid]))
    else:
        samples.append((valid, np.random.default_rng(0).permutation(len(valid))[:n_valid]))
    out = []
    for name, (lines, rows) in zip(("train", "validation"), samples, strict=True):
        path = folder / f"{name}.tsv"
        path.write_text("\n".join([header, *(lines[i] for i in sorted(rows))]) + "\n")
        out.append(path)
    return out[0], out[1]


def build_model(folder: Path, preset: str, train_file: Path) -> Path:
    """A random `preset` model with a WordPiece tokenizer trained on the training sample's
    texts and 20,000 SST-2 sentences."""
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    texts = [line.split("\t")[0] for line in train_file.read_text().splitlines()[1:]]
    extra = [line.split("\t")[0]
             for line in (SST2 / "train.tsv").read_text().splitlines()[1:20001]]
    tok = train_tokenizer(texts + extra, folder / "tok", kind="wordpiece", vocab_size=8192,
                          show_progress=False)
    model = build_mlm(preset, tok, max_length=128, seed=0)
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    return folder / "model"


def run_mlmkit(model_dir, train, valid, args, **options) -> dict:
    import mlmkit

    result = mlmkit.finetune(str(model_dir), args.task, train=train, validation=valid,
                             epochs=args.epochs, lr=args.lr, seed=args.seed, device="cpu",
                             threads=args.threads, progress=False, **options)
    run = result.runs[0]
    return {"examples_per_s": run.examples_per_s, "accuracy": run.history[-1]["accuracy"],
            "train_seconds": run.train_seconds}


def example_flops(model_dir, train, labels: int) -> float:
    """Mean training FLOPs of one training row: its real tokens, a classifier read at its
    first token (benchmarks/flops.py)."""
    from flops import classifier_train_flops
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    texts = [line.split("\t")[0] for line in Path(train).read_text().splitlines()[1:]]
    lengths = [len(ids) for ids in tok(texts, truncation=True, max_length=128)["input_ids"]]
    return classifier_train_flops(config, lengths, labels) / len(lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("sst2", "agnews"), default="sst2",
                        help="SST-2 (short sentences) or AG News (4 classes, news leads of "
                        "about 50 tokens)")
    parser.add_argument("--model", default=None, help="a saved masked LM (default: a random "
                        "--preset model built here)")
    parser.add_argument("--preset", default="modernbert-mini", help="the model `make demo` "
                        "trains")
    parser.add_argument("--lr", type=float, default=1e-3, help="both sides (1e-3 suits a "
                        "random model; use 4e-5 with a pretrained --model)")
    parser.add_argument("--train", type=int, default=4000, help="training rows")
    parser.add_argument("--valid", type=int, default=1000, help="validation rows")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each row, "
                        "interleaved; the fastest is reported")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    from flops import matmul_peak, mfu_text

    from mlmkit.core.devices import native_bf16, set_threads

    args.threads = set_threads(args.threads)
    bf16 = native_bf16(torch.device("cpu"))
    load = os.getloadavg()[0]
    trainers = {f"HF Trainer, group_by_length, {'bf16' if half else 'fp32'}": half
                for half in ([True, False] if bf16 else [False])}
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        train, valid = write_sample(folder, args.train, args.valid, args.task)
        labels = len(get_task(args.task).labels)
        model_dir = Path(args.model) if args.model else build_model(folder, args.preset,
                                                                    train)
        runs = {"mlmkit": lambda: run_mlmkit(model_dir, train, valid, args),
                "mlmkit, fp32": lambda: run_mlmkit(model_dir, train, valid, args,
                                                   precision="fp32"),
                "mlmkit, padded + bucketed": lambda: run_mlmkit(
                    model_dir, train, valid, args, packed=False, bucket=True)}
        for name, half in trainers.items():
            runs[name] = lambda half=half: run_trainer(model_dir, train, valid, lr=args.lr,
                                                       epochs=args.epochs, seed=args.seed,
                                                       bf16=half, num_labels=labels)
        for _ in range(args.repeats):
            for name, run in runs.items():
                rows.setdefault(name, []).append(run())
        per_example = example_flops(model_dir, train, labels)
    peak = matmul_peak(torch.bfloat16 if bf16 else None, threads=args.threads)
    best = {name: max(runs, key=lambda r: r["examples_per_s"]) for name, runs in rows.items()}
    baseline = max(trainers, key=lambda name: best[name]["examples_per_s"])
    base = best[baseline]["examples_per_s"]
    task = {"sst2": "SST-2", "agnews": "AG News"}[args.task]
    print(f"{task}, {args.model or args.preset}, lr {args.lr:g}, {args.train} training rows × "
          f"{args.epochs} epoch(s), {args.valid} validation rows, {args.threads} thread(s), "
          f"best of {args.repeats}; load average {load:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    print(f"{'':34} {'examples/s':>10} {'vs baseline':>11} {'accuracy':>9} {'train s':>8}")
    for name, row in best.items():
        print(f"{name:34} {row['examples_per_s']:10.1f} {row['examples_per_s'] / base:10.2f}× "
              f"{100 * row['accuracy']:8.2f}% {row['train_seconds']:8.1f}")
    print(f"baseline: {baseline} (the faster Trainer row); mlmkit "
          f"{best['mlmkit']['examples_per_s'] / base:.2f}×, mlmkit fp32 "
          f"{best['mlmkit, fp32']['examples_per_s'] / base:.2f}× its examples/s")
    shares = {name: row["examples_per_s"] * per_example / peak for name, row in best.items()}
    print(mfu_text(shares, peak))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows, "mfu": shares,
                                               "peak_flops": peak}, indent=1))


if __name__ == "__main__":
    main()
