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
once) on the same SST-2 rows (../shared/data/sst2) with the same recipe (`--recipe`: batch
16, 10% linear warm-up, weight decay 0.01; or the Trainer's defaults, which are mlmkit's:
batch 8, neither; length 128, clipping 1.0, AdamW, `--lr`, seed). Each row
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
from finetune_data import (  # noqa: E402
    DATA,
    TASK_NAMES,
    add_file_arguments,
    draw,
    task_lines,
    texts_of,
    write_sample,
)
from trainer_baseline import RECIPES, add_recipe_argument, run_trainer  # noqa: E402

from mlmkit.finetuning.tasks import get_task  # noqa: E402

SST2 = DATA / "sst2"


def write_samples(folder: Path, args) -> tuple[Path, Path]:
    """The training and validation samples of `args.task` (finetune_data.py): `--train`
    rows of a fixed shuffle of the training file, `--valid` rows of the test file (AG News:
    the next rows of the same shuffle, disjoint from the training rows)."""
    header, lines, test = task_lines(args.task, args.train_file, args.test_file)
    if test is None:  # one shuffle: the training rows first, the validation rows next
        drawn = draw(np.arange(len(lines)), args.train + args.valid, 0)
        train_rows, valid = drawn[:args.train], write_sample(
            folder / "validation.tsv", header, lines, drawn[args.train:])
    else:
        train_rows = draw(np.arange(len(lines)), args.train, 0)
        valid = write_sample(folder / "validation.tsv", header, test,
                             draw(np.arange(len(test)), args.valid, 0))
    return write_sample(folder / "train.tsv", header, lines, train_rows), valid


def build_model(folder: Path, preset: str, train_file: Path, task: str = "sst2") -> Path:
    """A random `preset` model with a WordPiece tokenizer trained on the training sample's
    texts and 20,000 SST-2 sentences."""
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    texts = texts_of(train_file, task)
    extra = texts_of(SST2 / "train.tsv", "sst2")[:20000]
    tok = train_tokenizer(texts + extra, folder / "tok", kind="wordpiece", vocab_size=8192,
                          show_progress=False)
    model = build_mlm(preset, tok, max_length=128, seed=0)
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    return folder / "model"


def run_mlmkit(model_dir, train, valid, args, **options) -> dict:
    import mlmkit

    result = mlmkit.finetune(str(model_dir), args.task, train=train, validation=valid,
                             epochs=args.epochs, lr=args.lr, **RECIPES[args.recipe],
                             seed=args.seed, device="cpu", threads=args.threads,
                             progress=False, **options)
    run = result.runs[0]
    return {"examples_per_s": run.examples_per_s, "accuracy": run.history[-1]["accuracy"],
            "train_seconds": run.train_seconds}


def example_flops(model_dir, train, task: str, labels: int) -> float:
    """Mean training FLOPs of one training row: its real tokens, a classifier read at its
    first token (benchmarks/flops.py)."""
    from flops import classifier_train_flops
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    texts = texts_of(train, task)
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
    add_file_arguments(parser)
    parser.add_argument("--epochs", type=int, default=1)
    add_recipe_argument(parser)
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
        train, valid = write_samples(folder, args)
        labels = len(get_task(args.task).labels)
        model_dir = Path(args.model) if args.model else build_model(folder, args.preset,
                                                                    train, args.task)
        runs = {"mlmkit": lambda: run_mlmkit(model_dir, train, valid, args),
                "mlmkit, fp32": lambda: run_mlmkit(model_dir, train, valid, args,
                                                   precision="fp32"),
                "mlmkit, padded + bucketed": lambda: run_mlmkit(
                    model_dir, train, valid, args, packed=False, bucket=True)}
        for name, half in trainers.items():
            runs[name] = lambda half=half: run_trainer(model_dir, train, valid, lr=args.lr,
                                                       epochs=args.epochs, seed=args.seed,
                                                       bf16=half, task=args.task,
                                                       recipe=RECIPES[args.recipe])
        for _ in range(args.repeats):
            for name, run in runs.items():
                rows.setdefault(name, []).append(run())
        per_example = example_flops(model_dir, train, args.task, labels)
    peak = matmul_peak(torch.bfloat16 if bf16 else None, threads=args.threads)
    best = {name: max(runs, key=lambda r: r["examples_per_s"]) for name, runs in rows.items()}
    baseline = max(trainers, key=lambda name: best[name]["examples_per_s"])
    base = best[baseline]["examples_per_s"]
    task = TASK_NAMES[args.task]
    recipe = RECIPES[args.recipe]
    print(f"{task}, {args.model or args.preset}, lr {args.lr:g}, batch {recipe['batch_size']}, "
          f"warm-up {recipe['warmup']:g}, weight decay {recipe['weight_decay']:g}, "
          f"{args.train} training rows × "
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
