"""Dynamic batching: concurrent requests for one model gathered into batches by cost.

Each served model has one worker: an asyncio task that owns a single thread (the model runs
in one place at a time). A request becomes a `Work` (its inputs, each input's cost in tokens
the model reads, a merge key, the library call). When the worker is idle, the first work
waits `batch_window_ms` for company; then the next batch is cut: the inputs of one
waiting work, then those of every other work with the same key (score: metric and options;
fill: top-k and mode), up to `max_batch_tokens` of cost and `max_batch` inputs (one input at
least), run as ONE call of the library function. A work whose inputs did not all fit goes
to the back of the line, so works take turns, and a batch starts with the cheapest waiting
work (the head of the line once it has waited too long): a small request that arrives beside big ones
waits for about one batch, not for the big requests' whole calls, and is never failed with
them.
Works with no key (generation, which is seeded per call) run whole and alone. A work whose
client went away or timed out is dropped before its next batch.

If a gathered call fails with an mlmkit error, each of its works runs again alone, so the
error reaches the request that caused it and nobody else.

When the line has stayed empty for `TRIM_AFTER_IDLE_S` after a run, the worker returns
malloc's free pages to the system (`mlmkit.serve.memory`), so the server's memory comes back
down after a burst (not between the batches of a steady load, which would fault the pages
in again).

A call already running when every one of its requests is given up (timed out, or the client
gone) stops at its next `check()` (generate and infill check at every unmasking step), so
the model is free for the next request instead of finishing work nobody waits for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from mlmkit.errors import MlmkitError
from mlmkit.serve.adapters import Cancelled
from mlmkit.serve.memory import release_free_memory

TRIM_AFTER_IDLE_S = 0.5
"""Seconds the line stays empty after a run before freed memory is given back."""


@dataclass(eq=False)
class Work:
    key: Hashable | None
    """Works with the same key are gathered into one call; None: always whole and alone."""
    inputs: list
    run: Callable[[list], list]
    """The library call: inputs of one or more works in, one output per input out."""
    costs: list[int] | None = None
    """Each input's cost in tokens the model reads (None: 1 each)."""
    future: asyncio.Future = field(default=None)
    taken: int = 0  # inputs handed to batches so far
    since: float = field(default_factory=time.monotonic)  # when it was queued
    outputs: list = field(default_factory=list)

    def __post_init__(self):
        if self.costs is None:
            self.costs = [1] * len(self.inputs)

    @property
    def cost(self) -> int:
        return sum(self.costs)

    def left(self) -> int:
        """The cost of the inputs not yet handed to a batch."""
        return sum(self.costs[self.taken:])


class ModelWorker:
    """The queue and thread of one model."""

    def __init__(self, name: str, batching: bool, window_ms: float, max_batch: int,
                 max_batch_tokens: int | None = None, patience: float = 15.0):
        self.name, self.batching = name, batching
        self.window = window_ms / 1000.0
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.patience = patience
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"mlmkit-serve-{name}")
        self.waiting: list[Work] = []  # in turn order
        self.wake: asyncio.Event | None = None
        self.task: asyncio.Task | None = None
        self.queued_cost = 0  # cost of the inputs waiting for a batch
        self.calls = 0  # library calls run (a gathered batch counts once)
        self.works = 0  # works answered
        self.tokens = 0  # cost of the batches run
        self.cpu_seconds = 0.0  # CPU time of the library calls, on the model's thread
        self.rate: float | None = None  # tokens per second of the recent calls
        self.running = False  # a call is on the model's thread now
        self.abandoned = threading.Event()  # every request of the running call was given up
        self.on_batch: Callable[[int, int, float], None] | None = None  # (inputs, cost, s)

    def start(self) -> None:
        if self.task is None:
            self.wake = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass
            self.task = None
        # A call still running (its client timed out or left) finishes before the app is
        # gone, so nothing else ever runs the model beside it.
        await asyncio.to_thread(self.executor.shutdown, wait=True, cancel_futures=True)

    def submit(self, work: Work) -> asyncio.Future:
        """Queue `work`; its future gets the list of outputs (or the exception)."""
        self.start()
        work.future = asyncio.get_running_loop().create_future()
        self.waiting.append(work)
        self.queued_cost += work.left()
        self.wake.set()
        return work.future

    def seconds_to_drain(self) -> float:
        """About how long the queued work takes at the recent rate (for Retry-After)."""
        if not self.rate:
            return 1.0
        return self.queued_cost / self.rate

    async def in_thread(self, function, *args):
        """Run `function(*args)` on the model's thread (e.g. a tokenizer check)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    def check(self) -> None:
        """On the model's thread, inside a call: raise `Cancelled` when every request of the
        call has been given up."""
        if self.abandoned.is_set():
            raise Cancelled("every request of this call was given up")

    def _timed(self, run, inputs):
        """`run(inputs)` on the model's thread, adding its CPU time to `cpu_seconds` (what the
        model and the library cost, apart from HTTP and JSON on the event loop)."""
        began = time.thread_time()
        try:
            return run(inputs)
        finally:
            self.cpu_seconds += time.thread_time() - began

    def _drop_given_up(self) -> None:
        for w in [w for w in self.waiting if w.future.done()]:
            self.waiting.remove(w)
            self.queued_cost -= w.left()

    def _next_batch(self) -> list[tuple[Work, int, int]]:
        """(work, first input, end) parts of the next batch; a work whose inputs are all in
        it leaves the line. The batch starts with the cheapest waiting work (a one-text fill
        goes before the rest of a flood of large scores), unless the work at the head of
        the line has waited `patience` seconds: then that one (plain turns), so a large
        request is not starved."""
        head = self.waiting[0]
        first = head if time.monotonic() - head.since > self.patience else \
            min(self.waiting, key=Work.left)
        if first.key is None:
            parts = [(first, first.taken, len(first.inputs))]
        else:
            parts, spent, count = [], 0, 0
            # the chosen work first: works of its kind ahead of it in line must not fill
            # the batch before it
            for w in [first, *(w for w in self.waiting if w is not first)]:
                if w is not first and (not self.batching or w.key != first.key):
                    continue
                end = w.taken
                while end < len(w.inputs) and count < self.max_batch and (
                        count == 0 or self.max_batch_tokens is None
                        or spent + w.costs[end] <= self.max_batch_tokens):
                    spent += w.costs[end]
                    count += 1
                    end += 1
                if end > w.taken:
                    parts.append((w, w.taken, end))
                if count >= self.max_batch or (self.max_batch_tokens is not None
                                               and spent >= self.max_batch_tokens):
                    break
        for w, start, end in parts:
            w.taken = end
            self.queued_cost -= sum(w.costs[start:end])
            if end == len(w.inputs):
                self.waiting.remove(w)
        return parts

    async def _loop(self) -> None:
        backlog = ran = False
        while True:
            while not self.waiting:
                self.wake.clear()
                if not ran:
                    await self.wake.wait()
                    continue
                try:
                    await asyncio.wait_for(self.wake.wait(), TRIM_AFTER_IDLE_S)
                except asyncio.TimeoutError:  # the end of a burst: its memory goes back
                    await self.in_thread(release_free_memory)
                    ran = False
            if self.batching and self.window > 0 and not backlog:
                await asyncio.sleep(self.window)  # company for a request that found us idle
            self._drop_given_up()
            if self.waiting:
                parts = self._next_batch()
                await self._run(parts)
                ran = True
                for w, _, _ in parts:  # the next turn comes after everyone waiting now
                    if w in self.waiting:
                        self.waiting.remove(w)
                        self.waiting.append(w)
            backlog = bool(self.waiting)  # requests that came during the run: go at once

    async def _run(self, parts: list[tuple[Work, int, int]]) -> None:
        live = [(w, a, b) for w, a, b in parts if not w.future.done()]
        if not live:
            return
        inputs = [x for w, a, b in live for x in w.inputs[a:b]]
        cost = sum(c for w, a, b in live for c in w.costs[a:b])
        abandoned = self.abandoned = threading.Event()
        left = len(live)

        def given_up(future) -> None:  # on the loop's thread
            nonlocal left
            if future.cancelled():
                left -= 1
                if left == 0:
                    abandoned.set()

        for w, _, _ in live:
            w.future.add_done_callback(given_up)
        began = time.perf_counter()
        try:
            self.running = True
            try:
                outputs = await self.in_thread(self._timed, live[0][0].run, inputs)
            finally:
                self.running = False
                for w, _, _ in live:
                    w.future.remove_done_callback(given_up)
            self.calls += 1
        except MlmkitError as error:
            if len(live) == 1:
                _fail(live[0][0], error)
                return
            for part in live:  # find whose input it was: each alone
                await self._run([part])
            return
        except Exception as error:  # noqa: BLE001 (reported to every waiting request)
            for w, _, _ in live:
                _fail(w, error)
            return
        seconds = time.perf_counter() - began
        self.tokens += cost
        if seconds > 0:
            rate = cost / seconds
            self.rate = rate if self.rate is None else 0.7 * self.rate + 0.3 * rate
        if self.on_batch is not None:
            self.on_batch(len(inputs), cost, seconds)
        start = 0
        for w, a, b in live:
            w.outputs += outputs[start:start + b - a]
            start += b - a
            if b == len(w.inputs) and not w.future.done():
                w.future.set_result(w.outputs)
                self.works += 1


def _fail(work: Work, error: BaseException) -> None:
    if not work.future.done():
        work.future.set_exception(error)
