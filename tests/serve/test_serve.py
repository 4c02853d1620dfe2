"""mlmkit serve: the HTTP API equals the Python API, batches concurrent requests, is bounded,
and answers every bad request with a 4xx JSON error (tiny models, in-process)."""

from __future__ import annotations

import asyncio
import functools
import json

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import mlmkit
from mlmkit.serve import ServeConfig, create_app
from tests.uvicorn_thread import uvicorn_in_thread

TEXTS = ["Return the list of items.", "Open the file for reading."]
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def models(tiny_mlm):
    return {"bert": tiny_mlm("bert"), "roberta": tiny_mlm("roberta")}


@pytest.fixture(scope="module")
def client(models):
    with TestClient(create_app(models, ServeConfig(threads=1, max_texts=8, max_tokens=64,
                                                   max_steps=32, max_body_bytes=20_000))) as c:
        yield c


def untimed(value):
    """A result without its wall-clock fields (generation reports its seconds, infill its
    scoring_seconds)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("seconds")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def post(client, path, body):
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


# --- HTTP results are the Python results ------------------------------------------------------

def test_score_equals_python(client, models):
    body = {"texts": TEXTS, "model": "bert", "per_token": True, "per_word": True,
            "metric": "pll_word_l2r"}
    got = post(client, "/v1/score", body)
    expected = mlmkit.score(models["bert"], TEXTS, metric="pll_word_l2r", per_token=True,
                            per_word=True)
    assert got["model"] == "bert"
    assert got["results"] == [r.to_dict() for r in expected]
    assert got["results"][0]["tokens"][0]["start"] == 0  # character offsets are there


def test_score_reduction_equals_python(client, models):
    got = post(client, "/v1/score", {"texts": TEXTS, "reduction": "mean"})
    expected = mlmkit.score(models["bert"], TEXTS, reduction="mean")
    assert got["results"] == [r.to_dict() for r in expected]
    assert got["results"][0]["score"] == pytest.approx(
        expected[0].pll / expected[0].n_tokens)
    assert client.post("/v1/score", json={"texts": TEXTS, "reduction": "max"}).status_code \
        in (400, 422)


def test_score_alternatives_follow_the_scored_tokens(client, models):
    got = post(client, "/v1/score", {"texts": TEXTS[0], "per_token": True, "alternatives": 3})
    tokens, alternatives = got["results"][0]["tokens"], got["alternatives"][0]
    assert len(alternatives) == len(tokens) and all(len(a) == 3 for a in alternatives)
    # The first alternative of the first token is the fill-mask top-1 of that masked copy.
    first = tokens[0]
    text = TEXTS[0]
    masked = text[:first["start"]] + "[MASK]" + text[first["end"]:]
    fill = mlmkit.fill_mask(models["bert"], masked, top_k=1)
    assert alternatives[0][0]["token_id"] == fill.masks[0].candidates[0].token_id
    assert alternatives[0][0]["prob"] == pytest.approx(fill.masks[0].candidates[0].score,
                                                       rel=1e-4)


@pytest.mark.parametrize("mode", ["independent", "joint"])
def test_fill_equals_python(client, models, mode):
    texts = ["Return the [MASK] of items.", "Open the <mask> for [MASK]."]
    got = post(client, "/v1/fill", {"texts": texts, "top_k": 3, "mode": mode,
                                    "model": "roberta"})
    expected = mlmkit.fill_mask(models["roberta"], texts, top_k=3, mode=mode)
    assert got["results"] == [r.to_dict() for r in expected]


def test_fill_targets_equal_python_and_a_bad_target_is_a_4xx(client, models):
    texts = ["Return the [MASK] of items."]
    got = post(client, "/v1/fill", {"texts": texts, "targets": ["list", "file"], "top_k": 5})
    expected = mlmkit.fill_mask(models["bert"], texts, targets=["list", "file"], top_k=5)
    assert got["results"] == [r.to_dict() for r in expected]
    assert len(got["results"][0]["masks"][0]["candidates"]) == 2
    assert "sequence" in got["results"][0]["masks"][0]["candidates"][0]
    bad = client.post("/v1/fill", json={"texts": texts, "targets": ["list", "zqxjkvw"]})
    assert 400 <= bad.status_code < 500 and "zqxjkvw" in bad.text


def test_generate_infill_classify_equal_python(client, models):
    options = {"length": 5, "steps": 3, "seed": 7, "temperature": 0.5}
    got = post(client, "/v1/generate", {"prompt": ["Return the", "Open"], **options})
    expected = mlmkit.generate(models["bert"], ["Return the", "Open"], **options)
    assert untimed(got["results"]) == untimed([r.to_dict() for r in expected])
    got = post(client, "/v1/infill", {"template": "Open the [MASK:1-2] file.", "steps": 2})
    assert untimed(got["results"]) == untimed([mlmkit.infill(
        models["bert"], "Open the [MASK:1-2] file.", steps=2).to_dict()])
    verbalizer = {"yes": ["good"], "no": "bad"}  # a word or words, as Python and the CLI
    got = post(client, "/v1/classify", {"texts": TEXTS, "verbalizer": verbalizer})
    assert got["result"] == mlmkit.cloze_classify(models["bert"], TEXTS,
                                                  verbalizer=verbalizer).to_dict()


def test_every_sampler_option_of_the_library_is_a_request_field(client, models):
    import dataclasses

    from mlmkit.generation.options import SamplerOptions

    spec = client.get("/openapi.json").json()["components"]["schemas"]["GenerateRequest"]
    assert {f.name for f in dataclasses.fields(SamplerOptions)} <= set(spec["properties"])
    options = {"length": 6, "reveal": "threshold", "threshold": 0.5, "seed": 2}
    got = post(client, "/v1/generate", {"prompt": "Open", "constraints": {"1": "the"},
                                        **options})
    expected = mlmkit.generate(models["bert"], ["Open"], constraints={1: "the"}, **options)
    assert untimed(got["results"]) == untimed([r.to_dict() for r in expected])


def test_compare_scores_each_model_and_differences(client, models):
    got = post(client, "/v1/compare", {"text": TEXTS[1]})
    assert got["models"] == ["bert", "roberta"]
    for name, result in zip(got["models"], got["results"], strict=True):
        assert result == mlmkit.score(models[name], TEXTS[1], per_token=True,
                                      per_word=True).to_dict()
    words = {w["word"]: w for w in got["words"]}
    assert "file" in words
    w = words["file"]
    assert w["difference"]["roberta"] == pytest.approx(w["logprobs"]["roberta"]
                                                       - w["logprobs"]["bert"])


def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_generate_stream_sends_each_step_then_the_same_result(client, models):
    body = {"prompt": "Return the", "length": 6, "steps": 3, "seed": 1}
    forwards = []
    hook = models["bert"].model.get_input_embeddings().register_forward_pre_hook(
        lambda *_: forwards.append(1))
    try:
        with client.stream("POST", "/v1/generate", json={**body, "stream": True}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = _events(response.read().decode())
    finally:
        hook.remove()
    assert len(forwards) == 3  # the steps' own calls: the confidences cost none
    steps = [data for name, data in events if name == "step"]
    assert events[-1][0] == "result"
    expected = mlmkit.generate(models["bert"], ["Return the"], **{k: v for k, v in body.items()
                                                                  if k != "prompt"})
    assert untimed(events[-1][1]["results"]) == untimed([r.to_dict() for r in expected])
    assert [s["step"] for s in steps] == [1, 2, 3] == list(range(1, expected[0].steps + 1))
    assert [s["model_calls"] for s in steps] == [1, 2, 3]  # as the CLI's --trace lines
    assert [s["filled"] for s in steps] == [2, 4, 6]  # the cost so far, for a live view
    assert all(0 < a["seconds"] <= b["seconds"] for a, b in zip(steps, steps[1:], strict=False))
    revealed = sum(sum(s["rows"][0]["revealed"]) for s in steps)
    assert revealed == 6 and not any(steps[-1]["rows"][0]["masked"])
    for step in steps:
        row = step["rows"][0]
        for on, p in zip(row["revealed"], row["confidence"], strict=True):
            assert (p is not None) == on and (p is None or 0.0 < p <= 1.0)


# --- batching -------------------------------------------------------------------------------

async def _concurrent(app, bodies):
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        responses = await asyncio.gather(*(http.post("/v1/score", json=b) for b in bodies))
    return [r.json() for r in responses], app.state.server.workers["bert"].calls


@pytest.mark.parametrize("batching", [True, False])
def test_concurrent_requests_are_gathered_into_one_call(models, batching):
    texts = [f"Return item number {i} of the list." for i in range(6)]
    bodies = [{"texts": [t], "model": "bert"} for t in texts]
    app = create_app(models, ServeConfig(threads=1, batching=batching, batch_window_ms=200))
    answers, calls = asyncio.run(_concurrent(app, bodies))
    expected = mlmkit.score(models["bert"], texts)
    for answer, e in zip(answers, expected, strict=True):
        assert answer["results"][0]["pll"] == pytest.approx(e.pll, abs=1e-4)
    assert calls == (1 if batching else len(texts))
    assert app.state.server.workers["bert"].cpu_seconds > 0  # GET /v1/models cpu_seconds


def test_a_bad_request_in_a_batch_fails_alone(models):
    from mlmkit.serve.worker import ModelWorker, Work

    def run(items):
        if "bad" in items:
            raise mlmkit.errors.InvalidArgument("bad input")
        return [x.upper() for x in items]

    async def main():
        worker = ModelWorker("m", True, 50, 100)
        futures = [worker.submit(Work("k", [x], run)) for x in ("a", "bad", "c")]
        skipped = worker.submit(Work("k", ["d"], run))
        skipped.cancel()  # a client that went away: its work never runs
        done = await asyncio.gather(*futures, return_exceptions=True)
        await worker.stop()
        return done, worker.calls

    done, calls = asyncio.run(main())
    assert done[0] == ["A"] and done[2] == ["C"]
    assert isinstance(done[1], mlmkit.errors.InvalidArgument)
    assert calls == 2  # the failed gathered call is not counted; "a" and "c" ran alone


# --- bounds, access, bad requests ---------------------------------------------------------------

ENDPOINTS = {
    "/v1/fill": {"texts": ["Open the [MASK]."]},
    "/v1/score": {"texts": ["Open the file."]},
    "/v1/generate": {"prompt": "Open", "length": 2, "steps": 1},
    "/v1/infill": {"template": "Open the [MASK].", "steps": 1},
    "/v1/classify": {"texts": ["A fine film."]},
    "/v1/compare": {"text": "Open the file."},
}
TEXT_FIELD = {"/v1/fill": "texts", "/v1/score": "texts", "/v1/generate": "prompt",
              "/v1/infill": "template", "/v1/classify": "texts", "/v1/compare": "text"}


def _bad_requests(path: str, good: dict) -> list[tuple[str, bytes]]:
    field = TEXT_FIELD[path]
    raw = [
        ("malformed", b'{"texts": ["a"'),
        ("not-utf8", b'{"' + field.encode() + b'": "caf\xe9"}'),
        ("empty-body", b""),
        ("a-list", b"[1, 2]"),
        ("nan", json.dumps(good)[:-1].encode() + b', "top_k": NaN}'),
        ("infinity", json.dumps(good)[:-1].encode() + b', "seed": -Infinity}'),
        ("huge", json.dumps({**good, field: "word " * 10_000}).encode()),
        # A RecursionError (not a ValueError) in the JSON parser, and a lone surrogate that
        # no tokenizer can encode, were 500s with a traceback on the server's stderr.
        ("deep", b"[" * 5_000 + b"]" * 5_000),
        ("deep-field", json.dumps({**good, field: functools.reduce(
            lambda inner, _: [inner], range(40), [])}).encode()),
        ("surrogate", json.dumps({**good, field: "caf\ud800 [MASK]"}).encode()),
    ]
    bodies = [
        ("wrong-type", {**good, field: 5}),
        ("unknown-field", {**good, "bogus": 1}),
        ("unknown-model", {**good, "model": "nope"} if path != "/v1/compare"
         else {**good, "models": ["bert", "nope"]}),
        ("overflow", {**good, field: "word " * 500}),
    ]
    if path != "/v1/generate":  # an empty (or no) prompt is unconditional generation
        bodies += [("empty-text", {**good, field: "  "}),
                   ("missing", {k: v for k, v in good.items() if k != field})]
    if path not in ("/v1/compare", "/v1/classify", "/v1/generate"):
        bodies.append(("empty-list", {**good, field: []}))
    if path in ("/v1/generate", "/v1/infill"):
        bodies += [("too-many-steps", {**good, "steps": 10_000}),
                   ("nan-temperature", {**good, "temperature": 1e999}),
                   ("bad-sampler", {**good, "sampler": "nope"}),
                   ("stream-a-list", {**good, field: [good[field]] * 2, "stream": True}),
                   # Checked before the stream starts (was a 200 holding an error event).
                   ("stream-bad-option", {**good, "temperature": -1.0, "stream": True}),
                   ("stream-too-many-steps", {**good, "steps": 30, "stream": True})]
    if path == "/v1/generate":  # '²'.isdigit() is True, int('²') fails: was a 500
        bodies.append(("superscript-position", {**good, "constraints": {"\u00b2": "the"}}))
    if path == "/v1/classify":
        bodies.append(("huge-verbalizer", {**good, "verbalizer": {
            "yes": [f"w{i}" for i in range(600)], "no": [f"v{i}" for i in range(600)]}}))
    if path == "/v1/fill":
        bodies += [("no-mask", {"texts": ["no mask here"]}), ("top-k", {**good, "top_k": 0}),
                   ("many", {"texts": ["a [MASK]."] * 9})]
    return raw + [(name, json.dumps(body).encode()) for name, body in bodies]


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_every_bad_request_is_a_4xx_json_error(client, path):
    for name, body in _bad_requests(path, ENDPOINTS[path]):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
        error = response.json()["error"]
        assert error["message"] and "Traceback" not in response.text, (name, error)
        assert "\n" not in error["message"], (name, error)
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.post(path, json=ENDPOINTS[path]).status_code == 200


def test_specific_statuses_and_messages(client):
    def error(path, body):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        return response.status_code, response.json()["error"]["message"]

    status, message = error("/v1/score", b'{"texts": ["a"], "alternatives": NaN}')
    assert status == 400 and "NaN" in message
    for kind in ("text/plain", None):  # FastAPI's answer was a 422 about "the body"
        response = client.post("/v1/score", content=b'{"texts": "a"}',
                               headers={"content-type": kind} if kind else {})
        assert response.status_code == 415, response.text
        assert "Content-Type: application/json" in response.json()["error"]["message"]
    assert client.post("/v1/score", content=b'{"texts": "a"}', headers={
        "content-type": "application/json; charset=utf-8"}).status_code == 200
    # One problem said once (was "texts.str: Input should be a valid string (and 1 more
    # problem)": pydantic names each member of the union).
    assert error("/v1/score", b'{"texts": [null]}') == (
        422, "texts[0]: Input should be a valid string")
    assert error("/v1/score", b'{"texts": 5}') == (
        422, "texts: Input should be a string or a list of strings")
    status, message = error("/v1/score", b'{"texts": "caf\xe9"}')
    assert status == 400 and "UTF-8" in message
    status, message = error("/v1/score", b'{"texts": "caf\\ud800"}')
    assert status == 400 and "surrogate (\\ud800)" in message
    status, message = error("/v1/score", b'{"texts": ' + b"[" * 33 + b"]" * 33 + b"}")
    assert status == 400 and "deeper than 32 levels" in message
    # A surrogate pair is a character (😀), not an error; 32 levels are allowed.
    assert client.post("/v1/score", content=b'{"texts": ["\\ud83d\\ude00 ok"]}',
                       headers={"content-type": "application/json"}).status_code == 200
    assert error("/v1/score", b'{"texts": ' + b"[" * 31 + b"]" * 31 + b"}")[0] == 422
    status, message = error("/v1/score", json.dumps({"texts": ["x" * 30_000]}).encode())
    assert status == 413 and "--max-body-bytes" in message
    status, message = error("/v1/score", json.dumps({"texts": ["word " * 200]}).encode())
    assert status == 413 and "--max-tokens" in message
    # The bound counts what the library runs, special tokens included: 64 passes, 65 not.
    tokenizer = client.app.state.server.models["bert"].tokenizer
    words = next(k for k in range(1, 80) if len(tokenizer(" ".join(["list"] * k))["input_ids"]) > 64)
    for k, code in ((words - 1, 200), (words, 413)):
        body = {"texts": [" ".join(["list"] * k)], "model": "bert"}
        assert client.post("/v1/score", json=body).status_code == code
    status, message = error("/v1/score", json.dumps({"texts": ["a"], "model": "x"}).encode())
    assert status == 404 and "bert, roberta" in message
    status, message = error("/v1/generate", json.dumps({"prompt": "a", "steps": 99}).encode())
    assert status == 413 and "--max-steps" in message
    assert client.get("/v1/nothing").status_code == 404
    assert client.get("/v1/score").json()["error"]["type"] == "MethodNotAllowed"


def test_alternatives_beyond_the_vocabulary_are_a_400(models):
    with TestClient(create_app(models, ServeConfig(threads=1, max_top_k=100_000))) as c:
        response = c.post("/v1/score", json={"texts": "Open it.", "per_token": True,
                                             "alternatives": 50_000})
    assert response.status_code == 400 and "tokens" in response.json()["error"]["message"]


def test_timeout_is_504(models):
    with TestClient(create_app(models, ServeConfig(threads=1, timeout=1e-4))) as c:
        response = c.post("/v1/generate", json={"prompt": "Open", "length": 32})
    assert response.status_code == 504 and "--timeout" in response.json()["error"]["message"]


@pytest.mark.parametrize("path, body", [
    ("/v1/generate", {"length": 100, "steps": 100}),  # 100 steps
    ("/v1/score", {"texts": [f"Open file {i}." for i in range(40)]}),  # 40 pieces
])
def test_a_given_up_call_stops_at_its_next_step_or_piece(models, monkeypatch, path, body):
    """A call whose request timed out (or whose client left) stops at its next unmasking
    step or piece of texts, instead of holding the model to its end: a generation held it
    39 s after its client hung up, the largest score request ~5 min after its 504 (the
    serving page's tiny model)."""
    import time

    mlm = models["bert"]
    # max_batch_tokens=1: one text per batch
    app = create_app({"bert": mlm}, ServeConfig(threads=1, timeout=0.3, max_batch_tokens=1))
    worker = app.state.server.workers["bert"]
    # Every model call sleeps 50 ms (no CPU): 100 steps or 40 texts take 2-5 s. (Hooked on
    # the embeddings: mlmkit's primitive calls the model's parts, not its forward.)
    slow = mlm.model.get_input_embeddings().register_forward_hook(
        lambda *_: time.sleep(0.05))
    try:
        with TestClient(app) as c:
            response = c.post(path, json=body)
            assert response.status_code == 504
            gave_up = time.monotonic()
            while worker.running:
                time.sleep(0.01)
            assert time.monotonic() - gave_up < 1.0
            assert worker.calls < 10  # stopped (a call that runs to its end is counted)
            assert not worker.waiting
    finally:
        slow.remove()


def test_api_key(models):
    with TestClient(create_app(models, ServeConfig(threads=1, api_key="s3cret-key"))) as c:
        assert c.post("/v1/score", json={"texts": "Open it."}).status_code == 401
        assert c.post("/v1/score", json={"texts": "Open it."},
                      headers={"X-API-Key": "wrong-key!"}).status_code == 401
        ok = c.post("/v1/score", json={"texts": "Open it."},
                    headers={"Authorization": "Bearer s3cret-key"})
        assert ok.status_code == 200
        assert c.get("/healthz").status_code == 200 and c.get("/").status_code == 200
        # Before the body is read: a client without the key gets no JSON parsing (was 400).
        response = c.post("/v1/score", content=b'{"texts": [', headers=JSON)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        assert c.get("/v1/models").status_code == 401
        assert c.get("/v1/models", headers={"X-API-Key": "s3cret-key"}).status_code == 200


def test_models_docs_and_playground_are_served(client):
    info = client.get("/v1/models").json()
    assert [m["name"] for m in info["models"]] == ["bert", "roberta"]
    assert info["limits"]["max_texts"] == 8
    spec = client.get("/openapi.json").json()
    assert {"/v1/fill", "/v1/score", "/v1/generate", "/v1/infill", "/v1/classify",
            "/v1/compare", "/v1/models", "/healthz"} <= set(spec["paths"])
    page = client.get("/").text
    assert "/static/app.js" in page and "http://" not in page and "https://" not in page
    # Unmask leaves steps to the library unless typed: a default of 6 made the infill
    # example the tab switches to (4 masks) fail with "steps=6 is more than 4".
    steps = page.split('id="unmask-steps"')[1].split(">")[0]
    assert "value=" not in steps and 'placeholder="auto"' in steps
    for name in ("app.js", "style.css"):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200 and "https://" not in asset.text  # no CDN
    # The copied curl command's key header: in single quotes the shell sent the text
    # "$MLMKIT_API_KEY" itself (a 401).
    script = client.get("/static/app.js").text
    assert '"Authorization: Bearer $MLMKIT_API_KEY"' in script
    assert "'Authorization: Bearer $MLMKIT_API_KEY'" not in script
    assert client.get("/docs").status_code == 200
    assert client.head("/healthz").status_code == 200 and client.head("/").status_code == 200


def test_a_batch_window_over_a_second_is_refused():
    # --batch-window-ms 1e9 served, and every request timed out waiting for company.
    with pytest.raises(mlmkit.errors.InvalidArgument, match="--batch-window-ms"):
        ServeConfig(batch_window_ms=1e9)


def test_cli_refuses_unsafe_or_bad_setups(tmp_path, saved_tiny_mlm):
    from mlmkit.cli import app as cli_app

    model = str(saved_tiny_mlm("bert"))
    runner = CliRunner()
    cases = [
        ([model, "--host", "0.0.0.0"], "--api-key"),
        ([model, "--api-key-file", str(tmp_path / "missing.txt")], "missing.txt"),
        ([model, "--api-key-file", str(tmp_path)], "is a directory: pass the file"),
        ([model, "--api-key", "short"], "8 characters"),
        ([model, "--timeout", "nan"], "--timeout"),
        ([str(tmp_path / "no-model")], "no-model"),
        # Not an address of this machine (TEST-NET-1): uvicorn's own "ERROR:" line, exit 3,
        # when --port was 0 (the check ran only for a fixed port).
        ([model, "--host", "192.0.2.1", "--api-key", "s3cret-key", "--port", "0"],
         "address of this machine"),
    ]
    for args, expected in cases:
        result = runner.invoke(cli_app, ["serve", *args])
        assert result.exit_code == 1, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], \
            (args, result.stderr)


def test_a_client_that_leaves_a_stream_stops_its_generation(models):
    """Over a real socket: the client reads one step and hangs up; the unmasking loop stops
    at its next step (the call fails with Cancelled, so it is never counted as run), and the
    model is free for the next request."""
    import socket
    import time

    app = create_app({"bert": models["bert"]}, ServeConfig(threads=1))
    worker = app.state.server.workers["bert"]
    with uvicorn_in_thread(app, log_level="error", lifespan="on") as port:
        body = json.dumps({"prompt": "Open", "length": 100, "steps": 100, "stream": True})
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(f"POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           f"application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
                           .encode())
            received = b""
            while b"event: step" not in received:
                chunk = client.recv(65536)
                assert chunk and b"event: error" not in chunk, received + chunk
                received += chunk
        deadline = time.monotonic() + 20
        while worker.running or worker.waiting:
            assert time.monotonic() < deadline, "the generation went on after the client left"
            time.sleep(0.02)
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/score", json={"texts": "Open it."})
        assert answer.status_code == 200
        assert worker.calls == 1  # the score; the abandoned generation never completed


@pytest.mark.parametrize("kind", ["httptools", "h11"])
def test_a_request_that_is_not_http_gets_the_json_error(kind):
    """uvicorn answers bad framing before the app runs, in plain text; mlmkit's protocol
    class answers with the API's JSON error, and the server goes on answering."""
    import socket

    from mlmkit.serve import framing

    if kind == "httptools":
        pytest.importorskip("httptools")
    protocol = framing._httptools_protocol() if kind == "httptools" else framing._h11_protocol()
    with uvicorn_in_thread(_ok_app, log_level="critical", lifespan="off",
                           http=protocol) as port:
        for garbage in (b"NOT HTTP AT ALL\r\n\r\n", b"POST / HTTP/1.1\r\nHost: x\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.sendall(garbage)
                answer = b""
                while chunk := raw.recv(65536):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400"), answer
            assert b"content-type: application/json" in head.lower(), head
            error = json.loads(body)["error"]
            assert error["type"] == "BadRequest"
            assert error["message"].startswith("the request is not valid HTTP/1.1 (")
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).json() == {"ok": True}


async def _ok_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok": true}'})


def test_library_messages_name_request_fields_not_cli_flags(client):
    from mlmkit.serve.http_errors import for_http

    cases = {
        "top_p=0.0 (--top-p) must be in (0, 1]": "top_p=0.0 must be in (0, 1]",
        "use --steps 4 or more, or a longer --block-length":
            "use steps=4 or more, or a longer block_length",
        "drop --confidence or use --sampler confidence":
            'drop confidence or use sampler="confidence"',
        "a (--steps) b": "a (steps) b",
        # the server's own flags are the operator's: they stay
        "the request took more than 60 s (--timeout)": "the request took more than 60 s "
                                                       "(--timeout)",
        "length=600 is outside 1..512 (--max-tokens)": "length=600 is outside 1..512 "
                                                       "(--max-tokens)",
    }
    for message, expected in cases.items():
        assert for_http(message) == expected
    answer = client.post("/v1/generate", json={"prompt": "a", "length": 4, "sampler":
                                               "ancestral", "confidence": "margin"})
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert message.startswith('confidence="margin" ranks the predictions of sampler='
                              '"confidence"') and "--" not in message, message


def test_serve_takes_allow_untrained_head_as_score_does(tiny_mlm, tmp_path):
    """A checkpoint without a trained MLM head (an ELECTRA discriminator) is refused, the
    message naming --allow-untrained-head; with it, the model is served as `mlmkit score
    --allow-untrained-head` scores it."""
    import transformers

    from mlmkit.cli import app as cli
    from mlmkit.errors import ModelError
    from mlmkit.serve.app import load_models

    mlm = tiny_mlm("electra")
    path = tmp_path / "discriminator"
    transformers.ElectraForPreTraining(mlm.model.config).save_pretrained(path)
    mlm.tokenizer.save_pretrained(path)
    with pytest.raises(ModelError, match="no trained MLM head"):
        load_models([str(path)], device="cpu", threads=1)
    refused = CliRunner().invoke(cli, ["serve", str(path), "--port", "0"])
    assert refused.exit_code == 1 and "--allow-untrained-head" in refused.output
    loaded = load_models([f"d={path}"], device="cpu", threads=1, allow_untrained_head=True)
    with TestClient(create_app(loaded, ServeConfig(threads=1))) as client:
        answer = client.post("/v1/score", json={"texts": TEXTS[0]})
    assert answer.status_code == 200
    expected = mlmkit.score(loaded["d"], [TEXTS[0]])[0].to_dict()
    assert answer.json()["results"][0]["pll"] == pytest.approx(expected["pll"], abs=1e-5)


def test_a_runs_model_folder_is_served_under_the_runs_name(tiny_mlm, tmp_path):
    """runs/NAME/final is served as NAME, not as "final" (every pretraining run's model
    was "final")."""
    from mlmkit.serve.app import _as_models, load_models

    mlm = tiny_mlm("bert")
    run = tmp_path / "runs" / "shakespeare"
    for folder in ("final", "step-20"):
        mlm.model.save_pretrained(run / folder)
        mlm.tokenizer.save_pretrained(run / folder)
    (run / "config.yaml").write_text("model: tiny\n")
    other = tmp_path / "plain"
    mlm.model.save_pretrained(other)
    mlm.tokenizer.save_pretrained(other)
    loaded = load_models([str(run / "final"), str(run / "step-20"), str(other)], device="cpu",
                         threads=1)
    assert list(loaded) == ["shakespeare", "shakespeare-step-20", "plain"]
    assert list(_as_models([str(run / "final")], ServeConfig(threads=1))) == ["shakespeare"]
