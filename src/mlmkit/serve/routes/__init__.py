"""One router per task; `mlmkit.serve.app.create_app` includes them all."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.routing import APIRoute

from mlmkit.serve.routes import classify, embeddings, fill, score, status, unmask


def answer_head(router: APIRouter) -> None:
    """HEAD on every GET route of `router` (uptime checks, curl -I): FastAPI answers 405 to
    HEAD on a route declared for GET only. The server leaves out the body (h11 drops it for
    HEAD)."""
    for route in list(router.routes):
        if isinstance(route, APIRoute) and "GET" in route.methods \
                and "HEAD" not in route.methods:
            router.add_api_route(route.path, route.endpoint, methods=["HEAD"],
                                 include_in_schema=False)


ROUTERS = [status.router, fill.router, score.router, unmask.router, classify.router,
           embeddings.router]
for _router in ROUTERS:
    answer_head(_router)
