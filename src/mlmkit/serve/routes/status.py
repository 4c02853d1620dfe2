"""GET /healthz (liveness), /readyz (readiness: saturation), /metrics (Prometheus) and
/v1/models: whether the server answers and takes work, what it serves and its bounds."""

from __future__ import annotations

import math
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from mlmkit.serve.server import server_of

router = APIRouter()


@router.get("/healthz", summary="Liveness: the server answers and its models are loaded")
async def healthz(request: Request):
    server = server_of(request)
    return {"status": "ok", "models": list(server.models),
            "uptime_s": round(time.time() - server.started, 3)}


@router.get("/readyz", summary="Readiness: 200 while the server takes new requests, 503 "
                                "with Retry-After while its queues are full")
async def readyz(request: Request):
    server = server_of(request)
    c = server.config
    full = [name for name, w in server.workers.items()
            if w.queued_cost >= c.max_queued_tokens * 0.9]
    saturated = server.admitted >= c.max_concurrent_requests or bool(full)
    body = {"status": "saturated" if saturated else "ready",
            "admitted_requests": server.admitted,
            "queued_tokens": {name: w.queued_cost for name, w in server.workers.items()}}
    if not saturated:
        return body
    wait = max(1, min(int(c.timeout), math.ceil(max(
        w.seconds_to_drain() for w in server.workers.values()))))
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(wait)})


@router.get("/metrics", summary="Prometheus metrics: requests by route and status, "
                                "latencies, queue depth, batch sizes in tokens, model calls")
async def metrics(request: Request):
    data, kind = request.app.state.metrics.exposition()
    return Response(data, media_type=kind)


@router.get("/v1/models", summary="The served models and the bounds")
async def list_models(request: Request):
    server = server_of(request)
    config = server.config
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
        "timeout": c.timeout, "batching": c.batching, "api_key": c.api_key is not None,
        "max_request_tokens": c.max_request_tokens, "max_word_tokens": c.max_word_tokens,
        "max_batch_tokens": c.max_batch_tokens, "max_queued_tokens": c.max_queued_tokens,
        "max_concurrent_requests": c.max_concurrent_requests}}
