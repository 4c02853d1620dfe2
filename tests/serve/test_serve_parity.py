"""mlmkit serve against the library, option by option: every request field that changes a
result is the Python keyword of the same name and gives the Python result (stride, unk,
gold, ...); every GET route answers HEAD (tiny models, in-process)."""

from __future__ import annotations

import math
import socket

import pytest
from fastapi.testclient import TestClient

import mlmkit
from mlmkit.serve import ServeConfig, create_app
from mlmkit.serve.http_errors import for_http
from tests.uvicorn_thread import uvicorn_in_thread

# ~30 tokens: past the 16 tokens of the `short` model below, so it is scored in windows.
LONG = ("Open the file for reading and return the list of items in the order they were "
        "written to the file by the program.")
TEXTS = ["Return the list of items.", "Open the file for reading."]


@pytest.fixture(scope="module")
def models(tiny_mlm, tokenizer_factory):
    from mlmkit.models import LoadedMLM, build_mlm

    tokenizer = tokenizer_factory("wordpiece")
    short = build_mlm("bert-tiny", tokenizer, max_length=16, seed=0).eval()
    return {"bert": tiny_mlm("bert"), "short": LoadedMLM(model=short, tokenizer=tokenizer,
                                                   name="short")}


@pytest.fixture(scope="module")
def client(models):
    config = ServeConfig(threads=1, max_texts=8, max_tokens=64, max_top_k=1024)
    with TestClient(create_app(models, config)) as c:
        yield c


def post(client, path, body):
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def error(client, path, body, status=400) -> str:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert "\n" not in message and "Traceback" not in message
    return message


# --- score: stride -----------------------------------------------------------------------------

def test_score_stride_is_the_python_keyword(client, models):
    short = models["short"]
    strided = [r.to_dict() for r in mlmkit.score(short, [LONG, TEXTS[0]], stride=3,
                                                 per_token=True)]
    # the option changes the numbers of a windowed text, so a server ignoring it is caught
    assert strided[0]["pll"] != mlmkit.score(short, LONG).pll
    got = post(client, "/v1/score", {"texts": [LONG, TEXTS[0]], "model": "short", "stride": 3,
                                     "per_token": True})
    assert got["results"] == strided
    assert post(client, "/v1/score", {"texts": LONG, "model": "short"})["results"] == \
        [mlmkit.score(short, LONG).to_dict()]  # default: stride 1, as Python


@pytest.mark.parametrize("stride", [0, -2])
def test_a_bad_stride_is_the_library_message_as_a_400(client, stride):
    message = error(client, "/v1/score", {"texts": LONG, "model": "short", "stride": stride})
    assert message.startswith(f"stride={stride}") and "--" not in message, message
    message = error(client, "/v1/compare", {"text": LONG, "stride": stride})
    assert message.startswith(f"stride={stride}"), message


def test_a_stride_past_the_window_is_a_400_naming_the_text_not_a_500(client, models):
    """Windows of the `short` model hold 14 content tokens and start at multiples of the
    stride (and at the last start): a larger stride can leave tokens in no window, which the
    engine then read at a wrong column (an IndexError: a 500). Where every scored token is
    in a window the result is still the library's, whatever the stride."""
    short, tokenizer = models["short"], models["short"].tokenizer
    fits = "Open the file for reading and return the list of items in the order."
    assert 16 < len(tokenizer(fits)["input_ids"]) <= 2 + 27  # windowed, every token covered
    for stride in (14, 15, 1000):
        got = post(client, "/v1/score", {"texts": fits, "model": "short", "stride": stride,
                                         "per_token": True})
        assert got["results"] == [mlmkit.score(short, fits, stride=stride,
                                               per_token=True).to_dict()]
    for stride in (15, 100, 10**30):
        message = error(client, "/v1/score", {"texts": [TEXTS[0], LONG], "model": "short",
                                              "stride": stride})
        assert message.startswith(f"stride={stride} leaves tokens of texts[1] in no window")
        assert message.endswith("use a stride of at most 14"), message
        assert error(client, "/v1/compare", {"text": LONG, "models": ["short", "bert"],
                                             "stride": stride}).startswith(
            f"stride={stride} leaves tokens of text in no window")
    # spans only in the first window: nothing scored falls between windows
    got = post(client, "/v1/score", {"texts": LONG, "model": "short", "stride": 100,
                                     "spans": [[0, 8]]})
    assert got["results"] == [mlmkit.score(short, LONG, stride=100, spans=[(0, 8)]).to_dict()]


@pytest.mark.parametrize("body", ['{"texts": "a b", "stride": 1%s}',
                                  '{"texts": "a b", "stride": -1%s}',
                                  '{"text": "a b", "stride": 1%s}',
                                  '{"prompt": "a", "length": 2, "top_k": 1%s}'])
def test_a_whole_number_past_a_double_is_a_400_not_a_500(client, body):
    """The library's range checks read a number through math.isfinite, which raised
    OverflowError on a 400-digit int (a 500), as 1e400 would have been infinity."""
    path = {"te": "/v1/score", "pr": "/v1/generate"}[body[2:4]]
    path = "/v1/compare" if body.startswith('{"text"') else path
    response = client.post(path, content=body % ("0" * 400),
                           headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("the request body holds the number ") and "too large" in message
    assert len(message) < 200, message
    # Python's 4,300-digit guard keeps its own message; a large but double-sized int its field's
    response = client.post("/v1/score", content='{"texts": "a b", "stride": 1%s}' % ("0" * 5000),
                           headers={"content-type": "application/json"})
    assert "thousands of digits" in response.json()["error"]["message"], response.text
    assert post(client, "/v1/score", {"texts": "a b", "stride": 10**300})["results"] == \
        post(client, "/v1/score", {"texts": "a b"})["results"]


# --- score: spans (conditional scoring) --------------------------------------------------------

def test_score_spans_are_the_python_keyword(client, models):
    spans = [[9, 13], None]  # "list" of the first text, the whole second
    expected = mlmkit.score(models["bert"], TEXTS, spans=[(9, 13), None], per_token=True)
    assert expected[0].n_tokens < mlmkit.score(models["bert"], TEXTS[0]).n_tokens
    got = post(client, "/v1/score", {"texts": TEXTS, "spans": spans, "per_token": True,
                                     "alternatives": 2})
    assert got["results"] == [r.to_dict() for r in expected]
    assert [len(a) for a in got["alternatives"]] == [r.n_tokens for r in expected]
    one = post(client, "/v1/score", {"texts": TEXTS[0], "spans": [[0, 6]]})["results"]
    assert one == [mlmkit.score(models["bert"], TEXTS[0], spans=[(0, 6)]).to_dict()]


def test_requests_with_and_without_spans_gathered_in_one_call_keep_their_own(models):
    import asyncio

    import httpx

    app = create_app(models, ServeConfig(threads=1, batch_window_ms=200))
    bodies = [{"texts": TEXTS, "spans": [[0, 6], None]}, {"texts": TEXTS},
              {"texts": TEXTS[1], "spans": [[5, 13]]}]

    async def all_at_once():
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=transport, base_url="http://x") as c:
            answers = await asyncio.gather(*(c.post("/v1/score", json=b) for b in bodies))
            return [a.json() for a in answers], app.state.server.workers["bert"].calls

    answers, calls = asyncio.run(all_at_once())
    assert calls == 1  # one library call for the three requests
    bert = models["bert"]
    expected = [mlmkit.score(bert, TEXTS, spans=[(0, 6), None]),
                mlmkit.score(bert, TEXTS), mlmkit.score(bert, [TEXTS[1]], spans=[(5, 13)])]
    for answer, want in zip(answers, expected, strict=True):
        assert [r["pll"] for r in answer["results"]] == pytest.approx([r.pll for r in want],
                                                                      abs=1e-4)


@pytest.mark.parametrize("spans, start", [
    ([[0, 6]], "spans has 1 entries for 2 texts"),
    ([[6, 0], None], "spans[0]=[6, 0] must be a (start, end) pair"),
    ([[0, 1, 2], None], "spans[0]=[0, 1, 2] must be a (start, end) pair")])
def test_bad_spans_are_the_library_message_as_a_400(client, spans, start):
    message = error(client, "/v1/score", {"texts": TEXTS, "spans": spans})
    assert message.startswith(start), message


# --- score: alternatives read the masked copies PLL reads --------------------------------------

@pytest.mark.parametrize("model, metric, stride", [
    ("short", "pll", 1), ("short", "pll", 4), ("short", "pll_word_l2r", 1),
    ("bert", "pll_word_l2r", 1)])  # the text fits the model: one copy per token, no window
def test_alternatives_hold_each_scored_tokens_own_probability(client, models, model, metric,
                                                              stride):
    """With every token of the vocabulary listed, the scored token is in each list, and its
    probability there is the one its score was read from: the same window of a text longer
    than the model takes (this was a 500), at the same stride, and under pll_word_l2r with
    the later subwords of its word masked too (they were left unmasked)."""
    text = LONG + " Unhashable subclasses reimplement __getitem__."
    k = len(models[model].tokenizer)
    assert len(models[model].tokenizer(text)["input_ids"]) > 16
    got = post(client, "/v1/score", {"texts": [text, TEXTS[1]], "model": model,
                                     "metric": metric, "stride": stride, "per_token": True,
                                     "alternatives": k})
    expected = mlmkit.score(models[model], [text, TEXTS[1]], metric=metric, stride=stride,
                            per_token=True)
    assert got["results"] == [r.to_dict() for r in expected]
    for result, alternatives in zip(got["results"], got["alternatives"], strict=True):
        assert len(alternatives) == len(result["tokens"])
        for token, listed in zip(result["tokens"], alternatives, strict=True):
            prob = {a["token_id"]: a["prob"] for a in listed}[token["token_id"]]
            assert math.log(prob) == pytest.approx(token["logprob"], abs=1e-4), token


# --- compare: unk and stride, as score ---------------------------------------------------------

def test_compare_takes_unk_and_stride_as_score(models):
    text = LONG + " \u2603 \u2604"  # snowman, comet: the tiny vocabulary's [UNK]
    short = models["short"]
    assert mlmkit.score(short, text).n_unk > 0
    with TestClient(create_app({"a": short, "b": models["bert"]},
                               ServeConfig(threads=1))) as c:
        got = post(c, "/v1/compare", {"text": text, "unk": "skip", "stride": 2})
    for name, result in zip(got["models"], got["results"], strict=True):
        mlm = {"a": short, "b": models["bert"]}[name]
        assert result == mlmkit.score(mlm, text, unk="skip", stride=2, per_token=True,
                                      per_word=True).to_dict()
    assert got["results"][0]["pll"] != mlmkit.score(short, text).pll


# --- classify: gold ----------------------------------------------------------------------------

def test_classify_gold_gives_the_python_accuracy(client, models):
    verbalizer = {"pos": ["good", "great"], "neg": "bad"}
    gold = ["pos", "neg"]
    expected = mlmkit.cloze_classify(models["bert"], TEXTS, verbalizer=verbalizer,
                                     gold=gold).to_dict()
    assert expected["accuracy"] is not None
    got = post(client, "/v1/classify", {"texts": TEXTS, "verbalizer": verbalizer,
                                        "gold": gold})
    assert got["result"] == expected
    # one text, one label: a string, as texts takes one; a label as a number, as the
    # CLI's JSONL label field (the library reads it as its string)
    one = post(client, "/v1/classify", {"texts": TEXTS[0], "gold": "positive"})["result"]
    assert one == mlmkit.cloze_classify(models["bert"], [TEXTS[0]], gold=["positive"]).to_dict()
    numbered = post(client, "/v1/classify", {"texts": TEXTS, "gold": [1, 0], "verbalizer":
                                             {"1": "good", "0": "bad"}})["result"]
    assert numbered == mlmkit.cloze_classify(models["bert"], TEXTS, gold=[1, 0], verbalizer={
        "1": "good", "0": "bad"}).to_dict()


def test_classify_bad_gold_is_the_library_message_as_a_400(client):
    message = error(client, "/v1/classify", {"texts": TEXTS, "gold": ["positive"]})
    assert message == "gold has 1 labels for 2 texts", message
    message = error(client, "/v1/classify", {"texts": TEXTS, "gold": ["positive", "meh"]})
    assert message.startswith("gold label(s) ['meh'] are not in the verbalizer's"), message
    assert "--verbalizer" not in message
    # the flag turned into its field would repeat the word before it
    assert "give a verbalizer with words" in message and "(verbalizer)" not in message


# --- HEAD on every GET route -------------------------------------------------------------------

def _get_routes(client) -> list[str]:
    spec = client.get("/openapi.json").json()
    return [p for p, ops in spec["paths"].items() if "get" in ops] + ["/", "/docs",
                                                                     "/openapi.json"]


def test_every_get_route_answers_head_with_no_body(client, models):
    paths = _get_routes(client)
    assert {"/v1/models", "/healthz", "/docs"} <= set(paths)
    for path in paths:
        got = client.head(path)
        assert got.status_code == 200, (path, got.status_code, got.text)
        assert got.content == b""
        assert got.headers["content-type"] == client.get(path).headers["content-type"]
    spec = client.get("/openapi.json").json()
    assert not any("head" in ops for ops in spec["paths"].values())  # GET documents them
    # over real HTTP: the status line and headers, no body, the connection reusable
    app = create_app(models, ServeConfig(threads=1))
    with uvicorn_in_thread(app, log_level="error", lifespan="on") as port, \
            socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        for path in ("/v1/models", "/docs", "/healthz"):
            raw.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = raw.recv(65536)
                assert chunk, answer
                answer += chunk
            head, _, rest = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), (path, head)
            assert rest == b"", (path, rest)
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b'"status":"ok"' in answer, answer


def test_head_on_a_post_route_is_still_a_405(client):
    got = client.head("/v1/score")
    assert got.status_code == 405


# --- a choice outside the library's options: its message, a 400 (as a bad sampler) -----------

@pytest.mark.parametrize("path, body, field", [
    ("/v1/score", {"texts": "a b", "metric": "ppl"}, "metric"),
    ("/v1/score", {"texts": "a b", "unk": "drop"}, "unk"),
    ("/v1/compare", {"text": "a b", "metric": "ppl"}, "metric"),
    ("/v1/fill", {"texts": "a [MASK]", "mode": "greedy"}, "mode"),
    ("/v1/classify", {"texts": "a b", "aggregate": "median"}, "aggregate"),
    ("/v1/generate", {"prompt": "a", "length": 2, "sampler": "greedy"}, "sampler"),
])
def test_a_bad_choice_is_the_library_message_as_a_400(client, path, body, field):
    """metric, unk, mode and aggregate were 422s of the request's shape ("Input should be
    'pll' or ..."), sampler and the other choices the library's 400."""
    message = error(client, path, body)
    assert message.startswith((f"{field}=", f"unknown {field} ")), message
    assert "--" not in message and "Input should be" not in message, message


def test_the_schema_lists_each_choice_as_the_library_does(client):
    from mlmkit.generation.fill_mask import MODES
    from mlmkit.probe.cloze import AGGREGATES
    from mlmkit.scoring.jobs import METRICS
    from mlmkit.scoring.masked_copies import UNK_MODES

    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for request, field, options in [("ScoreRequest", "metric", METRICS),
                                    ("ScoreRequest", "unk", UNK_MODES),
                                    ("CompareRequest", "unk", UNK_MODES),
                                    ("FillRequest", "mode", MODES),
                                    ("ClassifyRequest", "aggregate", AGGREGATES)]:
        spec = schemas[request]["properties"][field]
        assert spec["enum"] == list(options) and spec["default"] == options[0], spec


# --- the CLI on the same input: the new fields are its flags --------------------------------

def test_the_cli_and_http_agree_on_stride_skip_unk_and_gold(saved_tiny_mlm, tmp_path):
    """What an external check does: `mlmkit score --stride 5 --skip-unk` and `mlmkit probe
    classify` (labels in the file) against /v1/score and /v1/classify on the same model."""
    import json

    from typer.testing import CliRunner

    from mlmkit.cli import app as cli

    model = str(saved_tiny_mlm("bert"))  # 128 tokens at most: the long text is windowed
    long = " ".join([LONG] * 6) + " \u2603"
    texts = [long, TEXTS[0]]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    labelled = [{"text": t, "label": label} for t, label in zip(TEXTS, ["pos", "neg"],
                                                                strict=True)]
    (tmp_path / "labelled.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labelled))
    verbalizer = {"pos": ["good"], "neg": ["bad"]}
    runner = CliRunner()
    scored = runner.invoke(cli, ["score", model, str(tmp_path / "texts.txt"), "--stride", "5",
                                 "--skip-unk", "--per-token", "--threads", "1"])
    assert scored.exit_code == 0, scored.output
    cli_scores = [json.loads(line) for line in scored.stdout.splitlines()]
    classified = runner.invoke(cli, ["probe", "classify", model, str(tmp_path / "labelled.jsonl"),
                                     "--verbalizer", json.dumps(verbalizer), "--json",
                                     "--threads", "1"])
    assert classified.exit_code == 0, classified.output
    with TestClient(create_app({"bert": model}, ServeConfig(threads=1))) as c:
        http = post(c, "/v1/score", {"texts": texts, "stride": 5, "unk": "skip",
                                     "per_token": True})["results"]
        assert http[0]["n_unk"] == 1 and http[0]["n_tokens"] > 128
        assert [{k: v for k, v in r.items() if k != "line"} for r in cli_scores] == http
        result = post(c, "/v1/classify", {"texts": TEXTS, "verbalizer": verbalizer,
                                          "gold": ["pos", "neg"]})["result"]
    assert result == json.loads(classified.stdout) and result["accuracy"] is not None


def test_max_candidates_beyond_the_servers_bound_is_a_413(client, models):
    """The library takes up to 10,000: 300 is a request too large here (it was a 400, as if
    the value were wrong), 0 a bad value."""
    message = error(client, "/v1/infill", {"template": "a [MASK]", "max_candidates": 300}, 413)
    assert message == "max_candidates=300 is outside 1..256 (this server's bound)", message
    error(client, "/v1/infill", {"template": "a [MASK]", "max_candidates": 0}, 400)
    # under the bound the library's own check speaks, as in Python
    message = error(client, "/v1/infill", {"template": "Open the [MASK:1-3] file.",
                                           "max_candidates": 2})
    with pytest.raises(mlmkit.errors.InvalidArgument) as raised:
        mlmkit.infill(models["bert"], "Open the [MASK:1-3] file.", max_candidates=2)
    assert message == for_http(str(raised.value)) and "--" not in message
