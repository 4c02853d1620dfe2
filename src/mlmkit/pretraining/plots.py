"""PNG plots of a run's loss, accuracy and learning rate, drawn from its metrics history.

matplotlib and tensorboard come with the extra `mlmkit[plots]`. A pretraining run without
them trains all the same: `plots_installed()` warns once, when the run starts, and the run
then writes metrics.jsonl only (a missing figure is no reason to refuse hours of training,
and the plots can be drawn later from metrics.jsonl with `plot_history`).
"""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.progress import warn
from mlmkit.errors import MissingExtra
from mlmkit.extras import require

FEATURE = "plotting a run's metrics (plots/, tensorboard/)"


def plots_installed() -> bool:
    """matplotlib and tensorboard are installed; else one warning naming the extra."""
    try:
        for module in ("matplotlib", "tensorboard"):
            require(module, extra="plots", feature=FEATURE)
    except MissingExtra as missing:
        warn(f"{missing}; this run trains all the same and writes metrics.jsonl only")
        return False
    return True


def _series(history: list[dict], split: str, key: str):
    points = [(r["step"], r[key]) for r in history if r.get("split") == split and key in r]
    return [p[0] for p in points], [p[1] for p in points]


def plot_history(history: list[dict], folder: str | Path) -> list[Path]:
    """Write loss.png, accuracy.png and lr.png into `folder`; returns the files written."""
    matplotlib = require("matplotlib", extra="plots", feature=FEATURE)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    panels = {
        "loss": [("train", "loss", "train"), ("eval", "loss", "validation")],
        "accuracy": [("train", "accuracy", "train top-1"), ("eval", "accuracy", "validation top-1"),
                     ("eval", "top5_accuracy", "validation top-5")],
        "lr": [("train", "lr", "learning rate")],
    }
    written = []
    for name, lines in panels.items():
        figure, axis = plt.subplots(figsize=(6, 3.5), dpi=110)
        drawn = False
        for split, key, label in lines:
            steps, values = _series(history, split, key)
            if steps:
                axis.plot(steps, values, label=label, marker="o" if split == "eval" else None,
                          markersize=3)
                drawn = True
        if drawn:
            axis.set_xlabel("step")
            axis.set_ylabel(name)
            axis.grid(alpha=0.3)
            axis.legend()
            figure.tight_layout()
            path = folder / f"{name}.png"
            figure.savefig(path)
            written.append(path)
        plt.close(figure)
    return written
