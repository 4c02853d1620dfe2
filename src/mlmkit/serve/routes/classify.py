"""POST /v1/classify: zero-shot classification with a cloze template (`mlmkit.cloze_classify`).

Every text is classified on its own, so a request's texts are split into batches like any
other (cancellation and interleaving between them) and the result is put back together:
the predictions in order, the accuracy over all of them."""

from __future__ import annotations

from fastapi import APIRouter, Request

from mlmkit.core import checks
from mlmkit.probe.cloze import AGGREGATES, PLACEHOLDER
from mlmkit.probe.verbalizer import DEFAULT_VERBALIZER
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
    single = isinstance(body.texts, str)
    checks.choice("aggregate", body.aggregate, AGGREGATES)
    verbalizer = DEFAULT_VERBALIZER if body.verbalizer is None else body.verbalizer
    words = [w for ws in verbalizer.values() for w in ([ws] if isinstance(ws, str) else ws)]
    if len(words) > MAX_VERBALIZER_WORDS:  # a multi-token word costs model calls per text
        raise HTTPError(413, "TooLarge", f"the verbalizer has {len(words):,} words, more than "
                        f"{MAX_VERBALIZER_WORDS:,}: send fewer")
    word_tokens = server.check_words(name, words) if words else []
    prompts = server.filled_template(body.template, PLACEHOLDER, texts, single)
    lengths = server.check_tokens(name, prompts, "texts", single)
    # Each text is read once per word with the word in its mask: the words' tokens count
    # once per text, and a word of m tokens is m passes over its prompt.
    server.request_tokens(sum(lengths) + len(texts) * sum(word_tokens), "texts and words")
    costs = [n * (1 + sum(m for m in word_tokens if m > 1)) + sum(word_tokens)
             for n in lengths]
    mlm = server.models[name]
    gold = body.gold if body.gold is None or isinstance(body.gold, list) else [body.gold]
    if gold is not None and len(gold) != len(texts):
        raise HTTPError(400, "InvalidArgument", f"gold has {len(gold)} labels for "
                        f"{len(texts)} texts")  # the library's message

    def run(items):
        result = mlm.classify([t for _, t, _ in items], body.template, body.verbalizer,
                              gold=None if gold is None else [g for _, _, g in items],
                              aggregate=body.aggregate, progress=False)
        out = result.to_dict()
        windowed = set(out["windowed_texts"])
        return [(p, out, k in windowed) for k, p in enumerate(out.pop("predictions"))]

    items = [(i, text, None if gold is None else gold[i]) for i, text in enumerate(texts)]
    key = ("classify", body.template, repr(body.verbalizer), body.aggregate, gold is None)
    parts = await server.answer(request, name, Work(key, items, run, costs))
    return {"model": name, "result": _merged(parts, words)}


def _merged(parts: list, words: list[str]) -> dict:
    """One `ClozeResult.to_dict()` from the per-text parts of one or more library calls."""
    predictions = [p for p, _, _ in parts]
    meta = parts[0][1]
    multi = set().union(*(set(m["multi_token_words"]) for _, m, _ in parts))
    golds = [p["label"] == p["gold"] for p in predictions if p.get("gold") is not None]
    return {**meta, "accuracy": sum(golds) / len(golds) if golds else None,
            "n": len(predictions),
            "multi_token_words": list(dict.fromkeys(w for w in words if w in multi)),
            "windowed_texts": [i for i, (_, _, w) in enumerate(parts) if w],
            "predictions": predictions}
