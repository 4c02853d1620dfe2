"""One progress helper and one way to print status: both on standard error only, and no
bar, colour or cursor code when standard error is not a terminal (pipes and logs stay
clean). `MLMKIT_PROGRESS=0` silences the bars everywhere."""

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
    p.advance(n)`. Disabled (does nothing) unless `progress_wanted(enabled)`."""

    def __init__(self, description: str, total: float | None = None, unit: str = "items",
                 enabled: bool | None = None, transient: bool = True):
        self.description = description
        self.total = total
        self.unit = unit
        self.enabled = progress_wanted(enabled)
        self.transient = transient
        self.completed = 0.0
        self.started = time.perf_counter()
        self._bar = None
        self._task = None

    def __enter__(self) -> Progress:
        self.started = time.perf_counter()
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
