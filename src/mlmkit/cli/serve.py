"""`mlmkit serve`: the HTTP API and the web playground for one or more models."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from mlmkit.cli.options import JSON, Runtime, command, trusting
from mlmkit.cli.score import ALLOW_UNTRAINED_HEAD
from mlmkit.core import checks
from mlmkit.errors import InvalidArgument, PathError
from mlmkit.options.serving import ServeConfig, check_host

SHORT_HELP = "Serve models over HTTP: a JSON API with request batching and a web playground."
EXAMPLE = """
Examples:

  mlmkit serve ./tiny-bert --port 8000

  mlmkit serve bert=./tiny-bert roberta=./tiny-roberta --json

  mlmkit serve ./tiny-bert --host 0.0.0.0 --api-key-file ./key.txt

Then open http://127.0.0.1:8000/ (the playground), or:

  curl -s localhost:8000/v1/score -H 'content-type: application/json' -d '{"texts": ["Open the file."]}'
"""


def serve_command(
    models: list[str] = typer.Argument(..., help="Models to serve: directories or hub names, "
                                       "NAME=PATH to name them (default name: the run's name "
                                       "for a run's final/, best/ or step-N/ folder, e.g. "
                                       "runs/pretrain/final -> pretrain; else the last part "
                                       "of the path)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind. Anything but "
                             "loopback needs --api-key."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port (0: any free port)."),
    api_key: str = typer.Option(None, "--api-key", envvar="MLMKIT_API_KEY", help="Require "
                                "this key on /v1 requests (Authorization: Bearer KEY or "
                                "X-API-Key); also $MLMKIT_API_KEY."),
    api_key_file: str = typer.Option(None, "--api-key-file", help="Read the API key from "
                                     "this file's first line (keeps it out of ps)."),
    allow_untrained_head: bool = ALLOW_UNTRAINED_HEAD,
    *, serving: ServeConfig, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Serve models over HTTP: POST /v1/fill, /v1/score, /v1/generate, /v1/infill,
    /v1/classify, /v1/compare; GET /v1/models, /healthz, /openapi.json, /docs; the
    playground at /. Concurrent requests are batched; every request is bounded."""
    with trusting(runtime.trust_remote_code):
        checks.count("seed", runtime.seed, 0, 2**63 - 1)
        if api_key_file is not None:
            if api_key is not None:
                raise InvalidArgument("give --api-key or --api-key-file, not both")
            path = Path(api_key_file).expanduser()
            if path.is_dir():
                raise PathError(f"--api-key-file {api_key_file} is a directory: pass the file "
                                "that holds the key (one line)")
            if not path.is_file():
                raise PathError(f"--api-key-file {api_key_file}: no such file; write the key "
                                "in it (one line)")
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as error:
                raise PathError(f"--api-key-file {api_key_file} cannot be read as UTF-8 text: "
                                f"{error}") from None
            api_key = lines[0].strip() if lines else ""
        check_host(host, api_key)
        config = dataclasses.replace(serving, api_key=api_key)
        # the optional extra: fastapi and uvicorn only when a server starts
        from mlmkit.serve.app import create_app, load_models
        from mlmkit.serve.run import run_server

        runtime.seed_everything()
        loaded = load_models(models, **runtime.load_keywords(),
                             allow_untrained_head=allow_untrained_head)
        app = create_app(loaded, config, host=host)
        run_server(app, host=host, port=port, announce_json=as_json, timeout=config.timeout)


def register(app: typer.Typer) -> None:
    command(app, "serve", serve_command, short_help=SHORT_HELP,
            help=SHORT_HELP + "\n\nEndpoints: POST /v1/fill, /v1/score, /v1/generate, "
            "/v1/infill (stream: true for server-sent steps), /v1/classify, /v1/compare; GET "
            "/v1/models, /healthz, /openapi.json, /docs; the playground at /. Binds 127.0.0.1 "
            "unless told otherwise; SIGTERM lets requests in flight finish." + EXAMPLE)
