"""Dynamic batching: concurrent requests for one model gathered into one library call.

Each served model has one worker: an asyncio task that owns a single thread (the model runs
in one place at a time). A request becomes a `Work` (its inputs, a merge key, the library
call). When the worker is idle, the first work waits `batch_window_ms` for company; then
every queued work with the same key (score: metric and options; fill: top-k and mode) is
concatenated into ONE call of the library function (`mlmkit.score`, `mlmkit.fill_mask`),
which cuts its token-budget, length-bucketed batches in `mlmkit.engine.batching`; the
results are split back in order. While a call runs, new requests queue and form the next
batch (continuous batching). Works with no key (generation, which is seeded per call) run
alone. A work whose client went away or timed out is dropped before it runs.

If a gathered call fails with an mlmkit error, each of its works runs again alone, so the
error reaches the request that caused it and nobody else.

A call already running when every one of its requests is given up (timed out, or the client
gone) stops at its next `check()`: the library calls check between pieces of a long call
(score and fill) or at every unmasking step (generate and infill), so the model is free for
the next request instead of finishing work nobody waits for.
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


@dataclass
class Work:
    key: Hashable | None
    """Works with the same key are gathered into one call; None: always alone."""
    inputs: list
    run: Callable[[list], list]
    """The library call: inputs of one or more works in, one output per input out."""
    future: asyncio.Future = field(default=None)


class ModelWorker:
    """The queue and thread of one model."""

    def __init__(self, name: str, batching: bool, window_ms: float, max_batch: int):
        self.name, self.batching = name, batching
        self.window = window_ms / 1000.0
        self.max_batch = max_batch
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"mlmkit-serve-{name}")
        self.queue: asyncio.Queue | None = None
        self.task: asyncio.Task | None = None
        self.calls = 0  # library calls run (a gathered batch counts once)
        self.works = 0  # works answered
        self.cpu_seconds = 0.0  # CPU time of the library calls, on the model's thread
        self.running = False  # a call is on the model's thread now
        self.abandoned = threading.Event()  # every request of the running call was given up

    def start(self) -> None:
        if self.task is None:
            self.queue = asyncio.Queue()
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
        self.queue.put_nowait(work)
        return work.future

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

    def _groups(self, works: list[Work]) -> list[list[Work]]:
        if not self.batching:
            return [[w] for w in works]
        groups: dict = {}  # key -> [the open group, its number of inputs]
        out: list[list[Work]] = []
        for w in works:
            if w.key is None:
                out.append([w])
                continue
            group = groups.get(w.key)
            if group is None or group[1] + len(w.inputs) > self.max_batch:
                group = groups[w.key] = [[], 0]
                out.append(group[0])
            group[0].append(w)
            group[1] += len(w.inputs)
        return out

    async def _loop(self) -> None:
        backlog = False
        while True:
            works = [await self.queue.get()]
            if self.batching and self.window > 0 and not backlog:
                await asyncio.sleep(self.window)  # company for a request that found us idle
            while not self.queue.empty():
                works.append(self.queue.get_nowait())
            for group in self._groups(works):
                await self._run(group)
            backlog = not self.queue.empty()  # requests that came during the run: go at once

    async def _run(self, group: list[Work]) -> None:
        live = [w for w in group if not w.future.done()]
        if not live:
            return
        inputs = [x for w in live for x in w.inputs]
        abandoned = self.abandoned = threading.Event()
        left = len(live)

        def given_up(future) -> None:  # on the loop's thread
            nonlocal left
            if future.cancelled():
                left -= 1
                if left == 0:
                    abandoned.set()

        for w in live:
            w.future.add_done_callback(given_up)
        try:
            self.running = True
            try:
                outputs = await self.in_thread(self._timed, live[0].run, inputs)
            finally:
                self.running = False
            self.calls += 1
        except MlmkitError as error:
            if len(live) == 1:
                _fail(live[0], error)
                return
            for w in live:  # find whose input it was: each alone
                await self._run([w])
            return
        except Exception as error:  # noqa: BLE001 (reported to every waiting request)
            for w in live:
                _fail(w, error)
            return
        start = 0
        for w in live:
            part = outputs[start:start + len(w.inputs)]
            start += len(w.inputs)
            if not w.future.done():
                w.future.set_result(part)
            self.works += 1


def _fail(work: Work, error: BaseException) -> None:
    if not work.future.done():
        work.future.set_exception(error)
