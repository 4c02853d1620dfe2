"""The FastAPI application: routes over the library functions, each model behind a worker.

Request and response bodies are the library's result types: `/v1/score` returns
`[TextScore.to_dict(), ...]` of `mlmkit.score` on the same texts and options, `/v1/fill`
those of `mlmkit.fill_mask`, and so on, so an HTTP result equals the Python result.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from mlmkit import __version__
from mlmkit.core import checks
from mlmkit.errors import InvalidArgument, MlmkitError
from mlmkit.generation.fill_mask import MODES
from mlmkit.probe.cloze import AGGREGATES
from mlmkit.scoring.text_scores import _check_spans as check_spans
from mlmkit.scoring.text_scores import check_score_options
from mlmkit.serve.adapters import (
    Cancelled,
    StepStream,
    stride_gap,
    token_alternatives,
    word_differences,
)
from mlmkit.serve.config import ServeConfig
from mlmkit.serve.http_errors import BodyGuard, HTTPError, for_http, install_handlers, log
from mlmkit.serve.schemas import (
    SAMPLER_FIELDS,
    ClassifyRequest,
    CompareRequest,
    FillRequest,
    GenerateRequest,
    InfillRequest,
    ScoreRequest,
)
from mlmkit.serve.worker import ModelWorker, Work

STATIC = Path(str(resources.files("mlmkit.serve") / "static"))


def load_models(specs: list[str], *, device=None, precision="auto", threads=None,
                allow_untrained_head: bool = False) -> dict:
    """`name=path` or `path` (named by its last part) -> loaded `MLM`s, each loaded once.
    `allow_untrained_head`: accept checkpoints whose MLM head is random, as `mlmkit score
    --allow-untrained-head` does (their scores are noise)."""
    from mlmkit.models import prepare_mlm

    if not specs:
        raise InvalidArgument("no model given: pass one or more model directories or names")
    models = {}
    for spec in specs:
        name, _, path = spec.partition("=") if "=" in spec and not Path(spec).exists() \
            else ("", "", spec)
        name = name or Path(path.rstrip("/")).name or path
        if name in models:
            raise InvalidArgument(f"two models are named {name!r}: name them, e.g. "
                                  f"a={path} b=OTHER")
        mlm, _ = prepare_mlm(path, device=device, precision=precision, threads=threads,
                             allow_untrained_head=allow_untrained_head)
        models[name] = mlm
    return models


def _as_models(models) -> dict:
    from mlmkit.models import as_mlm

    if isinstance(models, dict):
        return {str(k): as_mlm(v) for k, v in models.items()}
    if isinstance(models, (list, tuple)) and not (len(models) == 2 and not isinstance(
            models[0], (str, Path)) and hasattr(models[1], "convert_ids_to_tokens")):
        out = {}
        for m in models:
            mlm = as_mlm(m)
            out[Path(str(mlm.name)).name or f"model{len(out)}"] = mlm
        return out
    mlm = as_mlm(models)
    return {Path(str(mlm.name)).name or "model": mlm}


class Server:
    """The models, their workers and check tokenizers, and the bounds."""

    def __init__(self, models: dict, config: ServeConfig):
        if not models:
            raise InvalidArgument("no model given: pass one or more models")
        self.models, self.config = models, config
        self.workers = {name: ModelWorker(name, config.batching, config.batch_window_ms,
                                          config.max_batch_texts) for name in models}
        # A copy per model, used on the event loop's thread for length checks, so no
        # tokenizer is ever shared between two threads.
        self.check_tokenizers = {name: copy.deepcopy(m.tokenizer) for name, m in models.items()}
        self.check_backends = {name: _length_backend(t) for name, t in
                               self.check_tokenizers.items()}
        self.started = time.time()

    # --- requests -------------------------------------------------------------------------------

    def model_name(self, name: str | None) -> str:
        if name is None:
            return next(iter(self.models))
        if name not in self.models:
            raise HTTPError(404, "UnknownModel", f"model {name!r} is not served here: use one "
                            f"of {', '.join(self.models)} (GET /v1/models)")
        return name

    def texts(self, value, what: str, *, allow_empty: bool = False) -> list[str]:
        texts = [value] if isinstance(value, str) else list(value)
        if not texts:
            raise HTTPError(400, "InvalidArgument", f"{what} is an empty list: send at least "
                            "one text")
        if len(texts) > self.config.max_texts:
            raise HTTPError(413, "TooLarge", f"{what} has {len(texts)} entries, more than "
                            f"{self.config.max_texts} (--max-texts): split the request")
        for i, text in enumerate(texts):
            name = what if isinstance(value, str) else f"{what}[{i}]"
            if not allow_empty and not text.strip():
                raise HTTPError(400, "InvalidArgument", f"{name} is empty: send text to "
                                "work on")
            if "\x00" in text:
                raise HTTPError(400, "InvalidArgument", f"{name} holds a NUL character: send "
                                "plain text")
            if len(text) > 20 * self.config.max_tokens:
                raise HTTPError(413, "TooLarge", f"{name} has {len(text):,} characters, too "
                                f"many for {self.config.max_tokens} tokens (--max-tokens)")
        return texts

    def check_tokens(self, name: str, texts: list[str], what: str, single: bool) -> None:
        backend = self.check_backends[name]
        if backend is not None:
            lengths = [len(e) for e in backend.encode_batch(texts, add_special_tokens=True)]
        else:
            tokenizer = self.check_tokenizers[name]
            lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True,
                                                     truncation=False, verbose=False)["input_ids"]]
        for i, n in enumerate(lengths):
            if n > self.config.max_tokens:
                label = what if single else f"{what}[{i}]"
                raise HTTPError(413, "TooLarge", f"{label} has {n} tokens, more than "
                                f"{self.config.max_tokens} (--max-tokens): shorten it")

    def count(self, name: str, value, low: int, high: int, flag: str | None = None) -> None:
        if value is None:
            return
        if value < low or (flag is None and value > high):
            # A zero or negative count is a bad value (400), not a request too large (413).
            raise HTTPError(400, "InvalidArgument", f"{name}={value} is outside {low}..{high}")
        if value > high:
            raise HTTPError(413, "TooLarge", f"{name}={value} is outside {low}..{high} ({flag})")

    async def answer(self, request: Request, name: str, work: Work):
        """Submit `work` to the model's worker; wait for it, the timeout or the client leaving."""
        return await self.wait(request, self.workers[name].submit(work))

    async def wait(self, request: Request, future: asyncio.Future):
        """The result of a submitted work; its future cancelled on timeout or hang-up."""
        # Woken by whichever comes first: the result, the client hanging up (the server's
        # receive channel says so once the body is read) or the timeout. Polling both every
        # 50 ms cost each waiting request ~0.1 ms of the event loop's CPU per poll, most of the
        # loop's time when many requests queue (issue 16: batched vs unbatched score).
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({future, gone}, timeout=self.config.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if future in done:
            return future.result()
        future.cancel()
        if gone in done:
            raise HTTPError(499, "ClientClosed", "the client closed the connection")
        raise HTTPError(504, "Timeout", f"the request took more than {self.config.timeout:g} s "
                        "(--timeout): send fewer texts or fewer steps")

    # --- the library calls ----------------------------------------------------------------------

    def score_run(self, name: str, metric, per_token, per_word, unk, alternatives, stride):
        """The score call over (text, span or None, what the request calls the text)
        inputs: requests with and without spans share one call (a None span is the whole
        text, as in `mlmkit.score`)."""
        import mlmkit

        mlm, c = self.models[name], self.config

        def call(items):
            texts = [text for text, _, _ in items]
            spans = [span for _, span, _ in items]
            spans = None if all(s is None for s in spans) else spans
            gap = stride_gap(mlm, texts, unk, stride, spans)
            if gap is not None:  # the library's message, naming the request's text
                i, message = gap
                raise InvalidArgument(message.replace("of a text", f"of {items[i][2]}", 1))
            results = mlmkit.score(mlm, texts, metric=metric, per_token=per_token,
                                   per_word=per_word, spans=spans, unk=unk, stride=stride,
                                   batch_tokens=c.batch_tokens, precision=c.precision,
                                   threads=c.threads, progress=False)
            alts = token_alternatives(mlm, texts, alternatives, unk, metric=metric,
                                      stride=stride, spans=spans, batch_tokens=c.batch_tokens,
                                      precision=c.precision) \
                if alternatives else [None] * len(texts)
            return [(r.to_dict(), a) for r, a in zip(results, alts, strict=True)]

        # PLL masks every token: a text's cost grows with its length squared.
        return self.in_pieces(name, call, lambda item: len(item[0]) ** 2)

    def fill_run(self, name: str, top_k, mode):
        import mlmkit

        mlm, c = self.models[name], self.config

        def call(texts):
            return [r.to_dict() for r in mlmkit.fill_mask(
                mlm, texts, top_k=top_k, mode=mode, batch_tokens=c.batch_tokens,
                precision=c.precision, threads=c.threads, progress=False)]

        if mode != "joint":
            return call  # one model call per text: nothing to stop in between
        return self.in_pieces(name, call, lambda text: len(text) * (
            text.count("[MASK]") + text.count("<mask>")))  # one model call per mask

    def in_pieces(self, name: str, call, cost):
        """`call` over the texts in pieces of about PIECE_COST (a piece holds one text at
        least), with a check in between: a gathered call whose requests were all given up
        (timeout, client gone) stops there. The largest request (64 texts of 512 tokens)
        took ~5 min of the model on the README's tiny model, long after its 504. A request of
        usual size is one piece, one library call."""
        worker = self.workers[name]

        def run(texts):
            out, piece, spent = [], [], 0
            for text in texts:
                if piece and spent + cost(text) > PIECE_COST:
                    worker.check()
                    out += call(piece)
                    piece, spent = [], 0
                piece.append(text)
                spent += cost(text)
            worker.check()
            return out + call(piece)

        return run


MAX_VERBALIZER_WORDS = 1_000
"""Words of a /v1/classify verbalizer, all labels together: 400 multi-token words cost 0.8 s
of the README's tiny model per text, and a 1 MB body held ~50,000 (hours for 64 texts)."""

MAX_CANDIDATES = 256
"""Span-length combinations of one /v1/infill template (a bound: beyond it is a 413)."""

PIECE_COST = 1_000_000
"""What one library call of a long request holds, in characters squared (PLL) or characters
times masks (joint fill): ~1,000 characters of text."""


def _length_backend(tokenizer):
    """The Rust tokenizer of a fast `tokenizer` (its private copy), set up once as the
    library's call leaves it (special tokens added, no truncation, no padding), so a length
    check is one `encode_batch` without the Python wrapper's conversions (~0.2 ms per
    request on the event loop); None for a slow tokenizer (checked through its call)."""
    backend = getattr(tokenizer, "_tokenizer", None) if getattr(tokenizer, "is_fast",
                                                                 False) else None
    if backend is None or not hasattr(backend, "encode_batch"):
        return None
    tokenizer(["a"], add_special_tokens=True, truncation=False, verbose=False)
    if backend.truncation is not None or backend.padding is not None:
        return None
    return backend


async def _disconnected(request: Request) -> None:
    """Returns when the client has closed the connection (after the body was read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


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
    from mlmkit.core.results import jsonable

    return f"event: {event}\ndata: {json.dumps(jsonable(data), allow_nan=False)}\n\n".encode()


def create_app(models, config: ServeConfig | None = None) -> FastAPI:
    """The application serving `models` (a dict name -> MLM / name / path, one model, or a
    list) under `config` (default bounds)."""
    config = config or ServeConfig()
    server = Server(_as_models(models), config)

    async def lifespan(app):
        yield
        for worker in server.workers.values():
            await worker.stop()

    app = FastAPI(title="mlmkit", version=__version__, docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="Masked language models over HTTP: fill, score, generate, infill, "
                              "classify and compare. Bodies are mlmkit's result types.")
    app.state.server = server
    # The API key is checked there too, before any body is read (every path but the
    # playground, its files, /healthz, /docs and /openapi.json).
    app.add_middleware(BodyGuard, max_bytes=config.max_body_bytes, api_key=config.api_key)
    install_handlers(app)

    @app.get("/", include_in_schema=False)
    async def playground():
        return FileResponse(STATIC / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return FileResponse(STATIC / "docs.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/healthz", summary="Liveness: the server answers and its models are loaded")
    async def healthz():
        return {"status": "ok", "models": list(server.models),
                "uptime_s": round(time.time() - server.started, 3)}

    @app.get("/v1/models", summary="The served models and the bounds")
    async def list_models():
        out = []
        for name, mlm in server.models.items():
            net, tok = mlm.model, mlm.tokenizer
            out.append({"name": name, "source": str(mlm.name),
                        "model_type": getattr(net.config, "model_type", None),
                        "max_length": mlm.max_length, "vocab_size": len(tok),
                        "parameters": sum(p.numel() for p in net.parameters()),
                        "mask_token": tok.mask_token, "device": str(mlm.device),
                        "calls": server.workers[name].calls,
                        "cpu_seconds": round(server.workers[name].cpu_seconds, 6)})
        c = config
        return {"models": out, "limits": {
            "max_body_bytes": c.max_body_bytes, "max_texts": c.max_texts,
            "max_tokens": c.max_tokens, "max_steps": c.max_steps, "max_top_k": c.max_top_k,
            "timeout": c.timeout, "batching": c.batching, "api_key": c.api_key is not None}}

    @app.post("/v1/fill", summary="Top-k tokens at each mask "
              "(mlmkit.fill_mask)")
    async def fill(body: FillRequest, request: Request):
        name = server.model_name(body.model)
        texts = server.texts(body.texts, "texts")
        server.count("top_k", body.top_k, 1, config.max_top_k, "--max-top-k")
        checks.choice("mode", body.mode, MODES)  # the library's check, before the queue
        server.check_tokens(name, texts, "texts", isinstance(body.texts, str))
        work = Work(("fill", body.top_k, body.mode), texts,
                    server.fill_run(name, body.top_k, body.mode))
        results = await server.answer(request, name, work)
        # The results are plain JSON types already (`to_dict()`): a JSONResponse skips
        # FastAPI's recursive jsonable_encoder (~1 ms per request), same bytes.
        return JSONResponse({"model": name, "results": results})

    @app.post("/v1/score", summary="PLL, PLL-word-l2r, PPPL, token and "
              "word scores (mlmkit.score)")
    async def score(body: ScoreRequest, request: Request):
        name = server.model_name(body.model)
        texts = server.texts(body.texts, "texts")
        server.count("alternatives", body.alternatives, 0, config.max_top_k, "--max-top-k")
        mlm = server.models[name]
        vocab = min(len(mlm.tokenizer), getattr(mlm.model.config, "vocab_size", 1 << 62))
        if body.alternatives > vocab:  # torch.topk failed: a 500
            raise HTTPError(400, "InvalidArgument", f"alternatives={body.alternatives} is more "
                            f"than the model's {vocab:,} tokens: ask for fewer")
        if body.alternatives and not body.per_token:
            raise HTTPError(400, "InvalidArgument", "alternatives needs per_token: true (they "
                            "are listed per scored token)")
        check_score_options(body.metric, body.unk, body.stride, None)  # the library's checks
        check_spans(body.spans, texts)
        server.check_tokens(name, texts, "texts", isinstance(body.texts, str))
        key = ("score", body.metric, body.per_token, body.per_word, body.unk, body.alternatives,
               body.stride)
        spans = [None] * len(texts) if body.spans is None else \
            [None if s is None else tuple(s) for s in body.spans]
        what = ["texts" if isinstance(body.texts, str) else f"texts[{i}]"
                for i in range(len(texts))]
        work = Work(key, list(zip(texts, spans, what, strict=True)),
                    server.score_run(name, *key[1:]))
        pairs = await server.answer(request, name, work)
        out = {"model": name, "results": [r for r, _ in pairs]}
        if body.alternatives:
            out["alternatives"] = [a for _, a in pairs]
        return JSONResponse(out)  # plain JSON types already, as in fill

    async def unmask(request: Request, body, name: str, inputs: list[str], what: str,
                     call):
        """generate / infill: one call alone (its seeds depend on the call), or a stream."""
        mlm = server.models[name]
        if not body.stream:
            # Every step checks whether the request was given up (timeout, or the client
            # gone), so the model is freed then, not after up to --max-steps more steps.
            worker = server.workers[name]
            work = Work(None, inputs, lambda items: [r.to_dict() for r in call(
                items, lambda event: worker.check())])
            return {"model": name, "results": await server.answer(request, name, work)}
        if len(inputs) != 1:
            raise HTTPError(400, "InvalidArgument", f"stream: true takes one {what}: send a "
                            f"single {what}, or stream: false for a list")
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        stream = StepStream(mlm, lambda step: loop.call_soon_threadsafe(
            events.put_nowait, ("step", step)))
        work = Work(None, inputs, lambda items: [r.to_dict() for r in call(items, stream)])
        future = server.workers[name].submit(work)
        future.add_done_callback(lambda f: events.put_nowait(("done", None)))
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

        return StreamingResponse(body_stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def check_sampler(body) -> None:
        server.count("steps", body.steps, 1, config.max_steps, "--max-steps")
        server.count("max_steps", getattr(body, "max_steps", None), 1, config.max_steps,
                     "--max-steps")
        server.count("seed", body.seed, 0, 2**63 - 1)

    @app.post("/v1/generate", summary="Continue prompts by iterative "
              "unmasking (mlmkit.generate); stream: true sends every step")
    async def generate(body: GenerateRequest, request: Request):
        import mlmkit

        name = server.model_name(body.model)
        prompts = server.texts(body.prompt, "prompt", allow_empty=True)
        server.count("length", body.length, 1, config.max_tokens, "--max-tokens")
        check_sampler(body)
        server.check_tokens(name, prompts, "prompt", isinstance(body.prompt, str))
        options = _sampler_kwargs(body)
        mlm = server.models[name]
        constraints = _constraints(body.constraints, len(mlm.tokenizer))

        def call(items, on_step):
            return mlmkit.generate(mlm, list(items), length=body.length, **options,
                                   constraints=constraints,
                                   batch_tokens=config.batch_tokens, precision=config.precision,
                                   threads=config.threads, progress=False, on_step=on_step)

        return await unmask(request, body, name, prompts, "prompt", call)

    @app.post("/v1/infill", summary="Fill the [MASK] spans of a template "
              "(mlmkit.infill); stream: true sends every step")
    async def infill(body: InfillRequest, request: Request):
        import mlmkit
        from mlmkit.generation.template import Span, parse_template

        name = server.model_name(body.model)
        templates = server.texts(body.template, "template")
        check_sampler(body)
        # The library takes up to 10,000; each candidate is an unmasking run of its own.
        server.count("max_candidates", body.max_candidates, 1, MAX_CANDIDATES,
                     "this server's bound")
        for i, template in enumerate(templates):
            spans = [p for p in parse_template(template, where=f"template {i + 1}")
                     if isinstance(p, Span)]
            longest = sum(s.longest for s in spans)
            if longest > config.max_tokens:
                raise HTTPError(413, "TooLarge", f"template {i + 1} asks for up to {longest} "
                                f"masks, more than {config.max_tokens} (--max-tokens)")
        server.check_tokens(name, templates, "template", isinstance(body.template, str))
        options = _sampler_kwargs(body)
        mlm = server.models[name]

        def call(items, on_step):
            return mlmkit.infill(mlm, list(items), **options, max_candidates=body.max_candidates,
                                 batch_tokens=config.batch_tokens, precision=config.precision,
                                 threads=config.threads, progress=False, on_step=on_step)

        return await unmask(request, body, name, templates, "template", call)

    @app.post("/v1/classify", summary="Zero-shot classification with a "
              "cloze template and a verbalizer (mlmkit.cloze_classify)")
    async def classify(body: ClassifyRequest, request: Request):
        import mlmkit

        name = server.model_name(body.model)
        texts = server.texts(body.texts, "texts")
        checks.choice("aggregate", body.aggregate, AGGREGATES)
        server.check_tokens(name, [body.template.replace("{text}", t) for t in texts],
                            "texts", isinstance(body.texts, str))
        words = sum(1 if isinstance(w, str) else len(w)
                    for w in (body.verbalizer or {}).values())
        if words > MAX_VERBALIZER_WORDS:  # a multi-token word costs model calls per text
            raise HTTPError(413, "TooLarge", f"the verbalizer has {words:,} words, more than "
                            f"{MAX_VERBALIZER_WORDS:,}: send fewer")
        mlm = server.models[name]
        gold = body.gold if body.gold is None or isinstance(body.gold, list) else [body.gold]

        def run(items):
            result = mlmkit.cloze_classify(mlm, list(items), body.template, body.verbalizer,
                                           gold=gold, aggregate=body.aggregate,
                                           batch_tokens=config.batch_tokens,
                                           precision=config.precision, threads=config.threads,
                                           progress=False)
            return [result.to_dict()] + [None] * (len(items) - 1)

        results = await server.answer(request, name, Work(None, texts, run))
        return {"model": name, "result": results[0]}

    @app.post("/v1/compare", summary="One text under several models: token "
              "and word scores side by side, and the word differences")
    async def compare(body: CompareRequest, request: Request):
        names = list(server.models) if body.models is None else \
            [server.model_name(n) for n in body.models]
        if len(names) < 2 or len(set(names)) != len(names):
            raise HTTPError(400, "InvalidArgument", "compare needs two or more different "
                            "models: list them in models, or serve several (mlmkit serve A B)")
        if len(names) > 8:
            raise HTTPError(413, "TooLarge", "compare takes at most 8 models")
        texts = server.texts(body.text, "text")
        check_score_options(body.metric, body.unk, body.stride, None)
        for name in names:
            server.check_tokens(name, texts, "text", True)
        key = ("score", body.metric, True, True, body.unk, 0, body.stride)
        pairs = await asyncio.gather(*(server.answer(request, n, Work(
            key, [(texts[0], None, "text")], server.score_run(n, *key[1:]))) for n in names))
        results = [p[0][0] for p in pairs]
        return {"text": body.text, "models": names, "results": results,
                "words": word_differences(names, results)}

    # HEAD on every GET route (uptime checks, curl -I): FastAPI answers 405 to HEAD on a
    # route declared for GET only. The server leaves out the body (h11 drops it for HEAD).
    for route in list(app.routes):
        if isinstance(route, APIRoute) and "GET" in route.methods \
                and "HEAD" not in route.methods:
            app.add_api_route(route.path, route.endpoint, methods=["HEAD"],
                              include_in_schema=False)

    @app.exception_handler(Cancelled)
    async def _cancelled(request, error):
        return JSONResponse({"error": {"type": "ClientClosed", "message": str(error)}},
                            status_code=499)

    return app
