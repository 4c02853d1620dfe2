"""POST /v1/generate and /v1/infill: iterative unmasking (`mlmkit.generate`, `mlmkit.infill`), in one answer or as server-sent steps."""

from __future__ import annotations

import asyncio
import json
import re
import time

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from mlmkit.core.results import jsonable
from mlmkit.errors import MlmkitError
from mlmkit.generation.template import Span, parse_template
from mlmkit.serve.adapters import Cancelled, StepStream
from mlmkit.serve.http_errors import HTTPError, for_http, log
from mlmkit.serve.schemas import (
    SAMPLER_FIELDS,
    GenerateRequest,
    InfillRequest,
)
from mlmkit.serve.server import MAX_CANDIDATES, server_of
from mlmkit.serve.worker import Work

router = APIRouter()


def _sampler_kwargs(body) -> dict:
    return {name: getattr(body, name) for name in SAMPLER_FIELDS}


def _constraints(value, vocab_size: int) -> dict | None:
    if value is None:
        return None
    out, keys = {}, {}
    for key, token in value.items():
        # ASCII digits only: str.isdigit() also takes '²', which int() refuses (a 500).
        if re.fullmatch(r"\s*-?[0-9]+\s*", key) is None:
            raise HTTPError(400, "InvalidArgument", f"constraints key {key!r} is not a "
                            "position: use whole numbers, e.g. {\"3\": \"the\"}")
        try:
            position = int(key)
        except ValueError:  # beyond Python's 4,300-digit guard (was a 500)
            raise HTTPError(400, "InvalidArgument", f"constraints key {key!r} is not a "
                            "position of the generated text: use whole numbers from 0 to "
                            "length - 1") from None
        if position in out:  # " 1 " and "1", or "01" and "1": one would silently win
            raise HTTPError(400, "InvalidArgument", f"constraints keys {keys[position]!r} "
                            f"and {key!r} are both position {position}: give each position "
                            "once")
        if isinstance(token, int) and not 0 <= token < vocab_size:
            raise HTTPError(400, "InvalidArgument", f"constraints[{key!r}]: token id {token} "
                            f"is not in the model's vocabulary (0 to {vocab_size - 1:,}): send "
                            "a token id in it, or the token as a string")
        out[position], keys[position] = token, key
    return out


def _sse(event: str, data) -> bytes:
    return f"event: {event}\ndata: {json.dumps(jsonable(data), allow_nan=False)}\n\n".encode()


STREAM_EVENTS = 64
"""Steps a stream holds for a client that does not read them; past it the generation stops
(the model is not held for a client that has stopped reading)."""

WRITE_GRACE = 2.0
"""Seconds a stream's write may take past the request's deadline (its last event, the result
or the timeout, is written then)."""


class StreamWithDeadline(StreamingResponse):
    """A stream whose every write must go out by the request's deadline (plus WRITE_GRACE):
    a client that stops reading blocks the server's writes once the sockets' buffers are
    full, and held the connection and this response for as long as it kept the socket open.
    Past the deadline the stream ends, unfinished (uvicorn closes the connection)."""

    def __init__(self, content, *, deadline: float, **kwargs):
        super().__init__(content, **kwargs)
        self.deadline = deadline

    async def stream_response(self, send) -> None:
        async def timed_send(message) -> None:
            left = max(0.0, self.deadline - time.monotonic()) + WRITE_GRACE
            try:
                await asyncio.wait_for(send(message), left)
            except asyncio.TimeoutError:
                raise _Stalled from None

        try:
            await super().stream_response(timed_send)
        except _Stalled:
            log.warning("a stream's client stopped reading: the stream ended at its deadline")
            await self.body_iterator.aclose()


class _Stalled(Exception):
    """A stream's write did not go out by its deadline."""


async def unmask(request: Request, body, name: str, inputs: list[str], what: str,
                 call, costs: list[int]):
    """generate / infill: one call alone (its seeds depend on the call), or a stream."""
    server = server_of(request)
    config = server.config
    mlm = server.models[name]
    if not body.stream:
        # Every step checks whether the request was given up (timeout, or the client
        # gone), so the model is freed then, not after up to --max-steps more steps.
        worker = server.workers[name]
        work = Work(None, inputs, lambda items: [r.to_dict() for r in call(
            items, lambda event: worker.check())], costs)
        return {"model": name, "results": await server.answer(request, name, work)}
    if len(inputs) != 1:
        raise HTTPError(400, "InvalidArgument", f"stream: true takes one {what}: send a "
                        f"single {what}, or stream: false for a list")
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def push(step) -> None:  # on the loop's thread
        if events.qsize() >= STREAM_EVENTS:
            stream.cancelled.set()  # the client stopped reading: stop at the next step
        else:
            events.put_nowait(("step", step))

    stream = StepStream(mlm, lambda step: loop.call_soon_threadsafe(push, step))
    work = Work(None, inputs, lambda items: [r.to_dict() for r in call(items, stream)], costs)
    server.admit(name, work)
    future = server.workers[name].submit(work)
    server.admitted += 1

    def finished(_) -> None:
        server.admitted -= 1
        events.put_nowait(("done", None))

    future.add_done_callback(finished)
    deadline = time.monotonic() + config.timeout
    # The response starts with the first step: every check of the options and inputs
    # runs before it, so a bad request is a 4xx JSON error, as without streaming (it was
    # a 200 whose stream held only an error event).
    try:
        first = await server.wait(request, asyncio.ensure_future(events.get()))
    except BaseException:
        stream.cancelled.set()
        future.cancel()
        raise
    if first[0] == "done" and not future.cancelled() and future.exception() is not None:
        raise future.exception()  # the handlers: 400 for mlmkit's errors, else a 500

    async def body_stream():
        kind, data = first
        try:
            while True:
                if kind == "step":
                    yield _sse("step", data)
                    remaining = deadline - time.monotonic()
                    try:
                        kind, data = await asyncio.wait_for(events.get(),
                                                            max(0.0, remaining))
                    except asyncio.TimeoutError:
                        yield _sse("error", {"error": {"type": "Timeout", "message": (
                            f"the request took more than {config.timeout:g} s "
                            "(--timeout)")}})
                        return
                    continue
                if future.cancelled():
                    return
                error = future.exception()
                if error is None:
                    yield _sse("result", {"model": name, "results": future.result()})
                elif isinstance(error, MlmkitError):
                    yield _sse("error", {"error": {"type": type(error).__name__,
                                                   "message": for_http(
                                                       str(error).splitlines()[0])}})
                elif not isinstance(error, Cancelled):
                    log.error("stream of POST %s failed", request.url.path, exc_info=error)
                    yield _sse("error", {"error": {"type": "InternalError", "message":
                                                   f"the server failed ({type(error).__name__})"}})
                return
        finally:
            stream.cancelled.set()
            future.cancel()

    return StreamWithDeadline(body_stream(), deadline=deadline, media_type="text/event-stream",
                              headers={"Cache-Control": "no-cache"})


def check_sampler(server, body) -> None:
    """The sampler's step counts within --max-steps, and a seed the library takes."""
    server.count("steps", body.steps, 1, server.config.max_steps, "--max-steps")
    server.count("max_steps", getattr(body, "max_steps", None), 1, server.config.max_steps,
                 "--max-steps")
    server.count("seed", body.seed, 0, 2**63 - 1)


@router.post("/v1/generate", summary="Continue prompts by iterative "
                                     "unmasking (mlmkit.generate); stream: true sends every step")
async def generate(body: GenerateRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    prompts = server.texts(body.prompt, "prompt", allow_empty=True)
    server.count("length", body.length, 1, server.config.max_tokens, "--max-tokens")
    check_sampler(server, body)
    lengths = server.check_tokens(name, prompts, "prompt", isinstance(body.prompt, str))
    # Each step reads the prompt and the generated tokens.
    costs = [(n + body.length) * (body.steps or body.length) for n in lengths]
    options = _sampler_kwargs(body)
    mlm = server.models[name]
    constraints = _constraints(body.constraints, len(mlm.tokenizer))

    def call(items, on_step):
        return mlm.generate(list(items), length=body.length, **options,
                            constraints=constraints, progress=False, on_step=on_step)

    return await unmask(request, body, name, prompts, "prompt", call, costs)


@router.post("/v1/infill", summary="Fill the [MASK] spans of a template "
                                   "(mlmkit.infill); stream: true sends every step")
async def infill(body: InfillRequest, request: Request):
    server = server_of(request)
    config = server.config
    name = server.model_name(body.model)
    templates = server.texts(body.template, "template")
    check_sampler(server, body)
    # The library takes up to 10,000; each candidate is an unmasking run of its own.
    server.count("max_candidates", body.max_candidates, 1, MAX_CANDIDATES,
                 "this server's bound")
    steps = []
    for i, template in enumerate(templates):
        spans = [p for p in parse_template(template, where=f"template {i + 1}")
                 if isinstance(p, Span)]
        longest = sum(s.longest for s in spans)
        if longest > config.max_tokens:
            raise HTTPError(413, "TooLarge", f"template {i + 1} asks for up to {longest} "
                            f"masks, more than {config.max_tokens} (--max-tokens)")
        steps.append(body.steps or max(1, longest))
    lengths = server.check_tokens(name, templates, "template", isinstance(body.template, str))
    costs = [n * k for n, k in zip(lengths, steps, strict=True)]  # each step reads it all
    options = _sampler_kwargs(body)
    mlm = server.models[name]

    def call(items, on_step):
        return mlm.infill(list(items), **options, max_candidates=body.max_candidates,
                          progress=False, on_step=on_step)

    return await unmask(request, body, name, templates, "template", call, costs)
