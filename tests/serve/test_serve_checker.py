"""Issue 16's external check of `mlmkit serve`: bad requests that were answered wrongly
(a zero count called "too large", duplicate JSON keys and duplicate constraint positions
silently resolved, messages that named a CLI flag or Python's internals), in-process."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from mlmkit.serve import ServeConfig, create_app


@pytest.fixture(scope="module")
def client(tiny_mlm):
    with TestClient(create_app({"bert": tiny_mlm("bert")},
                               ServeConfig(threads=1, max_steps=32, max_tokens=64))) as c:
        yield c


def error(client, path, body: bytes | dict):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code != 200, response.text
    return response.status_code, response.json()["error"]


@pytest.mark.parametrize("path, body, field", [
    ("/v1/fill", {"texts": "a [MASK].", "top_k": 0}, "top_k"),
    ("/v1/fill", {"texts": "a [MASK].", "top_k": -3}, "top_k"),
    ("/v1/score", {"texts": "a b", "per_token": True, "alternatives": -1}, "alternatives"),
    ("/v1/generate", {"prompt": "a", "length": 0}, "length"),
    ("/v1/generate", {"prompt": "a", "length": 4, "steps": 0}, "steps"),
    ("/v1/infill", {"template": "a [MASK]", "steps": -1}, "steps"),
    ("/v1/generate", {"prompt": "a", "length": 4, "remask": "cap", "max_steps": 0},
     "max_steps"),
])
def test_a_zero_or_negative_count_is_a_bad_value_not_too_large(client, path, body, field):
    """They were 413 TooLarge ('top_k=0 is outside 1..100 (--max-top-k)'): the server's
    bound was blamed for a value no bound allows."""
    status, err = error(client, path, body)
    assert (status, err["type"]) == (400, "InvalidArgument"), err
    assert err["message"].startswith(f"{field}={body[field]} ") and "--max" not in err["message"]
    over = {**body, field: 10**6}  # beyond the server's bound it is still a 413 naming it
    status, err = error(client, path, over)
    assert status == 413 and "(--max-" in err["message"], err


def test_a_key_given_twice_is_refused(client):
    """Python's json keeps the last of two equal keys: {"top_k": 2, "top_k": 3} ran with 3."""
    status, err = error(client, "/v1/fill", b'{"texts": "a [MASK].", "top_k": 2, "top_k": 3}')
    assert status == 400 and "'top_k' twice" in err["message"], err
    status, err = error(client, "/v1/classify", b'{"texts": "A film.", "verbalizer": '
                        b'{"pos": "good", "neg": "bad", "pos": "fine"}}')
    assert status == 400 and "'pos' twice" in err["message"], err
    # The same key in two different objects is not a duplicate.
    body = b'{"texts": "A film.", "verbalizer": {"texts": "good", "model": "bad"}}'
    assert client.post("/v1/classify", content=body,
                       headers={"content-type": "application/json"}).status_code == 200


def test_constraints_name_each_position_once_and_known_token_ids(client):
    status, err = error(client, "/v1/generate", {"prompt": "a", "length": 3,
                                                 "constraints": {" 1 ": "x", "1": "y"}})
    assert status == 400 and "both position 1" in err["message"], err
    for token in (-1, 10**30):  # the library's message named a '--constraint' flag
        status, err = error(client, "/v1/generate", {"prompt": "a", "length": 3,
                                                     "constraints": {"0": token}})
        assert status == 400 and err["message"].startswith("constraints['0']: token id"), err
        assert "--" not in err["message"], err
    ok = client.post("/v1/generate", json={"prompt": "a", "length": 3, "constraints": {"0": 5}})
    assert ok.status_code == 200 and ok.json()["results"][0]["token_ids"][0] == 5


def test_a_number_of_thousands_of_digits_is_a_plain_400(client):
    status, err = error(client, "/v1/fill", b'{"texts": "a [MASK].", "top_k": 1' + b"0" * 5000
                        + b"}")
    assert status == 400 and "thousands of digits" in err["message"], err
    assert "sys." not in err["message"]


def test_a_compressed_body_is_refused_as_such(client):
    import gzip

    body = gzip.compress(b'{"texts": "a [MASK]."}')
    response = client.post("/v1/fill", content=body, headers={
        "content-type": "application/json", "content-encoding": "gzip"})
    assert response.status_code == 415, response.text  # was 400 "not UTF-8 (byte 0x8b)"
    assert "Content-Encoding is gzip" in response.json()["error"]["message"]
    assert client.post("/v1/fill", content=b'{"texts": "a [MASK]."}', headers={
        "content-type": "application/json", "content-encoding": "identity"}).status_code == 200


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_drains_the_requests_in_flight_then_exits_0(mlmkit_command, saved_tiny_mlm,
                                                             sig):
    """docs/CLI.md: SIGTERM or Ctrl-C lets the requests in flight finish and exits 0. uvicorn
    raised the signal again once drained: exit 143 (SIGTERM), 130 and "interrupted" (SIGINT)."""
    import signal
    import subprocess
    import threading
    import time

    import httpx

    process = subprocess.Popen([*mlmkit_command, "serve", str(saved_tiny_mlm("bert")),
                                "--port", "0", "--json", "--threads", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(process.stdout.readline())["url"]
        answers = []
        body = {"texts": ["Open the file for reading and return its lines. " * 6] * 16}
        request = threading.Thread(target=lambda: answers.append(
            httpx.post(url + "/v1/score", json=body, timeout=60).status_code))
        request.start()
        time.sleep(0.3)  # the score call (about a second) is on its way
        process.send_signal(getattr(signal, sig))
        request.join(60)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert answers == [200]
    assert process.returncode == 0, err
    assert "interrupted" not in err and "Traceback" not in err, err


def test_a_field_of_another_endpoint_says_which_endpoint_takes_it(client):
    """Such a field was "unknown" ('max_candidates: Extra inputs are not permitted (unknown
    field ...)') though the API documents it, under another route."""
    for path, body, named in [
        ("/v1/generate", {"prompt": "a", "max_candidates": 3}, "of /v1/infill, not of /v1/generate"),
        ("/v1/score", {"texts": "a", "top_k": 3},
         "of /v1/fill, /v1/generate and /v1/infill, not of /v1/score"),
        ("/v1/fill", {"texts": "a [MASK]", "stream": True}, "and /v1/infill, not of /v1/fill"),
        ("/v1/compare", {"text": "a b", "per_token": True}, "of /v1/score, not of /v1/compare")]:
        status, err = error(client, path, body)
        assert status == 422 and named in err["message"], err
        assert "\n" not in err["message"] and "unknown field" not in err["message"], err
    status, err = error(client, "/v1/score", {"texts": "a", "bogus": 1})
    assert status == 422 and "bogus: " in err["message"] and "unknown field" in err["message"]


def test_an_error_quotes_a_long_value_shortened(client):
    """The library's message quoted a 5,000-character verbalizer word whole."""
    long_word = "x" * 5000
    status, err = error(client, "/v1/classify", {"texts": "A film.", "verbalizer": {
        "a": "good", "b": long_word}})
    # a bound now (413, --max-word-tokens), checked before the tokenizer reads the word
    assert status == 413 and "verbalizer word 'xxx" in err["message"], err
    assert len(err["message"]) < 300 and "…'" in err["message"], err


def test_a_long_key_is_a_short_400(client):
    """A constraints key of 5,000 digits was a 500 (int() refused it: Python's 4,300-digit
    guard), and the server's own messages quoted a long key whole (a duplicated 5,000-
    character field name, a 3,000-digit constraints position)."""
    status, err = error(client, "/v1/generate", {"prompt": "a", "length": 3,
                                                 "constraints": {"1" * 5000: "x"}})
    assert (status, err["type"]) == (400, "InvalidArgument"), err
    assert err["message"].startswith("constraints key '111") and len(err["message"]) < 300, err
    status, err = error(client, "/v1/generate", {"prompt": "a", "length": 3, "constraints": {
        "0" * 3000 + "1": "x", "1": "y"}})
    assert status == 400 and "both position 1" in err["message"], err
    assert len(err["message"]) < 300 and "…'" in err["message"], err
    key = b'"' + b"k" * 5000 + b'"'
    status, err = error(client, "/v1/fill", b'{"texts": "a [MASK].", ' + key + b": 1, " + key
                        + b": 2}")
    assert status == 400 and "twice" in err["message"] and len(err["message"]) < 300, err


def test_a_second_ctrl_c_is_an_interruption_not_a_clean_exit(mlmkit_command, saved_tiny_mlm):
    """The second Ctrl-C forces the exit without finishing the requests in flight: that is
    not the drained shutdown that exits 0."""
    import signal
    import subprocess
    import threading
    import time

    import httpx

    process = subprocess.Popen([*mlmkit_command, "serve", str(saved_tiny_mlm("bert")),
                                "--port", "0", "--json", "--threads", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(process.stdout.readline())["url"]
        body = {"texts": ["Open the file for reading and return its lines. " * 6] * 64}

        def send():
            try:
                httpx.post(url + "/v1/score", json=body, timeout=60)
            except httpx.HTTPError:
                pass  # the forced exit may cut the connection

        request = threading.Thread(target=send)
        request.start()
        time.sleep(0.3)  # the score call (several seconds) is on its way
        process.send_signal(signal.SIGINT)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        request.join(60)
    finally:
        process.kill()
    # exit 130 with the CLI's one line; uvicorn logged each cancelled task's traceback
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted", err
    assert "Traceback" not in err, err


def test_a_number_a_double_cannot_hold_is_refused_not_rounded(client):
    """JSON's 1e-400 parsed as 0.0: a temperature of 1e-400 sampled greedily without a word;
    1e400 parsed as infinity."""
    body = b'{"prompt": "a", "length": 2, "temperature": 1e-400}'
    status, err = error(client, "/v1/generate", body)
    assert status == 400 and "1e-400, too small: it would be read as 0" in err["message"], err
    status, err = error(client, "/v1/generate", body.replace(b"1e-400", b"-2.5E+400"))
    assert status == 400 and "-2.5E+400, too large" in err["message"], err
    ok = client.post("/v1/generate", content=body.replace(b"1e-400", b"0.0e5"),
                     headers={"content-type": "application/json"})
    assert ok.status_code == 200, ok.text  # a written zero stays a zero
