"""The layout of a run directory, as `pretrain` and `finetune` write it, for the readers
that meet its folders from outside: a model folder inside a run (`final/`, `best/`,
`step-N/`) is named after its run, and a step folder finds the run's one tokenizer.

    RUN/                       a run (config.yaml, metrics, checkpoints/, README.md)
      tokenizer/               the run's tokenizer, stored once
      final/ | best/           the trained model, with its tokenizer
      step-N/                  the model at step N (its tokenizer: RUN/tokenizer/)
"""

from __future__ import annotations

import re
from pathlib import Path

RUN_TOKENIZER_DIR = "tokenizer"
MODEL_FOLDERS = ("final", "best")
STEP_FOLDER = re.compile(r"^step-(\d+)$")
SEED_FOLDER = re.compile(r"^seed-(\d+)$")
# files only a run directory holds: a model folder beside one of them is part of a run
RUN_MARKERS = ("config.yaml", "checkpoints", "metrics.json", "metrics.jsonl", "summary.json")


def step_folder_name(step: int) -> str:
    """The folder of the model saved at `step` (it holds that step's weights)."""
    return f"step-{step}"


def run_of(model_dir: str | Path) -> Path | None:
    """The run directory holding the model folder `model_dir` (a run's `final/`, `best/` or
    `step-N/`, or a seed's `best/` of a several-seed fine-tuning), else None."""
    path = Path(model_dir).expanduser()
    if path.name not in MODEL_FOLDERS and not STEP_FOLDER.match(path.name):
        return None
    parent = path.absolute().parent
    if any((parent / marker).exists() for marker in RUN_MARKERS):
        return parent
    return None


def model_name(model_dir: str | Path) -> str:
    """A short name for the model at `model_dir`: the run's name for a run's model folder
    (`runs/pretrain/final` -> `pretrain`, `runs/finetune/sst2/best` -> `sst2`,
    `runs/x/step-20` -> `x-step-20`, `runs/ft/seed-1/best` -> `ft-seed-1`), else the path's
    last part."""
    text = str(model_dir).rstrip("/")
    path = Path(text).expanduser()
    run = run_of(path) if path.is_dir() else None
    if run is None:
        return path.name or text
    name = run.name
    if SEED_FOLDER.match(run.name) and run.parent.name:  # one seed of several
        name = f"{run.parent.name}-{run.name}"
    if STEP_FOLDER.match(path.name):
        name = f"{name}-{path.name}"
    return name


def shared_tokenizer_dir(model_dir: str | Path) -> Path | None:
    """The run's tokenizer folder for a step folder that stores none of its own, else None."""
    path = Path(model_dir).expanduser()
    if not STEP_FOLDER.match(path.name):
        return None
    folder = path.absolute().parent / RUN_TOKENIZER_DIR
    return folder if (folder / "tokenizer_config.json").is_file() else None
