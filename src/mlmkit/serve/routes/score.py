"""POST /v1/score (`mlmkit.score`) and /v1/compare (one text under several models)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from mlmkit.scoring.text_scores import _check_spans as check_spans
from mlmkit.scoring.text_scores import check_score_options
from mlmkit.serve.adapters import word_differences
from mlmkit.serve.http_errors import HTTPError
from mlmkit.serve.schemas import (
    CompareRequest,
    ScoreRequest,
)
from mlmkit.serve.server import score_costs, server_of
from mlmkit.serve.worker import Work

router = APIRouter()


@router.post("/v1/score", summary="PLL, PLL-word-l2r, PPPL, token and "
                                  "word scores (mlmkit.score)")
async def score(body: ScoreRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    texts = server.texts(body.texts, "texts")
    server.count("alternatives", body.alternatives, 0, server.config.max_top_k,
                 "--max-top-k")
    mlm = server.models[name]
    vocab = min(len(mlm.tokenizer), getattr(mlm.model.config, "vocab_size", 1 << 62))
    if body.alternatives > vocab:  # torch.topk failed: a 500
        raise HTTPError(400, "InvalidArgument", f"alternatives={body.alternatives} is more "
                        f"than the model's {vocab:,} tokens: ask for fewer")
    if body.alternatives and not body.per_token:
        raise HTTPError(400, "InvalidArgument", "alternatives needs per_token: true (they "
                        "are listed per scored token)")
    check_score_options(body.metric, body.unk, body.stride, None,  # the library's checks
                        body.reduction)
    check_spans(body.spans, texts)
    lengths = server.check_tokens(name, texts, "texts", isinstance(body.texts, str))
    key = ("score", body.metric, body.per_token, body.per_word, body.unk, body.alternatives,
           body.stride, body.reduction)
    spans = [None] * len(texts) if body.spans is None else \
        [None if s is None else tuple(s) for s in body.spans]
    what = ["texts" if isinstance(body.texts, str) else f"texts[{i}]"
            for i in range(len(texts))]
    work = Work(key, list(zip(texts, spans, what, strict=True)),
                server.score_run(name, *key[1:]), score_costs(lengths, int(mlm.max_length)))
    pairs = await server.answer(request, name, work)
    out = {"model": name, "results": [r for r, _ in pairs]}
    if body.alternatives:
        out["alternatives"] = [a for _, a in pairs]
    return JSONResponse(out)  # plain JSON types already, as in fill


@router.post("/v1/compare", summary="One text under several models: token "
                                    "and word scores side by side, and the word differences")
async def compare(body: CompareRequest, request: Request):
    server = server_of(request)
    names = list(server.models) if body.models is None else \
        [server.model_name(n) for n in body.models]
    if len(names) < 2 or len(set(names)) != len(names):
        raise HTTPError(400, "InvalidArgument", "compare needs two or more different "
                        "models: list them in models, or serve several (mlmkit serve A B)")
    if len(names) > 8:
        raise HTTPError(413, "TooLarge", "compare takes at most 8 models")
    texts = server.texts(body.text, "text")
    check_score_options(body.metric, body.unk, body.stride, None)
    costs = {name: score_costs(server.check_tokens(name, texts, "text", True),
                               int(server.models[name].max_length)) for name in names}
    key = ("score", body.metric, True, True, body.unk, 0, body.stride, "sum")
    pairs = await server.answer_each(request, [(n, Work(
        key, [(texts[0], None, "text")], server.score_run(n, *key[1:]), costs[n]))
        for n in names])
    results = [p[0][0] for p in pairs]
    return {"text": body.text, "models": names, "results": results,
            "words": word_differences(names, results)}
