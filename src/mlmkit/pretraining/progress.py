"""What a run shows while it trains: a progress bar (step, loss, tokens/s, ETA) and status
lines, on standard error only, through `mlmkit.core.progress` — a bar only when
standard error is a terminal, plain lines without colour or cursor codes otherwise."""

from __future__ import annotations

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from mlmkit.core.progress import console as stderr_console
from mlmkit.core.progress import progress_wanted, status


class TrainProgress:
    """A bar over the budget's share (0 to 1000 ‰) and status lines; silent when disabled."""

    def __init__(self, enabled: bool, description: str = "pretraining"):
        self.enabled = enabled  # status lines; the bar also needs a terminal
        self._bar_wanted = enabled and progress_wanted(None)
        self._progress = None
        self._description = description

    def __enter__(self) -> TrainProgress:
        if self._bar_wanted:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(),
                TextColumn("step {task.fields[step]} · loss {task.fields[loss]} · "
                           "{task.fields[rate]} tokens/s"),
                TimeRemainingColumn(), console=stderr_console(), transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=1000, step=0,
                                                 loss="-", rate="-")
        return self

    def update(self, share: float, step: int, loss: float | None = None,
               rate: float | None = None) -> None:
        if self._progress is None:
            return
        fields = {"step": step}
        if loss is not None:
            fields["loss"] = f"{loss:.3f}"
        if rate is not None:
            fields["rate"] = f"{rate:,.0f}"
        self._progress.update(self._task, completed=int(share * 1000), **fields)

    def print(self, message: str) -> None:
        """A status line (above the bar, or plain on standard error)."""
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            status(message)

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
