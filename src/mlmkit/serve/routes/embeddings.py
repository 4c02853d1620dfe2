"""POST /v1/embeddings: OpenAI's embeddings endpoint over `mlmkit.embed`; POST
/v1/embed_sparse: SPLADE vectors over `mlmkit.embed_sparse`.

The request and response have OpenAI's shape (`input`, `model`, `dimensions`,
`encoding_format`; `data[i].embedding`, `usage`), so the OpenAI clients work against it;
`pooling`, `normalize` and `prompt` are mlmkit's additions. Concurrent requests with the
same options are gathered into one `embed` call by the model's worker, and so are sparse
requests with the same `top_k`.
"""

from __future__ import annotations

import base64

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from mlmkit.core import checks
from mlmkit.embeddings.pooling import check_pooling
from mlmkit.serve.schemas import EmbeddingsRequest, EmbedSparseRequest
from mlmkit.serve.server import server_of
from mlmkit.serve.worker import Work

router = APIRouter()
ENCODINGS = ("float", "base64")


def encoded(vector: np.ndarray, encoding_format: str):
    if encoding_format == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return np.asarray(vector, dtype=np.float32).tolist()


@router.post("/v1/embeddings", summary="OpenAI-compatible embeddings (mlmkit.embed)")
async def embeddings(body: EmbeddingsRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    texts = server.texts(body.input, "input")
    checks.choice("encoding_format", body.encoding_format, ENCODINGS)
    if body.pooling is not None:
        check_pooling(body.pooling)
    if body.dimensions is not None:
        width = int(server.models[name].model.config.hidden_size)
        server.count("dimensions", body.dimensions, 1, width)
    lengths = server.check_tokens(name, texts, "input", isinstance(body.input, str))
    options = {"pooling": body.pooling, "normalize": body.normalize,
               "dimensions": body.dimensions, "prompt": body.prompt}
    work = Work(("embed", *options.values()), texts, server.embed_run(name, options), lengths)
    vectors = await server.answer(request, name, work)
    tokens = int(sum(lengths))
    return JSONResponse({
        "object": "list",
        "data": [{"object": "embedding", "index": i,
                  "embedding": encoded(v, body.encoding_format)}
                 for i, v in enumerate(vectors)],
        "model": name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })


@router.post("/v1/embed_sparse", summary="SPLADE vectors from the MLM head (mlmkit.embed_sparse)")
async def embed_sparse(body: EmbedSparseRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    texts = server.texts(body.input, "input")
    server.count("top_k", body.top_k, 1, int(server.models[name].model.config.vocab_size))
    lengths = server.check_tokens(name, texts, "input", isinstance(body.input, str))
    mlm = server.models[name]

    def run(inputs):
        return mlm.embed_sparse(inputs, top_k=body.top_k, progress=False)

    work = Work(("embed_sparse", body.top_k), texts, run, lengths)
    vectors = await server.answer(request, name, work)
    tokens = int(sum(lengths))
    return JSONResponse({
        "object": "list",
        "data": [{"object": "sparse_embedding", "index": i, **v.to_dict()}
                 for i, v in enumerate(vectors)],
        "model": name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })
