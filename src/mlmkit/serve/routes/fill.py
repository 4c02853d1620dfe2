"""POST /v1/fill: the top-k tokens at each mask (`mlmkit.fill_mask`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from mlmkit.core import checks
from mlmkit.generation.fill_mask import MODES, target_ids
from mlmkit.serve.schemas import FillRequest
from mlmkit.serve.server import fill_costs, server_of
from mlmkit.serve.worker import Work

router = APIRouter()


@router.post("/v1/fill", summary="Top-k tokens at each mask "
                                 "(mlmkit.fill_mask)")
async def fill(body: FillRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    texts = server.texts(body.texts, "texts")
    server.count("top_k", body.top_k, 1, server.config.max_top_k, "--max-top-k")
    checks.choice("mode", body.mode, MODES)  # the library's check, before the queue
    targets = None if body.targets is None else tuple(body.targets)
    target_ids(server.models[name].tokenizer, targets)  # checked before the queue
    lengths = server.check_tokens(name, texts, "texts", isinstance(body.texts, str))
    work = Work(("fill", body.top_k, body.mode, targets), texts,
                server.fill_run(name, body.top_k, body.mode, targets),
                fill_costs(texts, lengths, body.mode))
    results = await server.answer(request, name, work)
    # The results are plain JSON types already (`to_dict()`): a JSONResponse skips
    # FastAPI's recursive jsonable_encoder (~1 ms per request), same bytes.
    return JSONResponse({"model": name, "results": results})
