"""The splits of a fine-tuning task: texts and labels from files or a datasets name.

Files are JSONL, TSV or CSV (`mlmkit.core.records.read_table`); a Hugging Face datasets
name is loaded by `datasets` (downloaded if needed), or from the local cache only with
`offline=True` (`--offline`). Labels are checked against the task: a label
the task does not know, a non-numeric regression target, a missing column (the message
lists the columns that exist) or an empty split is an error naming the file and line.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import datasets
import datasets.config
import numpy as np

from mlmkit.core import hub
from mlmkit.core.records import check_input_file, display_name, read_table
from mlmkit.errors import InvalidArgument, InvalidData, PathError
from mlmkit.finetuning.tasks import Task

VALIDATION_FRACTION = 0.1
CARVE_SEED = 0  # the carved validation split is the same whatever --seed says


@dataclass
class Split:
    """One split: `texts[i]` is a tuple of one or two strings; `labels` index `label_names`
    (int64) or are regression targets (float32)."""

    name: str
    texts: list[tuple[str, ...]]
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, index, name: str | None = None) -> Split:
        index = np.asarray(index, dtype=np.int64)
        return Split(name or self.name, [self.texts[i] for i in index], self.labels[index],
                     self.source)


@dataclass
class TaskData:
    task: Task
    label_names: list[str] | None  # None for regression
    train: Split
    validation: Split | None  # None: no validation split was given nor carved
    test: Split | None = None


def _raw_rows(path, split: str):
    """(where, row dict) of the file of `split`."""
    check_input_file(path, f"{split} file")
    name = display_name(path)
    for number, row in read_table(path, what=split):
        yield f"{name} line {number}", row


def _cache_dir() -> str:
    return str(datasets.config.HF_DATASETS_CACHE)


def _dataset_rows(task: Task, dataset: str, split: str, offline: bool = False):
    name, _, config = dataset.partition(":")
    config = config or (task.dataset_config if dataset == task.dataset else None)
    # no network: the local cache at once (datasets would retry for ~25 s, logging each try)
    no_network = not offline and hub.hub_unreachable()
    with hub.hub_offline(offline or no_network):
        try:
            data = datasets.load_dataset(name, config, split=split)
        except Exception as error:  # noqa: BLE001 - datasets raises many kinds
            message = " ".join(str(error).split())[:160]
            if offline:
                raise PathError(f"--dataset {dataset!r} split {split!r} is neither a file nor "
                                f"in the local Hugging Face datasets cache ({_cache_dir()}) and "
                                f"--offline forbids downloading it ({message}): run once "
                                "without --offline to download it, or pass --train/--validation "
                                "files") from error
            if no_network:
                raise PathError(f"--dataset {dataset!r} split {split!r} is not in the local "
                                f"Hugging Face datasets cache ({_cache_dir()}) and the hub "
                                f"cannot be reached (no network) ({message}): connect and "
                                "retry, or pass --train/--validation files") from error
            raise PathError(f"--dataset {dataset!r} split {split!r} could not be loaded "
                            f"({message}); check the name and config (NAME[:CONFIG]) and the "
                            "network, or pass --train/--validation files") from error
    for i, row in enumerate(data):
        yield f"{dataset} {split} row {i}", row


def _check_columns(where: str, row: dict, task: Task, flag_text: str = "--text-field") -> None:
    missing = [c for c in (*task.text_cols, task.label_col) if c not in row]
    if missing:
        flag = "--label-field" if missing == [task.label_col] else flag_text
        raise InvalidData(f"{where}: no column {', '.join(map(repr, missing))} (task "
                          f"{task.name}); the columns are {', '.join(map(repr, row))}: name the "
                          f"right ones with {flag}")


def _text(where: str, row: dict, column: str) -> str:
    value = row[column]
    if not isinstance(value, str):
        if value is None:
            raise InvalidData(f"{where}: column {column!r} is empty; fill or drop the row")
        value = str(value)
    return value


def read_split(task: Task, name: str, *, path=None, dataset: str | None = None,
               split: str | None = None, offline: bool = False) -> tuple[list, list, str]:
    """(texts, raw labels with where each came from, source) of one split."""
    if path is not None:
        rows, source = _raw_rows(path, name), str(path)
    else:
        rows = _dataset_rows(task, dataset, split or name, offline)
        source = f"{dataset}:{split or name}"
    texts, labels = [], []
    checked = False
    for where, row in rows:
        if not checked:
            present = [c for c in task.other_label_cols if c in row]
            if task.label_col not in row and present:  # e.g. STS-B's `score`
                task = replace(task, label_col=present[0])
            _check_columns(where, row, task)
            checked = True
        elif any(c not in row for c in (*task.text_cols, task.label_col)):
            _check_columns(where, row, task)
        texts.append(tuple(_text(where, row, c) for c in task.text_cols))
        labels.append((row[task.label_col], where))
    if not texts:
        raise InvalidData(f"the {name} split ({source}) is empty: give a file with a header "
                          "and at least one row")
    blank = [where for (_, where), row in zip(labels, texts, strict=True)
             if any(not text.strip() for text in row)]
    if blank:  # kept (QQP has a few), but said: the model sees only its special tokens
        warnings.warn(f"{len(blank)} row(s) of the {name} split have an empty text column "
                      f"(first: {blank[0]}): they are used as empty inputs", stacklevel=2)
    return texts, labels, source


def label_index(task: Task, raw: list, names: list[str] | None) -> np.ndarray:
    """Raw labels as indices into `names` (or floats for regression)."""
    if task.regression:
        values = []
        for value, where in raw:
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise InvalidData(f"{where}: label {value!r} of the regression task "
                                  f"{task.name} is not a number; give numeric labels") from None
            if not math.isfinite(number):
                raise InvalidData(f"{where}: label {value!r} is not finite")
            values.append(number)
        return np.asarray(values, dtype=np.float32)
    lookup = {n: i for i, n in enumerate(names)}
    out = np.empty(len(raw), dtype=np.int64)
    for k, (value, where) in enumerate(raw):
        _check_present(value, where)
        text = str(value).strip()
        if text in lookup:
            out[k] = lookup[text]
        elif text.lstrip("-").isdigit() and 0 <= int(text) < len(names) and task.labels:
            out[k] = int(text)
        else:
            raise InvalidData(f"{where}: label {value!r} is not one the task {task.name} knows "
                              f"({', '.join(map(repr, names))}"
                              f"{' or 0..' + str(len(names) - 1) if task.labels else ''}); fix "
                              "the label or the --label-field")
    return out


MISSING_LABELS = ("", "nan", "NaN", "NAN")
"""Label texts that mean "no label": an empty cell, and NaN as pandas and str(float) write it."""


def _check_present(value, where: str) -> None:
    """Refuse a classification label that is missing: JSON null, a float NaN, an empty cell
    or "nan" (it would otherwise become a class of its own)."""
    missing = value is None or (isinstance(value, float) and math.isnan(value)) \
        or str(value).strip() in MISSING_LABELS
    if missing:
        raise InvalidData(f"{where}: the label is missing ({value!r}); fill it in or drop "
                          "the row")


def _custom_names(raw: list) -> list[str]:
    """The classes of a task of your own: its training labels' distinct texts (numbers in
    numeric order). Two spellings of one number (1 and 1.0) are refused, not two classes."""
    first = {}
    for value, where in raw:
        _check_present(value, where)
        first.setdefault(str(value).strip(), where)
    numbers = {}
    for name, where in first.items():
        number = _as_number(name)
        if number is not None and numbers.setdefault(number, (name, where))[0] != name:
            other, other_where = numbers[number]
            raise InvalidData(f"labels {other!r} ({other_where}) and {name!r} ({where}) are "
                              "one number written two ways: write each class one way (e.g. "
                              f"all {int(number) if number.is_integer() else number})")
    numeric = all(d.lstrip("-").isdigit() for d in first)
    names = sorted(first, key=int) if numeric else sorted(first)
    if len(names) < 2:
        raise InvalidData(f"the training labels take one value only ({names}): a classifier "
                          "needs at least two classes (or pass --regression)")
    return names


def _as_number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _check_trained_classes(task: Task, split: Split, names: list[str]) -> None:
    """A named task's classes against its training split: one class only is refused (as
    for a task of your own); a class that never occurs is said (its head row only decays)."""
    counts = np.bincount(split.labels, minlength=len(names))
    present = [name for name, n in zip(names, counts, strict=True) if n]
    if len(present) < 2:
        raise InvalidData(f"the training split ({split.source}) holds one class only "
                          f"({present[0]!r} of task {task.name}'s {', '.join(map(repr, names))}):"
                          " a classifier needs examples of at least two; check the file and "
                          "the --label-field")
    absent = [name for name, n in zip(names, counts, strict=True) if not n]
    if absent:
        warnings.warn(f"the training split ({split.source}) has no example of "
                      f"{', '.join(map(repr, absent))} (task {task.name}): the model will "
                      "never predict it", stacklevel=3)


def carve(split: Split, fraction: float = VALIDATION_FRACTION,
          seed: int = CARVE_SEED) -> tuple[Split, Split]:
    """(train, validation): a fixed, seeded share of `split` held out."""
    n = len(split)
    held = max(1, int(round(n * fraction)))
    if n - held < 1:
        raise InvalidData(f"the training split ({split.source}) has {n} row(s): too few to "
                          "carve a validation split; pass --validation")
    order = np.random.default_rng(seed).permutation(n)
    return (split.subset(np.sort(order[held:]), "train"),
            split.subset(np.sort(order[:held]), "validation (carved)"))


def load_task_data(task: Task, *, train=None, validation=None, test=None,
                   dataset: str | None = None, offline: bool = False,
                   carve_validation: bool = True) -> TaskData:
    """Read and check the task's splits (files first, then `dataset`, then the task's own).
    Without a validation split, `carve_validation` holds 10% of train out as one (a fixed
    seed); otherwise the validation split is None and every training row is trained on."""
    if train is not None and dataset is not None:
        raise InvalidArgument(f"--train {str(train)!r} and --dataset {dataset!r} both name the "
                              "training data: give one (--dataset with --validation or --test "
                              "files is fine)")
    if train is None and dataset is None:
        if task.dataset is None:
            raise InvalidArgument(f"task {task.name}: pass --train (and --validation) files, "
                                  "or --dataset NAME[:CONFIG]")
        dataset = task.dataset
    train_texts, train_raw, train_source = read_split(
        task, "train", path=train, dataset=None if train is not None else dataset,
        offline=offline)
    names = None
    if not task.regression:
        names = list(task.labels) if task.labels else _custom_names(train_raw)
    train_split = Split("train", train_texts, label_index(task, train_raw, names), train_source)
    if task.labels:
        _check_trained_classes(task, train_split, names)
    if validation is not None or (dataset is not None and task.validation_split and
                                  train is None):
        texts, raw, source = read_split(task, "validation", path=validation,
                                        dataset=None if validation is not None else dataset,
                                        split=task.validation_split, offline=offline)
        valid_split = Split("validation", texts, label_index(task, raw, names), source)
    elif carve_validation:
        train_split, valid_split = carve(train_split)
    else:
        valid_split = None
    test_split = None
    if test is not None:
        texts, raw, source = read_split(task, "test", path=test)
        test_split = Split("test", texts, label_index(task, raw, names), source)
    return TaskData(task, names, train_split, valid_split, test_split)


def few_shot(split: Split, shots: int, seed: int, n_labels: int) -> Split:
    """`shots` examples of each class, drawn under `seed` (LM-BFF's sampling)."""
    counts = np.bincount(split.labels, minlength=n_labels)
    smallest = int(counts.min())
    if shots > smallest:
        raise InvalidArgument(f"shots={shots} (--shots) is more than the smallest class has "
                              f"({smallest} example(s) of class {int(counts.argmin())} in "
                              f"{split.source}); use --shots {smallest} or fewer")
    rng = np.random.default_rng(seed)
    chosen = [rng.choice(np.nonzero(split.labels == c)[0], size=shots, replace=False)
              for c in range(n_labels)]
    return split.subset(np.sort(np.concatenate(chosen)), f"train ({shots} shots)")


def limit(split: Split, count: int | None, seed: int = CARVE_SEED) -> Split:
    """At most `count` rows of `split`, a fixed seeded sample (None: all)."""
    if count is None or count >= len(split):
        return split
    order = np.random.default_rng(seed).permutation(len(split))[:count]
    return split.subset(np.sort(order))
