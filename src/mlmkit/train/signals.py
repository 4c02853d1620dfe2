"""SIGINT / SIGTERM during training: finish the current step, save, and stop cleanly."""

from __future__ import annotations

import signal
import threading


class StopOnSignal:
    """While active, SIGINT and SIGTERM set `requested` instead of killing the process.

    A second SIGINT restores the default behaviour (an immediate KeyboardInterrupt).
    """

    def __init__(self):
        self.requested: str | None = None
        self._previous = {}

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = name

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
