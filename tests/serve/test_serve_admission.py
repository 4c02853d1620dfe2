"""mlmkit serve on an open network: bounds counted in tokens before any work (template and
verbalizer amplification), admission by cost (429 with Retry-After), batches capped by
cost that interleave a small request with a big one (tiny models, in-process)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient

import mlmkit
from mlmkit.core.libc import glibc
from mlmkit.serve import ServeConfig, create_app, memory
from mlmkit.serve import worker as worker_module
from mlmkit.serve.routes import unmask
from mlmkit.serve.worker import ModelWorker, Work


@pytest.fixture(scope="module")
def client(tiny_mlm):
    with TestClient(create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1))) as c:
        yield c


def error(response, status):
    assert response.status_code == status, response.text
    return response.json()["error"]["message"]


# --- bounds in tokens, checked before work -----------------------------------------------------

def test_a_template_with_thousands_of_placeholders_is_refused_at_once(client):
    body = {"texts": ["x" * 1000] * 64, "template": "{text}" * 20_000 + " It was [MASK]."}
    began = time.monotonic()
    message = error(client.post("/v1/classify", json=body), 413)
    assert time.monotonic() - began < 1.0  # no prompt of 20 million characters was built
    assert "--max-tokens" in message and "{text}" in message


def test_prompts_within_max_tokens_but_many_of_them_pass_max_request_tokens(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, max_request_tokens=60))
    with TestClient(app) as c:
        body = {"texts": ["Open the file for reading now."] * 8}
        assert "--max-request-tokens" in error(c.post("/v1/classify", json=body), 413)
        assert "--max-request-tokens" in error(c.post("/v1/score", json=body), 413)
        assert c.post("/v1/score", json={"texts": body["texts"][:2]}).status_code == 200


def test_a_verbalizer_word_of_many_tokens_is_refused_before_the_model(client):
    long_word = "word " * 2000
    body = {"texts": "It works.", "verbalizer": {"a": [long_word], "b": "bad"}}
    began = time.monotonic()
    assert "--max-word-tokens" in error(client.post("/v1/classify", json=body), 413)
    body["verbalizer"]["a"] = ["very good indeed " * 12]  # 36 tokens, few characters
    assert "--max-word-tokens" in error(client.post("/v1/classify", json=body), 413)
    assert time.monotonic() - began < 2.0


def test_classify_split_into_batches_equals_python(tiny_mlm):
    """A classify request cut into one-text batches (max_batch_tokens=1) gives the library's
    result: the same predictions, accuracy and multi-token words."""
    mlm = tiny_mlm("bert")
    texts = ["It works well.", "It broke at once.", "Fine.", "Awful, really."]
    gold = ["positive", "negative", "positive", "negative"]
    verbalizer = {"positive": ["great", "really good"], "negative": ["bad"]}
    app = create_app({"bert": mlm}, ServeConfig(threads=1, max_batch_tokens=1))
    with TestClient(app) as c:
        got = c.post("/v1/classify", json={"texts": texts, "gold": gold,
                                           "verbalizer": verbalizer}).json()["result"]
        assert app.state.server.workers["bert"].calls == len(texts)
    expected = mlmkit.cloze_classify(mlm, texts, verbalizer=verbalizer, gold=gold).to_dict()
    got_predictions, expected_predictions = got.pop("predictions"), expected.pop("predictions")
    assert got == expected  # accuracy, labels, multi-token words, ...
    for g, e in zip(got_predictions, expected_predictions, strict=True):
        assert g["label"] == e["label"] and g["gold"] == e["gold"]
        assert g["scores"] == pytest.approx(e["scores"], abs=1e-4)


# --- admission by cost -------------------------------------------------------------------------

def _slow(mlm, seconds):
    return mlm.model.get_input_embeddings().register_forward_hook(
        lambda *_: time.sleep(seconds))


async def _together(app, requests):
    """Send `requests` ((delay, path, body), ...) concurrently; (status, headers, seconds)."""
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as http:
        async def one(delay, path, body):
            await asyncio.sleep(delay)
            began = time.monotonic()
            response = await http.post(path, json=body)
            return response, time.monotonic() - began
        return await asyncio.gather(*(one(*r) for r in requests))


def test_a_full_queue_answers_429_with_retry_after_at_once(tiny_mlm):
    mlm = tiny_mlm("bert")
    text = "Open the file for reading."
    n = len(mlm.tokenizer(text)["input_ids"])  # scoring it reads n * n tokens
    app = create_app({"bert": mlm}, ServeConfig(threads=1, max_queued_tokens=n * n * 5 // 2))
    slow = _slow(mlm, 0.3)
    try:  # the first runs; the second waits (n * n); the third (2 n * n) does not fit
        answers = asyncio.run(_together(app, [(0, "/v1/score", {"texts": text}),
                                              (0.05, "/v1/score", {"texts": text}),
                                              (0.1, "/v1/score", {"texts": [text] * 2})]))
    finally:
        slow.remove()
    statuses = sorted(r.status_code for r, _ in answers)
    assert 429 in statuses and 200 in statuses, statuses
    refused = next((r, s) for r, s in answers if r.status_code == 429)
    assert int(refused[0].headers["retry-after"]) >= 1
    assert refused[1] < 0.2  # answered at once, not after the queue
    assert "--max-queued-tokens" in refused[0].json()["error"]["message"]


def test_a_request_larger_than_the_queue_is_a_413(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, max_queued_tokens=10))
    with TestClient(app) as c:
        message = error(c.post("/v1/score", json={"texts": "Open the file for reading."}), 413)
    assert "--max-queued-tokens" in message


def test_max_concurrent_requests(tiny_mlm):
    mlm = tiny_mlm("bert")
    app = create_app({"bert": mlm}, ServeConfig(threads=1, max_concurrent_requests=1))
    slow = _slow(mlm, 0.3)
    try:
        answers = asyncio.run(_together(app, [(0, "/v1/fill", {"texts": "A [MASK]."}),
                                              (0.05, "/v1/fill", {"texts": "B [MASK]."})]))
    finally:
        slow.remove()
    assert [r.status_code for r, _ in answers] == [200, 429]
    assert "--max-concurrent-requests" in answers[1][0].json()["error"]["message"]


def test_a_small_request_waits_one_batch_not_a_big_request(tiny_mlm):
    """A 1-text fill sent just after a 24-text score (each text its own batch under
    max_batch_tokens) is answered after about one batch, while the score goes on."""
    mlm = tiny_mlm("bert")
    app = create_app({"bert": mlm}, ServeConfig(threads=1, max_batch_tokens=200))
    slow = _slow(mlm, 0.05)
    try:
        big = {"texts": [f"Open the file number {i} for reading." for i in range(24)]}
        answers = asyncio.run(_together(app, [(0, "/v1/score", big),
                                              (0.2, "/v1/fill", {"texts": "A [MASK]."})]))
    finally:
        slow.remove()
    (score, score_s), (fill, fill_s) = answers
    assert score.status_code == 200 and fill.status_code == 200
    assert fill_s < score_s / 3, (fill_s, score_s)
    expected = mlmkit.score(mlm, big["texts"])
    assert [r["pll"] for r in score.json()["results"]] == pytest.approx(
        [e.pll for e in expected], abs=1e-4)


def test_the_worker_takes_turns_between_works():
    order = []

    def run(items):
        order.append(list(items))
        return items

    async def main():
        worker = ModelWorker("m", True, 0, 100, max_batch_tokens=2)
        big = worker.submit(Work("k", ["b1", "b2", "b3", "b4", "b5", "b6"], run))
        await asyncio.sleep(0)  # the big work is first in line
        small = worker.submit(Work("other", ["s"], run))
        done = await asyncio.gather(big, small)
        await worker.stop()
        return done

    big, small = asyncio.run(main())
    assert big == ["b1", "b2", "b3", "b4", "b5", "b6"] and small == ["s"]
    assert order[:2] == [["b1", "b2"], ["s"]]  # the small work's turn comes after one batch


STREAM_BODY = b'{"prompt": "Open", "length": 120, "steps": 120, "stream": true}'


def _stream_scope() -> dict:
    """The ASGI scope of a streaming POST /v1/generate of STREAM_BODY."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/v1/generate",
            "raw_path": b"/v1/generate", "query_string": b"", "root_path": "",
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(STREAM_BODY)).encode())],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}


def _stalling_client(stall_at: int):
    """(sent, receive, send) of a client that sends STREAM_BODY, then stops reading at the
    first body message once `stall_at` messages have come (its socket full): `send` never
    returns from then on, and `receive` never reports a disconnect."""
    sent, never = [], asyncio.Event()
    received = False

    async def receive():
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": STREAM_BODY, "more_body": False}
        await never.wait()

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) >= stall_at:
            await never.wait()  # a client that stopped reading

    return sent, receive, send


def test_a_stream_whose_client_does_not_read_stops_its_generation(tiny_mlm):
    """The client takes the first step, then never reads again (its socket full): past the
    stream's bounded queue of steps the generation stops, freeing the model, while the
    response still waits on the client."""
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, max_steps=400))
    worker = app.state.server.workers["bert"]
    scope = _stream_scope()

    async def main():
        sent, receive, send = _stalling_client(stall_at=3)  # reads the first step only

        async with app.router.lifespan_context(app):
            task = asyncio.ensure_future(app(scope, receive, send))
            deadline = time.monotonic() + 30
            while not worker.running:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            while worker.running:
                assert time.monotonic() < deadline, "the generation went on"
                await asyncio.sleep(0.02)
            assert not task.done(), (sent[:3], task.exception())
            assert worker.calls == 0  # stopped, not run to its end
            task.cancel()
        return sent

    sent = asyncio.run(main())
    assert sent[0]["status"] == 200


def test_a_batch_starts_with_the_cheapest_work_unless_the_oldest_waited_too_long():
    order = []

    def run(items):
        order.append(list(items))
        return items

    async def main(patience):
        worker = ModelWorker("m", True, 0, 100, max_batch_tokens=1, patience=patience)
        first = worker.submit(Work("a", ["a1", "a2", "a3"], run))
        await asyncio.sleep(0)  # a1 runs
        others = [worker.submit(Work("b", ["b1", "b2"], run)),
                  worker.submit(Work("c", ["c1"], run))]
        await asyncio.gather(first, *others)
        await worker.stop()

    asyncio.run(main(patience=60))
    assert order == [["a1"], ["c1"], ["b1"], ["b2"], ["a2"], ["a3"]]  # cheapest first
    order.clear()
    asyncio.run(main(patience=0))  # everyone waited too long: turns in line order
    assert order[:3] == [["a1"], ["b1"], ["c1"]]


def test_the_cheapest_work_goes_first_even_behind_works_of_its_own_kind():
    """Works gathered with the chosen one (same key) must not fill the batch before it: a
    one-text score behind three large scores is in the next batch, not the fourth."""
    order = []

    def run(items):
        order.append(list(items))
        return items

    async def main():
        worker = ModelWorker("m", True, 0, 100, max_batch_tokens=100, patience=60)
        first = worker.submit(Work("K", ["busy"], run, [100]))
        await asyncio.sleep(0)  # the first batch runs
        big = [worker.submit(Work("K", [f"big{k}.0", f"big{k}.1"], run, [100, 100]))
               for k in range(3)]
        small = worker.submit(Work("K", ["small"], run, [5]))
        await asyncio.gather(first, *big, small)
        await worker.stop()

    asyncio.run(main())
    assert order[0] == ["busy"] and "small" in order[1], order


def test_a_stream_whose_client_does_not_read_ends_at_its_deadline(tiny_mlm, monkeypatch):
    """The client takes the response's start, then never reads again: the stream's writes
    are bounded by the request's deadline, so the response ends (the connection closes)
    instead of waiting on the client for as long as it keeps the socket open."""
    monkeypatch.setattr(unmask, "WRITE_GRACE", 0.2)
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1, max_steps=400,
                                                             timeout=1.0))
    scope = _stream_scope()

    async def main():
        sent, receive, send = _stalling_client(stall_at=2)  # reads the response's start only

        async with app.router.lifespan_context(app):
            began = time.monotonic()
            await asyncio.wait_for(app(scope, receive, send), 20)
            return sent, time.monotonic() - began

    sent, seconds = asyncio.run(main())
    assert sent[0]["status"] == 200
    assert all(m.get("more_body", True) for m in sent[1:])  # ended unfinished
    assert seconds < 1.0 + 0.2 + 2.0, seconds


def test_compare_is_admitted_on_every_model_or_none(tiny_mlm):
    """A compare whose second model's queue is full is a 429, and the first model does no
    work for it (each model was admitted alone, and the first ran a request refused)."""
    app = create_app({"bert": tiny_mlm("bert"), "roberta": tiny_mlm("roberta")},
                     ServeConfig(threads=1, max_queued_tokens=400))
    server = app.state.server
    with TestClient(app) as c:
        server.workers["roberta"].queued_cost = 390  # a full queue, as a burst leaves it
        response = c.post("/v1/compare", json={"text": "Open the file for reading."})
        server.workers["roberta"].queued_cost = 0
        assert response.status_code == 429, response.text
        assert "'roberta'" in response.json()["error"]["message"]
        assert server.workers["bert"].calls == 0 and server.workers["bert"].queued_cost == 0
        assert server.admitted == 0
        assert c.post("/v1/compare", json={"text": "Open the file for reading."}
                      ).status_code == 200


def test_the_worker_gives_memory_back_when_its_line_empties(monkeypatch):
    """After a burst the freed pages go back to the system (the RSS stayed at the burst's
    peak): once the line has stayed empty a while, on the model's thread; not between the
    batches of a burst, nor between requests that follow each other closely."""
    trims = []
    monkeypatch.setattr(worker_module, "release_free_memory",
                        lambda: trims.append(threading.current_thread().name))
    monkeypatch.setattr(worker_module, "TRIM_AFTER_IDLE_S", 0.3)

    async def main():
        worker = ModelWorker("m", True, 0, 100, max_batch_tokens=1)
        for _ in range(3):  # a burst of three requests, 0.05 s apart
            await worker.submit(Work("k", ["a", "b", "c"], lambda items: items))
            await asyncio.sleep(0.05)
        assert trims == []
        await asyncio.sleep(0.6)
        await worker.stop()

    asyncio.run(main())
    assert len(trims) == 1 and trims[0].startswith("mlmkit-serve-m"), trims
    assert memory.release_free_memory() is (glibc() is not None)
