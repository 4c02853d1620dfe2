"""The official GLUE metrics, written out (no scipy or scikit-learn needed).

Accuracy, binary F1 (of the positive class, label index 1), Matthews correlation (CoLA),
Pearson and Spearman correlations (STS-B; Spearman with average ranks for ties). Sums run
in float64; a metric that is undefined (a constant column) is 0.0 as in scikit-learn for
Matthews, NaN for the correlations.
"""

from __future__ import annotations

import numpy as np

METRICS = ("accuracy", "f1", "matthews", "pearson", "spearman")


def accuracy(predictions, labels) -> float:
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    return float(np.mean(predictions == labels)) if len(labels) else float("nan")


def f1(predictions, labels, positive: int = 1) -> float:
    """F1 of the `positive` class (GLUE's MRPC and QQP)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    tp = float(np.sum((predictions == positive) & (labels == positive)))
    fp = float(np.sum((predictions == positive) & (labels != positive)))
    fn = float(np.sum((predictions != positive) & (labels == positive)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews(predictions, labels) -> float:
    """Matthews correlation of two label columns (any number of classes, Gorodkin's R_K)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    classes = np.union1d(predictions, labels)
    index = {c: i for i, c in enumerate(classes.tolist())}
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, ([index[x] for x in labels.tolist()],
                          [index[x] for x in predictions.tolist()]), 1.0)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return 0.0 if denominator == 0 else float((c * s - t @ p) / denominator)


def pearson(predictions, labels) -> float:
    x = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float("nan") if denominator == 0 else float((x @ y) / denominator)


def average_ranks(values) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their ranks."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_values))[0] + 1]
    ends = np.r_[starts[1:], len(values)]
    for start, end in zip(starts, ends, strict=True):
        ranks[order[start:end]] = (start + end + 1) / 2.0
    return ranks


def spearman(predictions, labels) -> float:
    return pearson(average_ranks(predictions), average_ranks(labels))


FUNCTIONS = {"accuracy": accuracy, "f1": f1, "matthews": matthews, "pearson": pearson,
             "spearman": spearman}


def compute(names, predictions, labels) -> dict[str, float]:
    """{metric: value} for each of `names`."""
    return {name: FUNCTIONS[name](predictions, labels) for name in names}
