"""Where a fine-tuning run keeps its work: `runs/finetune/<task>` unless told otherwise, the
next free `runs/finetune/<task>-2`, `-3`, ... when that one holds a run (as `pretrain` does
with `runs/pretrain`), so that a second run never overwrites the first."""

from __future__ import annotations

import re
from pathlib import Path

from mlmkit.training.checkpoint import list_states

DEFAULT_ROOT = Path("runs/finetune")


def holds_run(folder: Path) -> bool:
    """Whether `folder` holds a fine-tuning run (a state, a best model or its metrics)."""
    folder = Path(folder)
    return bool(list_states(folder)) or any(
        (folder / name).exists() for name in ("best", "metrics.json"))


def default_run_dir(task: str, resume: bool = False) -> Path:
    """`runs/finetune/<task>` (a resume continues it), else its first free sibling."""
    base = DEFAULT_ROOT / (re.sub(r"[^\w.-]+", "-", task).strip("-.") or "task")
    if resume:
        return base
    candidate, number = base, 1
    while holds_run(candidate) or any(holds_run(seed) for seed in candidate.glob("seed-*")):
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate
