"""One progress helper and one way to print status: both on standard error only, and no
bar, colour or cursor code when standard error is not a terminal (pipes and logs stay
clean): there, long work prints a plain progress line every $MLMKIT_PROGRESS_EVERY seconds
(30 by default; 0: none), so a log still shows that a run moves and when it should end.
`MLMKIT_PROGRESS=0` silences the bars and those lines everywhere."""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress


def stderr_is_terminal() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def progress_wanted(progress: bool | None = None) -> bool:
    """`progress` if given, else: standard error is a terminal and MLMKIT_PROGRESS≠0."""
    if progress is not None:
        return bool(progress)
    return stderr_is_terminal() and os.environ.get("MLMKIT_PROGRESS", "1") != "0"


PLAIN_EVERY = 30.0
"""Seconds between plain progress lines when standard error is not a terminal."""


def plain_progress_every() -> float:
    """$MLMKIT_PROGRESS_EVERY (seconds; 0: no plain lines), else PLAIN_EVERY."""
    try:
        every = float(os.environ.get("MLMKIT_PROGRESS_EVERY", PLAIN_EVERY))
    except ValueError:
        return PLAIN_EVERY
    return every if every >= 0 else PLAIN_EVERY


def console():
    """A rich console on standard error (plain text when it is not a terminal)."""
    terminal = stderr_is_terminal()
    return Console(stderr=True, force_terminal=terminal, no_color=not terminal,
                   highlight=False, soft_wrap=True)


def status(message: str) -> None:
    """A status line for people (never for programs): standard error, plain."""
    print(message, file=sys.stderr, flush=True)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


class Progress:
    """A progress bar with a rate and ETA: `with Progress("scoring", total, "texts") as p:
    p.advance(n)`. The bar needs `progress_wanted(enabled)`; left to decide (`enabled` None)
    without a terminal, a plain line every `plain_progress_every()` seconds instead."""

    def __init__(self, description: str, total: float | None = None, unit: str = "items",
                 enabled: bool | None = None, transient: bool = True):
        self.description = description
        self.total = total
        self.unit = unit
        self.enabled = progress_wanted(enabled)
        self.plain_every = plain_progress_every() if (
            enabled is None and not self.enabled
            and os.environ.get("MLMKIT_PROGRESS", "1") != "0") else 0.0
        self.transient = transient
        self.completed = 0.0
        self.started = self._last_line = time.perf_counter()
        self._bar = None
        self._task = None

    def __enter__(self) -> Progress:
        self.started = self._last_line = time.perf_counter()
        if self.enabled:
            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                console=console(), transient=self.transient)
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total, rate="")
        return self

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def rate(self) -> float:
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    def advance(self, amount: float = 1) -> None:
        self.update(self.completed + amount)

    def update(self, completed: float, **fields) -> None:
        self.completed = completed
        if self._bar is not None:
            self._bar.update(self._task, completed=completed,
                             rate=f"{self.rate:,.1f} {self.unit}/s", **fields)
        elif self.plain_every > 0:
            self._plain_line()

    def _plain_line(self) -> None:
        """`description: done/total unit (rate, time left)`, once per `plain_every` s."""
        now = time.perf_counter()
        if now - self._last_line < self.plain_every:
            return
        self._last_line = now
        done = f"{self.completed:,.0f}" + (f"/{self.total:,.0f}" if self.total else "")
        line = f"{self.description}: {done} {self.unit} ({self.rate:,.1f} {self.unit}/s"
        if self.total and self.rate > 0:
            line += f", about {_duration((self.total - self.completed) / self.rate)} left"
        status(line + ")")

    def print(self, message: str) -> None:
        """A line above the bar (or a plain status line without one)."""
        if self._bar is not None:
            self._bar.console.print(message, markup=False)
        else:
            status(message)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _duration(seconds: float) -> str:
    """`1h 02m`, `3m 05s` or `12s`."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
