"""Fine-tuning accuracy and speed over seeds: `mlmkit.finetune` vs the Hugging Face Trainer.

Each seed draws its own sample of training rows (SST-2 by default, ../shared/data/sst2;
`--task agnews` for AG News; `--train-file`/`--test-file` for files of your own, read by
mlmkit's reader on both sides: finetune_data.py) and trains three ways on it, from the
same pretrained model: mlmkit (packed batches, fp32), the Trainer with its data defaults
(random sampler, `DataCollatorWithPadding`), and the Trainer with
`train_sampling_strategy="group_by_length"` (its length grouping, its fastest CPU setting).
The hyper-parameters are the same on all three, by default the issue's recipe
(`--recipe shared`: 3 epochs, `--lr` 4e-5, batch 16, max length 128, 10% linear warm-up,
weight decay 0.01); `--recipe defaults --lr 5e-5` gives both sides their shipped defaults
(batch 8, no warm-up, no weight decay: the Trainer's, which are mlmkit's), and
`--sides mlmkit-auto,...` mlmkit's default precision (bf16 autocast where native). The
Trainer's clipping at 1.0 and AdamW are mlmkit's too; the Trainer runs in fp32. The model is scored on a fixed held-out sample (SST-2's validation rows; for a
task without a test file, rows held out of its training file) that no side trains or
selects on; the last epoch's model is scored on both sides.

Printed: each side's accuracy per seed, mean and standard deviation over seeds; the mean
difference mlmkit − Trainer with a 95% bootstrap interval (seeds and held-out rows both
resampled: the interval covers the seed-to-seed spread and the test set's finite size);
training examples/s of each side (training steps only) and the ratios.

`--sides` picks the rows: also `mlmkit-bucket` (length-bucketed batches), `mlmkit-padded`
(padded batches, no packing), `mlmkit-auto` (precision "auto": bf16 autocast where the
hardware has it) and `mlmkit-trainer-recipe` (the Trainer's default hyper-parameters: lr
5e-5, batch 8, no warm-up, no weight decay), each compared with the first.

The model: `--model DIR`; by default the one `make demo` trains (runs/pretrain/final), else
a tiny BERT with random weights is built and said (its accuracies are near chance).

    python benchmarks/finetune.py --seeds 5                 # 2,000 rows: ~30 min, 2 cores
    python benchmarks/finetune.py --seeds 5 --recipe defaults --lr 5e-5 \
        --sides mlmkit-auto,trainer-by-length              # both sides' shipped defaults
    python benchmarks/finetune.py --seeds 2 --train 500     # a quick look
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
from finetune_data import (  # noqa: E402
    TASK_NAMES,
    add_file_arguments,
    draw,
    held_out,
    task_lines,
    texts_of,
    write_sample,
)
from trainer_baseline import RECIPES, add_recipe_argument, run_trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "runs" / "pretrain" / "final"
# --sides names → the rows' labels; on request: "mlmkit-bucket" (length-bucketed batches),
# "mlmkit-auto" (precision "auto": bf16 autocast where the hardware multiplies bf16 natively),
# "mlmkit-padded" (padded batches in the same random order, where packing is the default),
# "mlmkit-trainer-recipe" (mlmkit's default hyper-parameters, the Trainer's, instead of the
# shared ones)
SIDES = {"mlmkit": "mlmkit", "trainer": "Trainer", "trainer-by-length": "Trainer, group_by_length",
         "mlmkit-bucket": "mlmkit, bucket", "mlmkit-auto": "mlmkit, precision auto",
         "mlmkit-padded": "mlmkit, padded",
         "mlmkit-trainer-recipe": "mlmkit, Trainer's recipe"}
DEFAULT_SIDES = "mlmkit,trainer,trainer-by-length"


def tiny_model(folder: Path, train_file: Path, task: str) -> Path:
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    texts = texts_of(train_file, task)
    tok = train_tokenizer(texts, folder / "tok", kind="wordpiece", vocab_size=4096,
                          show_progress=False)
    model = build_mlm("bert-tiny", tok, max_length=128, seed=0)
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    return folder / "model"


def run_mlmkit(model_dir, train, test, args, seed, bucket: bool = False,
               precision: str = "fp32", packed: bool | None = None,
               recipe: dict | None = None) -> dict:
    import mlmkit

    recipe = {"lr": args.lr, **RECIPES[args.recipe]} if recipe is None else recipe
    result = mlmkit.finetune(str(model_dir), args.task, train=train, test=test,
                             epochs=args.epochs, max_length=128, **recipe, seed=seed,
                             device="cpu", precision=precision, threads=args.threads,
                             progress=False, bucket=bucket, packed=packed)
    run = result.runs[0]
    return {"accuracy": run.test_metrics["accuracy"], "examples_per_s": run.examples_per_s,
            "train_seconds": run.train_seconds,
            "correct": (run._predictions == run._labels).tolist()}


def trainer_side(model_dir, train, test, args, seed, group_by_length: bool) -> dict:
    return run_trainer(model_dir, train, test, lr=args.lr, epochs=args.epochs, seed=seed,
                       group_by_length=group_by_length, task=args.task,
                       recipe=RECIPES[args.recipe])


def difference_interval(a: np.ndarray, b: np.ndarray, n_boot: int = 4000,
                        seed: int = 0) -> tuple[float, float, float]:
    """Mean accuracy difference a − b over [seeds, rows] correctness arrays (paired), and its
    95% bootstrap interval: seeds and held-out rows resampled together."""
    rng = np.random.default_rng(seed)
    n_seeds, n_rows = a.shape
    diff = a.astype(np.float64) - b.astype(np.float64)
    values = np.empty(n_boot)
    for k in range(n_boot):
        seeds = rng.integers(0, n_seeds, n_seeds)
        rows = rng.integers(0, n_rows, n_rows)
        values[k] = diff[seeds][:, rows].mean()
    low, high = np.percentile(values, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a pretrained masked LM directory "
                        "(default: the `make demo` model, runs/pretrain/final)")
    parser.add_argument("--task", choices=tuple(TASK_NAMES), default="sst2",
                        help="SST-2, or AG News (4 classes)")
    add_file_arguments(parser)
    parser.add_argument("--seeds", type=int, default=5, help="seeds (each its own sample)")
    parser.add_argument("--train", type=int, default=2000, help="training rows per seed")
    parser.add_argument("--test", type=int, default=1000, help="held-out rows (one fixed "
                        "sample)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=4e-5)
    add_recipe_argument(parser)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--sides", default=DEFAULT_SIDES, help="comma-separated, from "
                        f"{', '.join(SIDES)}; the first is compared with the others")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    names = [name.strip() for name in args.sides.split(",")]
    unknown = [name for name in names if name not in SIDES]
    if unknown or len(names) < 2:
        parser.error(f"--sides {args.sides!r}: name two or more of {', '.join(SIDES)}")
    sides = [SIDES[name] for name in names]
    runners = {"mlmkit": lambda *a: run_mlmkit(*a),
               "mlmkit, bucket": lambda *a: run_mlmkit(*a, bucket=True),
               "mlmkit, precision auto": lambda *a: run_mlmkit(*a, precision="auto"),
               "mlmkit, padded": lambda *a: run_mlmkit(*a, packed=False),
               # mlmkit's own default hyper-parameters, which are the Trainer's
               "mlmkit, Trainer's recipe": lambda *a: run_mlmkit(*a, recipe={}),
               "Trainer": lambda *a: trainer_side(*a, group_by_length=False),
               "Trainer, group_by_length": lambda *a: trainer_side(*a, group_by_length=True)}
    from mlmkit.core.devices import set_threads

    args.threads = set_threads(args.threads)
    load = os.getloadavg()[0]
    rows = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        header, lines, test_lines = task_lines(args.task, args.train_file, args.test_file)
        if test_lines is None:  # scored on rows held out of the training file
            test_rows, pool = held_out(len(lines), args.test)
            test = write_sample(folder / "test.tsv", header, lines, test_rows)
        else:
            pool = np.arange(len(lines))
            test = write_sample(folder / "test.tsv", header, test_lines,
                                draw(np.arange(len(test_lines)), args.test, 0))
        model_dir = Path(args.model) if args.model else DEMO_MODEL
        if not model_dir.is_dir():
            print(f"{model_dir} does not exist (run `make demo`): a tiny BERT with random "
                  "weights is used instead; its accuracies are near chance")
            model_dir = tiny_model(folder, write_sample(
                folder / "tok.tsv", header, lines, draw(pool, min(20000, len(pool)), 99)),
                args.task)
        for seed in range(args.seeds):
            train = write_sample(folder / f"train-{seed}.tsv", header, lines,
                                 draw(pool, args.train, 1000 + seed))
            for side in sides:
                rows[side].append(runners[side](model_dir, train, test, args, seed))
            print(f"seed {seed}: " + ", ".join(
                f"{side} {100 * rows[side][-1]['accuracy']:.2f}% "
                f"({rows[side][-1]['examples_per_s']:.1f} ex/s)" for side in sides),
                flush=True)
    name = model_dir.name if args.model else "make demo model"
    recipe = RECIPES[args.recipe]
    print(f"\n{TASK_NAMES[args.task]}, {name} ({model_dir}), {args.train} training rows × "
          f"{args.epochs} epochs per seed, {args.test} held-out rows, {args.seeds} seeds, lr "
          f"{args.lr:g}, batch {recipe['batch_size']}, warm-up {recipe['warmup']:g}, weight "
          f"decay {recipe['weight_decay']:g}, fp32 (unless a side says otherwise), "
          f"{args.threads} thread(s); load average {load:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end")
    speed = {side: float(np.mean([r["examples_per_s"] for r in rows[side]])) for side in sides}
    print(f"{'':26} {'accuracy mean':>13} {'std':>6} {'examples/s':>10} "
          + " ".join(f"{'vs ' + s:>12}" for s in sides[1:]))
    for side in sides:
        accuracy = 100 * np.array([r["accuracy"] for r in rows[side]])
        std = accuracy.std(ddof=1) if len(accuracy) > 1 else 0.0
        print(f"{side:26} {accuracy.mean():12.2f}% {std:6.2f} {speed[side]:10.1f} "
              + " ".join(f"{speed[side] / speed[s]:11.2f}×" for s in sides[1:]))
    correct = {side: np.array([r["correct"] for r in rows[side]]) for side in sides}
    for baseline in sides[1:]:
        mean, low, high = difference_interval(correct[sides[0]], correct[baseline])
        print(f"{sides[0]} − {baseline}: {100 * mean:+.2f} points, 95% bootstrap interval "
              f"[{100 * low:+.2f}, {100 * high:+.2f}] (seeds and held-out rows resampled)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"args": vars(args), "rows": rows},
            indent=1))


if __name__ == "__main__":
    main()
