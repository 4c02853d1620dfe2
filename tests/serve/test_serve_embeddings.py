"""POST /v1/embeddings: OpenAI's request and response shape, the vectors `mlmkit.embed`
gives, float or base64, gathered across concurrent requests, bad requests as 4xx."""

from __future__ import annotations

import asyncio
import base64

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

import mlmkit
from mlmkit.serve import ServeConfig, create_app

TEXTS = ["Return the list of items.", "Open the file for reading.", "a b"]


@pytest.fixture(scope="module")
def models(tiny_mlm):
    return {"bert": tiny_mlm("bert"), "roberta": tiny_mlm("roberta")}


@pytest.fixture(scope="module")
def client(models):
    with TestClient(create_app(models, ServeConfig(threads=1, max_texts=8,
                                                   max_tokens=64))) as c:
        yield c


def test_openai_shape_and_the_library_vectors(client, models):
    response = client.post("/v1/embeddings", json={"input": TEXTS, "model": "roberta"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["model"] == "roberta"
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert all(d["object"] == "embedding" for d in body["data"])
    got = np.array([d["embedding"] for d in body["data"]])
    expected = mlmkit.embed(models["roberta"], TEXTS, normalize=True)
    assert np.abs(got - expected).max() < 1e-6
    tokens = sum(len(ids) for ids in models["roberta"].tokenizer(TEXTS)["input_ids"])
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


def test_base64_dimensions_and_pooling(client, models):
    response = client.post("/v1/embeddings", json={
        "input": "Return the list of items.", "dimensions": 16, "encoding_format": "base64",
        "pooling": "cls", "user": "someone"})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    vector = np.frombuffer(base64.b64decode(data[0]["embedding"]), dtype="<f4")
    expected = mlmkit.embed(models["bert"], "Return the list of items.", dimensions=16,
                            pooling="cls", normalize=True)
    assert vector.shape == (16,) and np.abs(vector - expected).max() < 1e-6
    assert abs(np.linalg.norm(vector) - 1) < 1e-5


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"input": []}, 400, "empty list"),
    ({"input": ""}, 400, "empty"),
    ({"input": "a", "encoding_format": "hex"}, 400, "encoding_format"),
    ({"input": "a", "pooling": "sum"}, 400, "pooling"),
    ({"input": "a", "dimensions": 0}, 400, "dimensions"),
    ({"input": "a", "dimensions": 100000}, 400, "dimensions"),
    ({"input": "a", "model": "nope"}, 404, "not served"),
    ({"input": [[1, 2, 3]]}, 422, ""),
    ({"input": "a", "colour": "red"}, 422, ""),
    ({"input": ["word"] * 9}, 413, "max-texts"),
    ({"input": "word " * 100}, 413, "tokens"),
])
def test_bad_requests_are_4xx(client, body, status, words):
    response = client.post("/v1/embeddings", json=body)
    assert response.status_code == status, response.text
    assert words in response.text


def test_concurrent_requests_are_gathered_into_one_call(models):
    app = create_app(models, ServeConfig(threads=1, batch_window_ms=200))
    texts = [f"Return item number {i} of the list." for i in range(6)]

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app), \
                httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            responses = await asyncio.gather(*(
                http.post("/v1/embeddings", json={"input": [t], "model": "bert"})
                for t in texts))
        return [r.json() for r in responses], app.state.server.workers["bert"].calls

    answers, calls = asyncio.run(main())
    got = np.array([a["data"][0]["embedding"] for a in answers])
    assert np.abs(got - mlmkit.embed(models["bert"], texts, normalize=True)).max() < 1e-5
    assert calls == 1


def test_a_sentence_transformers_folder_is_served(tiny_mlm, tmp_path):
    from mlmkit.embeddings import save_st_directory
    from mlmkit.serve.app import load_models

    folder = save_st_directory(tiny_mlm("bert"), tmp_path / "st", pooling="cls")
    models = load_models([f"st={folder}"], device="cpu")
    with TestClient(create_app(models, ServeConfig(threads=1))) as client:
        body = client.post("/v1/embeddings", json={"input": TEXTS,
                                                   "normalize": False}).json()
    got = np.array([d["embedding"] for d in body["data"]])
    assert np.abs(got - mlmkit.embed(tiny_mlm("bert"), TEXTS, pooling="cls")).max() < 1e-5


def test_embed_sparse_gives_the_library_vectors(client, models):
    response = client.post("/v1/embed_sparse", json={"input": TEXTS, "model": "roberta",
                                                     "top_k": 8})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list" and body["model"] == "roberta"
    expected = mlmkit.embed_sparse(models["roberta"], TEXTS, top_k=8)
    for row, vector in zip(body["data"], expected, strict=True):
        assert row["object"] == "sparse_embedding"
        assert row["token_ids"] == vector.token_ids and row["tokens"] == vector.tokens
        assert np.allclose(row["weights"], vector.weights, atol=1e-6)
        assert len(row["weights"]) <= 8
    tokens = sum(len(ids) for ids in models["roberta"].tokenizer(TEXTS)["input_ids"])
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"input": []}, 400, "empty list"),
    ({"input": "a", "top_k": 0}, 400, "top_k"),
    ({"input": "a", "model": "nope"}, 404, "not served"),
    ({"input": "a", "pooling": "mean"}, 422, ""),
    ({"input": ["word"] * 9}, 413, "max-texts"),
])
def test_bad_sparse_requests_are_4xx(client, body, status, words):
    response = client.post("/v1/embed_sparse", json=body)
    assert response.status_code == status, response.text
    assert words in response.text
