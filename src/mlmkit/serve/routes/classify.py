"""POST /v1/classify: zero-shot classification with a cloze template (`mlmkit.cloze_classify`)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from mlmkit.core import checks
from mlmkit.probe.cloze import AGGREGATES
from mlmkit.serve.http_errors import HTTPError
from mlmkit.serve.schemas import ClassifyRequest
from mlmkit.serve.server import MAX_VERBALIZER_WORDS, server_of
from mlmkit.serve.worker import Work

router = APIRouter()


@router.post("/v1/classify", summary="Zero-shot classification with a "
                                     "cloze template and a verbalizer (mlmkit.cloze_classify)")
async def classify(body: ClassifyRequest, request: Request):
    server = server_of(request)
    name = server.model_name(body.model)
    texts = server.texts(body.texts, "texts")
    checks.choice("aggregate", body.aggregate, AGGREGATES)
    server.check_tokens(name, [body.template.replace("{text}", t) for t in texts],
                        "texts", isinstance(body.texts, str))
    words = sum(1 if isinstance(w, str) else len(w)
                for w in (body.verbalizer or {}).values())
    if words > MAX_VERBALIZER_WORDS:  # a multi-token word costs model calls per text
        raise HTTPError(413, "TooLarge", f"the verbalizer has {words:,} words, more than "
                        f"{MAX_VERBALIZER_WORDS:,}: send fewer")
    mlm = server.models[name]
    gold = body.gold if body.gold is None or isinstance(body.gold, list) else [body.gold]

    def run(items):
        result = mlm.classify(list(items), body.template, body.verbalizer, gold=gold,
                              aggregate=body.aggregate, progress=False)
        return [result.to_dict()] + [None] * (len(items) - 1)

    results = await server.answer(request, name, Work(None, texts, run))
    return {"model": name, "result": results[0]}
