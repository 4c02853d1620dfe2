"""`mlmkit serve`: the HTTP API (FastAPI) and the web playground over the library functions.

`create_app(models, config)` builds the application: every model loaded once, requests
validated and bounded (`ServeConfig`), concurrent score and fill requests gathered into one
token-budget batch (`mlmkit.serve.worker`, through `mlmkit.engine.batching`), results as the
library's own result types (`to_dict()`), errors as 4xx JSON. `run_server` serves it with
uvicorn. The playground's static files ship in `mlmkit/serve/static/` (no build step, no CDN).

FastAPI and uvicorn come with the extra `mlmkit[serve]`: importing this package checks for
them first, so `mlmkit serve` without them stops at once, in one line naming the extra,
before any model is loaded.
"""

from mlmkit.extras import require
from mlmkit.options.serving import ServeConfig

for _module in ("fastapi", "uvicorn", "prometheus_client"):
    require(_module, extra="serve", feature="mlmkit serve")

__all__ = ["ServeConfig", "create_app", "load_models", "run_server"]


def __getattr__(name: str):
    if name in ("create_app", "load_models"):
        from mlmkit.serve import app

        return getattr(app, name)
    if name == "run_server":
        from mlmkit.serve.run import run_server

        return run_server
    raise AttributeError(f"module 'mlmkit.serve' has no attribute {name!r}")
