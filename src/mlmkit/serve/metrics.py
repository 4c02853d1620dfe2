"""Prometheus metrics of one server (`GET /metrics`, the text format any Prometheus scrapes).

Every request is counted by route and status with its latency; the admission and batching
state is read when scraped (queue depth in requests and tokens, requests admitted), and each
model call adds its size in inputs and tokens (the rate of `mlmkit_model_tokens_total` is
the model's tokens per second). A registry per application, so two servers in one process
(the tests) keep their own counts.
"""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

ACCESS_LOG = "mlmkit.serve.access"
"""The logger of the access log (`--access-log`: one JSON line per request)."""

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TOKENS = tuple(4 ** k for k in range(2, 13))  # 16 .. 16.7 M tokens of model work


class Metrics:
    """The metrics of one server; `middleware` counts its requests."""

    def __init__(self, server, routes: set[str], access_log: bool = False):
        self.routes = routes
        self.access = logging.getLogger(ACCESS_LOG) if access_log else None
        self.registry = r = CollectorRegistry()
        self.requests = Counter("mlmkit_requests", "HTTP requests by route and status.",
                                ["route", "status"], registry=r)
        self.latency = Histogram("mlmkit_request_seconds", "Time from the request to the "
                                 "end of its answer, by route.", ["route"], buckets=SECONDS,
                                 registry=r)
        self.rejected = Counter("mlmkit_rejected", "Requests refused by admission control "
                                "(429).", registry=r)
        self.batch_tokens = Histogram("mlmkit_batch_tokens", "Model work of each model "
                                      "call, in tokens read.", ["model"], buckets=TOKENS,
                                      registry=r)
        self.batch_inputs = Histogram("mlmkit_batch_inputs", "Inputs (texts, prompts) of "
                                      "each model call.", ["model"],
                                      buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                                      registry=r)
        self.calls = Counter("mlmkit_model_calls", "Model calls (a gathered batch counts "
                             "once).", ["model"], registry=r)
        self.tokens = Counter("mlmkit_model_tokens", "Model work done, in tokens read.",
                              ["model"], registry=r)
        self.model_seconds = Counter("mlmkit_model_seconds", "Wall time of the model calls.",
                                     ["model"], registry=r)
        queued = Gauge("mlmkit_queue_requests", "Requests waiting for a batch.", ["model"],
                       registry=r)
        queued_tokens = Gauge("mlmkit_queue_tokens", "Model work waiting, in tokens.",
                              ["model"], registry=r)
        Gauge("mlmkit_admitted_requests", "Requests queued or running.",
              registry=r).set_function(lambda: server.admitted)
        for name, worker in server.workers.items():
            queued.labels(name).set_function(lambda w=worker: len(w.waiting))
            queued_tokens.labels(name).set_function(lambda w=worker: w.queued_cost)
            worker.on_batch = self._batch_hook(name)
        server.on_rejected = self.rejected.inc

    def _batch_hook(self, name: str):
        tokens, inputs = self.batch_tokens.labels(name), self.batch_inputs.labels(name)
        calls, done, seconds = (self.calls.labels(name), self.tokens.labels(name),
                                self.model_seconds.labels(name))

        def on_batch(count: int, cost: int, wall: float) -> None:
            tokens.observe(cost)
            inputs.observe(count)
            calls.inc()
            done.inc(cost)
            seconds.inc(wall)

        return on_batch

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def middleware(self, app):
        """ASGI middleware that counts each HTTP request (the outermost one: refusals of the
        Host check and the body guard are counted too)."""

        async def counted(scope, receive, send):
            if scope["type"] != "http":
                return await app(scope, receive, send)
            path = scope["path"]
            route = path if path in self.routes else \
                "/static" if path.startswith("/static/") else "other"
            began, status = time.perf_counter(), 500

            async def sending(message):
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                took = time.perf_counter() - began
                self.requests.labels(route, str(status)).inc()
                self.latency.labels(route).observe(took)
                if self.access is not None:
                    client = scope.get("client") or ("", 0)
                    self.access.info(json.dumps({
                        "time": round(time.time(), 3), "client": client[0],
                        "method": scope["method"], "path": path[:200], "status": status,
                        "seconds": round(took, 6)}))

        return counted
