"""Every POST route's schema under hostile values: no 5xx, no hang, and every float field of
every request bounded (tiny models, a real uvicorn server, a seeded generator).

The routes and their fields are read from the app itself, so a route or a field added later
is fuzzed without editing this file. Each field gets every hostile value (NaN, infinities,
numbers past a double, tiny and negative numbers, empty, huge and broken strings, wrong types,
nested junk), then random bodies mix several at once; every answer must be a JSON 4xx or a
200 within a time bound.
"""

from __future__ import annotations

import json
import random
import time
import typing

import httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel

from mlmkit.serve import ServeConfig, create_app
from tests.uvicorn_thread import uvicorn_in_thread

TEXT = "Return the [MASK] of items."
"""The value of every required text field (fill needs its mask) but classify's, whose
template holds the mask."""

PLAIN = {"/v1/classify": {"texts": "Return the list of items."}}

CHEAP = {"length": 2, "steps": 1, "max_candidates": 2}
"""Fields kept small in the valid base body, so the requests that stay valid are quick."""

SECONDS = 20.0
"""The most any one answer may take on a loaded 2-core machine: none may hang."""

HOSTILE = [
    float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 1e-320, 5e-324, -0.0, 0, -1,
    0.5, 2**63, -(2**63), 10**400, True, None, "", " ", "1", "\ud800", "\x00",
    "word " * 3000, "[MASK] " * 300, "{text}" * 1000, "\U0001f600" * 50, [], [None], [[]],
    ["a"] * 500, {}, {"": ""}, {"a": {"b": {"c": [1, {"d": None}]}}},
]
"""Values a careless or hostile client sends: each is tried in every field of every route."""


def random_json(rng: random.Random, depth: int = 0):
    """Nested junk: random scalars, lists and objects, a few levels deep."""
    roll = rng.random()
    if depth < 3 and roll < 0.25:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 3 and roll < 0.4:
        return {rng.choice(["", "a", "texts", "model", "\u00e9"]): random_json(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.choice([*HOSTILE[:16], rng.uniform(-1e6, 1e6), rng.randint(-10**9, 10**9),
                       "".join(rng.choice("ab [MASK]{}<>\\\"") for _ in range(rng.randint(0, 40)))])


def api_routes(routes):
    """The `APIRoute`s among `routes`, those of included routers too (FastAPI keeps an
    included router whole, as one entry of the app's routes)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from api_routes(included.routes)
        elif isinstance(route, APIRoute):
            yield route


def post_routes(app) -> dict[str, type[BaseModel]]:
    """Every POST route of `app` -> its request body's model."""
    return {route.path: route.body_field.field_info.annotation
            for route in api_routes(app.routes) if "POST" in route.methods}


def base_body(path: str, model: type[BaseModel]) -> dict:
    """A valid, cheap body: every required field holds TEXT, a few costly ones are small."""
    body = {name: TEXT for name, field in model.model_fields.items() if field.is_required()}
    body.update({k: v for k, v in CHEAP.items() if k in model.model_fields})
    return {**body, **PLAIN.get(path, {})}


def encoded(body) -> bytes:
    """`body` as a client would send it: NaN and Infinity as the bare words, a lone surrogate
    as its escape, an int past a double as its digits."""
    return json.dumps(body, allow_nan=True).encode()


@pytest.fixture(scope="module")
def app(tiny_mlm):
    return create_app({"bert": tiny_mlm("bert"), "roberta": tiny_mlm("roberta")},
                      ServeConfig(threads=1, max_texts=8, max_tokens=64, max_steps=16,
                                  max_body_bytes=20_000, timeout=15))


@pytest.fixture(scope="module")
def client(app):
    """A client of `app` served by uvicorn (real HTTP: a hang is a timeout, not a stuck test)."""
    with uvicorn_in_thread(app, log_level="warning") as port, httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=SECONDS * 2) as client:
        yield client


def floats_of(annotation) -> bool:
    """Whether a field's type takes a float (alone, or in a union or a container)."""
    if annotation is float:
        return True
    return any(floats_of(a) for a in typing.get_args(annotation))


def test_every_float_field_is_bounded(app):
    routes = post_routes(app)
    assert {"/v1/generate", "/v1/infill", "/v1/score", "/v1/fill"} <= set(routes)
    found = []
    for path, model in routes.items():
        for name, field in model.model_fields.items():
            if floats_of(field.annotation):
                found.append(name)
                limits = {type(m).__name__ for m in field.metadata}
                assert {"Ge", "Le"} <= limits or {"Gt", "Lt"} <= limits, (path, name)
    assert {"temperature", "cfg_scale", "top_p"} <= set(found)


def test_a_float_out_of_range_is_a_422_naming_the_field(app, client):
    for field, value in (("cfg_scale", 1e300), ("temperature", 1e7), ("top_p", 1.5),
                         ("temperature", -0.5), ("entropy_bound", 1e9)):
        body = {**base_body("/v1/generate", post_routes(app)["/v1/generate"]), field: value}
        response = client.post("/v1/generate", json=body)
        assert response.status_code == 422, (field, response.text)
        assert response.json()["error"]["message"].startswith(f"{field}: "), response.text


def _check(client, path: str, content: bytes, what) -> int:
    started = time.monotonic()
    response = client.post(path, content=content, headers={"content-type": "application/json"})
    took = time.monotonic() - started
    assert response.status_code < 500, (path, what, response.status_code, response.text)
    assert took < SECONDS, (path, what, took)
    if response.status_code >= 400:
        message = response.json()["error"]["message"]
        assert message and "\n" not in message and "Traceback" not in message, (path, what)
    return response.status_code


def test_hostile_values_in_every_field_of_every_route(app, client):
    rng = random.Random(0)
    statuses: dict[int, int] = {}
    for path, model in sorted(post_routes(app).items()):
        base = base_body(path, model)
        assert _check(client, path, encoded(base), "base") == 200, path
        for name in model.model_fields:
            for value in HOSTILE:
                status = _check(client, path, encoded({**base, name: value}), (name, value))
                statuses[status] = statuses.get(status, 0) + 1
        for k in range(40):  # several hostile fields at once, and junk bodies
            if k % 8 == 0:
                body = random_json(rng)
            else:
                body = dict(base)
                for name in rng.sample(sorted(model.model_fields), 3):
                    body[name] = random_json(rng) if rng.random() < 0.5 \
                        else rng.choice(HOSTILE)
            _check(client, path, encoded(body), ("random", k, body))
    assert client.get("/healthz").status_code == 200
    assert statuses.get(200, 0) > 0 and statuses.get(422, 0) > 0  # both kinds were reached

