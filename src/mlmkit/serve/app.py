"""The FastAPI application: one router per task (`mlmkit.serve.routes`) over the library
functions, each model behind a worker (`mlmkit.serve.server`).

Request and response bodies are the library's result types: `/v1/score` returns
`[TextScore.to_dict(), ...]` of `mlmkit.score` on the same texts and options, `/v1/fill`
those of `mlmkit.fill_mask`, and so on, so an HTTP result equals the Python result.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

import mlmkit
from mlmkit import __version__
from mlmkit.core.run_layout import model_name
from mlmkit.errors import InvalidArgument
from mlmkit.options.serving import ServeConfig, is_loopback
from mlmkit.serve.adapters import Cancelled
from mlmkit.serve.http_errors import LOOPBACK_HOSTS, BodyGuard, HostGuard, install_handlers
from mlmkit.serve.metrics import Metrics
from mlmkit.serve.routes import ROUTERS, answer_head
from mlmkit.serve.server import Server

STATIC = Path(str(resources.files("mlmkit.serve") / "static"))


def load_models(specs: list[str], *, device=None, precision="auto", threads=None,
                batch_tokens=None, trust_remote_code=None,
                allow_untrained_head: bool = False, tokenizer=None) -> dict:
    """`name=path` or `path` -> loaded `MLM`s, each loaded once. A path is named by its run
    when it is a run's model folder (`runs/x/final` -> `x`), else by its last part
    (`mlmkit.core.run_layout.model_name`). `allow_untrained_head`: accept checkpoints whose
    MLM head is random, as `mlmkit score --allow-untrained-head` does (their scores are
    noise). `tokenizer`: the tokenizer of models saved without one (`--tokenizer DIR`)."""

    if not specs:
        raise InvalidArgument("no model given: pass one or more model directories or names")
    models = {}
    for spec in specs:
        name, _, path = spec.partition("=") if "=" in spec and not Path(spec).exists() \
            else ("", "", spec)
        name = name or model_name(path)
        if name in models:
            raise InvalidArgument(f"two models are named {name!r}: name them, e.g. "
                                  f"a={path} b=OTHER")
        # a sentence-transformers folder loads without an MLM head: it serves /v1/embeddings,
        # and its other routes answer the library's one-line refusal
        models[name] = mlmkit.load(path, device=device, precision=precision, threads=threads,
                                   batch_tokens=batch_tokens, trust_remote_code=trust_remote_code,
                                   allow_untrained_head=allow_untrained_head,
                                   tokenizer=tokenizer)
    return models


def _as_models(models, config: ServeConfig) -> dict:
    """name -> `MLM` bound to the config's runtime (precision, threads, token budget), once:
    the routes call the bound models' methods."""

    def bind(model):
        return mlmkit.load(model, precision=config.precision, threads=config.threads,
                           batch_tokens=config.batch_tokens)

    if isinstance(models, dict):
        return {str(k): bind(v) for k, v in models.items()}
    if isinstance(models, (list, tuple)) and not (len(models) == 2 and not isinstance(
            models[0], (str, Path)) and hasattr(models[1], "convert_ids_to_tokens")):
        out = {}
        for m in models:
            mlm = bind(m)
            out[model_name(str(mlm.name)) or f"model{len(out)}"] = mlm
        return out
    mlm = bind(models)
    return {model_name(str(mlm.name)) or "model": mlm}


def create_app(models, config: ServeConfig | None = None, *, host: str | None = None) -> FastAPI:
    """The application serving `models` (a dict name -> MLM / name / path, one model, or a
    list) under `config` (default bounds). `host`: the address it is bound to; on loopback
    (or with `config.allowed_hosts`) only requests naming an allowed host are answered."""
    config = config or ServeConfig()
    server = Server(_as_models(models, config), config)  # the routes read it: server_of(request)

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
    if (host is not None and is_loopback(host)) or config.allowed_hosts:
        # added last: it runs first, before the key and the body
        names = [*LOOPBACK_HOSTS, *(config.allowed_hosts or "").split(",")]
        app.add_middleware(HostGuard, allowed=names)
    install_handlers(app)

    @app.get("/", include_in_schema=False)
    async def playground():
        return FileResponse(STATIC / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs():
        return FileResponse(STATIC / "docs.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    for router in ROUTERS:
        app.include_router(router)

    answer_head(app.router)  # the playground's pages too

    paths = {r.path for router in [app.router, *ROUTERS] for r in router.routes
             if isinstance(getattr(r, "path", None), str)}
    metrics = Metrics(server, paths, config.access_log)
    app.state.metrics = metrics
    app.add_middleware(lambda inner: metrics.middleware(inner))  # the outermost

    @app.exception_handler(Cancelled)
    async def _cancelled(request, error):
        return JSONResponse({"error": {"type": "ClientClosed", "message": str(error)}},
                            status_code=499)

    return app
