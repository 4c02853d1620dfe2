"""The data of the fine-tuning benchmarks (finetune.py, finetune_speed.py): each task's
lines, the seeded samples both sides train and score on, and the texts as mlmkit reads them.

A sample is a TSV file with the source's header and its lines as they are in the source
(quoting kept); mlmkit and the Trainer side (trainer_baseline.py) both read it with mlmkit's
reader, so they see the same texts and the same label numbers. A task without a test file
(AG News here has a training file only) is scored on rows held out of its training file,
never drawn for training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlmkit.finetuning.data import read_split
from mlmkit.finetuning.tasks import get_task

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# task -> (training file, test file or None)
TASK_FILES = {"sst2": (DATA / "sst2" / "train.tsv", DATA / "sst2" / "validation.tsv"),
              "agnews": (DATA / "agnews" / "train.tsv", None)}
TASK_NAMES = {"sst2": "SST-2", "agnews": "AG News"}


def task_lines(task: str, train_file=None, test_file=None) -> tuple[str, list, list | None]:
    """(header, training lines, test lines or None) of `task`: the given files, else the
    shared data's. A training file given alone has no test file: rows are held out of it."""
    default_train, default_test = TASK_FILES[task]
    lines = Path(train_file or default_train).read_text(encoding="utf-8").splitlines()
    test = test_file or (default_test if train_file is None else None)
    test_lines = None
    if test is not None:
        test_lines = [line for line in Path(test).read_text(encoding="utf-8").splitlines()[1:]
                      if line.strip()]
    return lines[0], [line for line in lines[1:] if line.strip()], test_lines


def add_file_arguments(parser) -> None:
    """`--train-file` and `--test-file`, the files `task_lines` reads."""
    parser.add_argument("--train-file", default=None, help="a TSV file of the task (text, "
                        "label, with a header) to draw the training rows from (default: the "
                        "shared data's)")
    parser.add_argument("--test-file", default=None, help="a TSV file of the held-out rows "
                        "(default: SST-2's validation file; AG News, or a --train-file alone: "
                        "rows held out of the training file, never drawn for training)")


def held_out(n_lines: int, n_test: int) -> tuple[np.ndarray, np.ndarray]:
    """(test rows, the rest) of a file scored on rows held out of it: a fixed shuffle."""
    if n_test >= n_lines:
        raise SystemExit(f"{n_test} held-out rows leave none of the {n_lines} to train on: "
                         "ask for fewer")
    order = np.random.default_rng(0).permutation(n_lines)
    return order[:n_test], order[n_test:]


def draw(pool: np.ndarray, count: int, seed: int) -> np.ndarray:
    """`count` rows of `pool`, a seeded draw without replacement."""
    if count > len(pool):
        raise SystemExit(f"{count} rows asked for, {len(pool)} to draw from: ask for fewer")
    return pool[np.random.default_rng(seed).permutation(len(pool))[:count]]


def write_sample(path: Path, header: str, lines: list[str], rows) -> Path:
    """The lines `rows` of `lines`, in file order, under `header`."""
    path.write_text("\n".join([header, *(lines[i] for i in sorted(rows))]) + "\n",
                    encoding="utf-8")
    return path


def texts_of(path, task: str) -> list[str]:
    """The texts of a sample as mlmkit reads them (the first text column)."""
    return [row[0] for row in read_split(get_task(task), "train", path=path)[0]]
