"""GET /healthz and /v1/models: whether the server answers, what it serves and its bounds."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from mlmkit.serve.server import server_of

router = APIRouter()


@router.get("/healthz", summary="Liveness: the server answers and its models are loaded")
async def healthz(request: Request):
    server = server_of(request)
    return {"status": "ok", "models": list(server.models),
            "uptime_s": round(time.time() - server.started, 3)}


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
        "timeout": c.timeout, "batching": c.batching, "api_key": c.api_key is not None}}
