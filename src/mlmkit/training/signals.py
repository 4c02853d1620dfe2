"""SIGINT / SIGTERM during training: the first one stops after the current step (the loop
saves the training state and exits: no evaluation, no export, no plots); a second one ends
the process at once, as the signal's default action would (the last checkpoint stays).

A step can take minutes (a large batch on a CPU), and a scheduler's SIGTERM gives a job
seconds before its SIGKILL. Inside `abortable()` (the part of a step that reads the batch
and runs forward and backward, before any weight changes) the first signal therefore raises
`StepInterrupted` at once: the loop drops the step, restores what the step had moved (the
data position, the random state), and saves the state of the last finished step."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StepInterrupted(Exception):
    """The first SIGINT/SIGTERM arrived inside the abortable part of a step."""


class StopOnSignal:
    """While active, the first SIGINT or SIGTERM sets `requested` (its name) instead of
    killing the process; the second restores the default action and re-raises it."""

    def __init__(self, announce: bool = True):
        self.requested: str | None = None
        self.announce = announce
        self._previous = {}
        self._abortable = False

    def _handle(self, signum, frame):
        if self.requested:  # the second signal: quit now, as if we had never caught it
            self._restore()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.requested = signal.Signals(signum).name
        if self._abortable:
            self._abortable = False
            if self.announce:
                os.write(2, f"\n{self.requested}: stopping now; the step under way is "
                            "dropped and the last finished one saved\n".encode())
            raise StepInterrupted(self.requested)
        if self.announce:  # os.write: safe inside a signal handler, unlike print or rich
            os.write(2, f"\n{self.requested}: saving after this step, then stopping "
                        "(send it again to quit at once)\n".encode())

    @contextlib.contextmanager
    def abortable(self):
        """While inside, the first signal raises `StepInterrupted` instead of waiting for
        the step to end (a signal already received raises it on entry)."""
        if self.requested:
            raise StepInterrupted(self.requested)
        self._abortable = True
        try:
            yield
        finally:
            self._abortable = False

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __exit__(self, *exc) -> None:
        self._restore()
