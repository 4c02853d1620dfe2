"""What a run shows while it trains: a progress bar (step, loss, tokens/s, ETA) and status
lines, on standard error only, through `mlmkit.core.progress` — a bar only when
standard error is a terminal; otherwise (a log file, a batch job) plain lines without colour
or cursor codes, and a plain progress line every `every` seconds, so a log shows the run
is alive between evaluations."""

from __future__ import annotations

import time

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from mlmkit.core.progress import console as stderr_console
from mlmkit.core.progress import progress_wanted, status


class TrainProgress:
    """A bar over the budget's share (0 to 1000 ‰) and status lines; silent when disabled."""

    def __init__(self, enabled: bool, description: str = "pretraining", every: float = 30.0):
        self.enabled = enabled  # status lines; the bar also needs a terminal
        self._bar_wanted = enabled and progress_wanted(None)
        self._progress = None
        self._description = description
        self._every = every  # seconds between plain progress lines (no terminal); 0: none
        self._started = self._last_line = time.monotonic()
        self._start_share: float | None = None
        self._loss: float | None = None
        self._rate: float | None = None

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
        """The bar's position (`share` of the budget) and the latest loss and rate; without
        a terminal, a plain line when `every` seconds have passed since the last one."""
        self._loss = loss if loss is not None else self._loss
        self._rate = rate if rate is not None else self._rate
        if self._start_share is None:
            self._start_share = share
        if self._progress is None:
            self._plain_line(share, step)
            return
        fields = {"step": step}
        if loss is not None:
            fields["loss"] = f"{loss:.3f}"
        if rate is not None:
            fields["rate"] = f"{rate:,.0f}"
        self._progress.update(self._task, completed=int(share * 1000), **fields)

    def _plain_line(self, share: float, step: int) -> None:
        now = time.monotonic()
        if not self.enabled or self._bar_wanted or self._every <= 0 \
                or now - self._last_line < self._every:
            return
        self._last_line = now
        parts = [f"step {step:,}", f"{100 * share:.1f}%"]
        if self._loss is not None:
            parts.append(f"loss {self._loss:.3f}")
        if self._rate is not None:
            parts.append(f"{self._rate:,.0f} tokens/s")
        done = share - (self._start_share or 0.0)
        if 0 < done and share < 1:
            left = (now - self._started) * (1 - share) / done
            parts.append(f"about {_duration(left)} left")
        status(f"{self._description}: " + " · ".join(parts))

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


def _duration(seconds: float) -> str:
    """`42s`, `7m 05s`, `3h 12m`: a time left, to the precision that matters."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
