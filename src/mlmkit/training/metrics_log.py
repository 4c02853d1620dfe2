"""Metrics of a run: a JSONL file and TensorBoard events in the run directory.

The history (every record so far) is part of the training state; on resume the JSONL
file is rewritten from it and TensorBoard purges events after the resumed step, so the
logs of a resumed run read as if it had never stopped.

Records are keyed by (step, split): a record logged again for the same step and split (an
evaluation repeated after a resume) replaces the earlier one, so metrics.jsonl never holds
two rows of one step and split.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlmkit.core.staging import write_text
from mlmkit.extras import require


class MetricsLog:
    """Append records `{"step", "split", ...}` to metrics.jsonl and, with `tensorboard`
    (which needs the extra mlmkit[plots]), to TensorBoard."""

    def __init__(self, run_dir: str | Path, history: list[dict] | None = None,
                 resume_step: int | None = None, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.history: list[dict] = unique_by_step(history or [])
        self._keys = {_key(r) for r in self.history}
        self._file = None
        self._rewrite()
        self._writer = None
        if tensorboard:
            require("tensorboard", extra="plots", feature="TensorBoard logs")
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(Path(run_dir) / "tensorboard"),
                                         purge_step=resume_step)

    def _rewrite(self) -> None:
        if self._file is not None:
            self._file.close()
        write_text(self.path, "".join(json.dumps(r) + "\n" for r in self.history))
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def log(self, record: dict) -> None:
        key = _key(record)
        if key in self._keys:  # the same step and split again: replace the earlier record
            self.history = [record if _key(r) == key else r for r in self.history]
            self._rewrite()
        else:
            self.history.append(record)
            self._keys.add(key)
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        if self._writer is not None:
            split = record.get("split", "train")
            for name, value in record.items():
                if name not in ("step", "split") and isinstance(value, (int, float)):
                    self._writer.add_scalar(f"{split}/{name}", value, record["step"])

    def close(self) -> None:
        self._file.close()
        if self._writer is not None:
            self._writer.close()


def _key(record: dict) -> tuple:
    return record.get("step"), record.get("split", "train")


def unique_by_step(records: list[dict]) -> list[dict]:
    """`records` with one record per (step, split): the last one, at the first's place."""
    last = {_key(r): r for r in records}
    seen, out = set(), []
    for record in records:
        key = _key(record)
        if key not in seen:
            seen.add(key)
            out.append(last[key])
    return out
