"""Metrics of a run: a JSONL file and TensorBoard events in the run directory.

The history (every record so far) is part of the training state; on resume the JSONL
file is rewritten from it and TensorBoard purges events after the resumed step, so the
logs of a resumed run read as if it had never stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.cache import atomic_write_text


class MetricsLog:
    """Append records `{"step", "split", ...}` to metrics.jsonl and TensorBoard."""

    def __init__(self, run_dir: str | Path, history: list[dict] | None = None,
                 resume_step: int | None = None, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.history: list[dict] = list(history or [])
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in self.history))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard not installed: JSONL only
                SummaryWriter = None
            if SummaryWriter is not None:
                self._writer = SummaryWriter(str(Path(run_dir) / "tensorboard"),
                                             purge_step=resume_step)

    def log(self, record: dict) -> None:
        self.history.append(record)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._writer is not None:
            split = record.get("split", "train")
            for key, value in record.items():
                if key not in ("step", "split") and isinstance(value, (int, float)):
                    self._writer.add_scalar(f"{split}/{key}", value, record["step"])

    def close(self) -> None:
        self._file.close()
        if self._writer is not None:
            self._writer.close()
