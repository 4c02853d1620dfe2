"""PNG plots of a run's loss, accuracy and learning rate, drawn from its metrics history."""

from __future__ import annotations

from pathlib import Path


def _series(history: list[dict], split: str, key: str):
    points = [(r["step"], r[key]) for r in history if r.get("split") == split and key in r]
    return [p[0] for p in points], [p[1] for p in points]


def plot_history(history: list[dict], folder: str | Path) -> list[Path]:
    """Write loss.png, accuracy.png and lr.png into `folder`; returns the files written."""
    import matplotlib

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
