"""mlmkit serve against hostile connections: a Host check (DNS rebinding), a deadline to
read each request, a cap on open connections, a header-size bound, and one quiet log line
when the process runs out of file descriptors (tiny model, a real uvicorn on a thread)."""

from __future__ import annotations

import errno
import logging
import socket
import time

import pytest
from fastapi.testclient import TestClient

from mlmkit.serve import ServeConfig, create_app
from mlmkit.serve.framing import json_errors_protocol
from mlmkit.serve.run import QuietOutOfFiles, connection_cap
from tests.uvicorn_thread import uvicorn_in_thread


@pytest.fixture(scope="module")
def app(tiny_mlm):
    return create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1), host="127.0.0.1")


# --- the Host check ------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000",
                                  "LOCALHOST"])
def test_a_loopback_server_answers_loopback_host_names(app, host):
    with TestClient(app) as c:
        assert c.get("/healthz", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000",
                                  "localhost.attacker.example", "127.0.0.1.nip.io", ""])
def test_a_forged_host_header_is_refused(app, host):
    with TestClient(app) as c:
        for path in ("/v1/models", "/healthz"):
            response = c.get(path, headers={"Host": host})
            assert response.status_code == 421, response.text
            assert "--allowed-hosts" in response.json()["error"]["message"]
        response = c.post("/v1/score", json={"texts": "Open it."}, headers={"Host": host})
        assert response.status_code == 421


def test_allowed_hosts_adds_names(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(
        threads=1, allowed_hosts="api.example, other.example"), host="127.0.0.1")
    with TestClient(app) as c:
        assert c.get("/healthz", headers={"Host": "api.example:443"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "other.example"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "localhost"}).status_code == 200
        assert c.get("/healthz", headers={"Host": "evil.example"}).status_code == 421


def test_a_server_on_all_interfaces_has_no_host_list_by_default(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1), host="0.0.0.0")
    with TestClient(app) as c:
        assert c.get("/healthz", headers={"Host": "server.lan"}).status_code == 200


# --- connections ---------------------------------------------------------------------------

def _closed(sock, within: float) -> bool:
    """Whether the server closes `sock` within `within` seconds (reading what it sends)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def port(tiny_mlm):
    app = create_app({"bert": tiny_mlm("bert")}, ServeConfig(threads=1))
    protocol = json_errors_protocol(read_timeout=0.5, max_connections=6, max_header_bytes=2048)
    with uvicorn_in_thread(app, log_level="error", lifespan="on", http=protocol) as port:
        yield port


def _connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _healthz(port) -> int:
    with _connect(port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        s.settimeout(5)
        return int(s.recv(65536).split(b" ")[1])


@pytest.mark.parametrize("sent", [b"", b"GET /healthz HTTP/1.1\r\nHost: loc",
                                  b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 100\r\n"
                                  b"\r\n{\"texts\": "])
def test_a_client_that_does_not_send_its_request_is_closed(port, sent):
    with _connect(port) as s:
        s.sendall(sent)
        began = time.monotonic()
        assert _closed(s, 5)
        assert time.monotonic() - began < 3
    assert _healthz(port) == 200


def test_a_keep_alive_connection_gets_the_same_deadline_for_its_next_request(port):
    with _connect(port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        s.settimeout(5)
        assert b"200" in s.recv(65536).split(b"\r\n")[0]
        s.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # then nothing more
        assert _closed(s, 5)


def test_connections_beyond_the_cap_are_closed_at_once(port):
    held = [_connect(port) for _ in range(6)]
    try:
        time.sleep(0.1)
        with _connect(port) as extra:
            assert _closed(extra, 1)
    finally:
        for s in held:
            s.close()
    time.sleep(0.2)
    assert _healthz(port) == 200


def test_headers_beyond_the_bound_are_a_431(port):
    with _connect(port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"a" * 4000
                  + b"\r\n\r\n")
        s.settimeout(5)
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 431") and b"--max-header-bytes" in answer


def test_an_early_413_closes_the_connection(port):
    with _connect(port) as s:
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                  b"application/json\r\nContent-Length: 99999999\r\n\r\n")
        s.settimeout(5)
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 413") and b"connection: close" in answer.lower()
        assert _closed(s, 2)


def test_running_out_of_files_is_one_log_line_per_interval(caplog):
    handler = QuietOutOfFiles(interval=60)
    error = OSError(errno.EMFILE, "Too many open files")
    with caplog.at_level(logging.WARNING, logger="mlmkit.serve"):
        for _ in range(1000):
            handler(None, {"message": "socket.accept() out of system resource",
                           "exception": error})
    assert len(caplog.records) == 1 and "file descriptors" in caplog.records[0].getMessage()


def test_the_connection_cap_stays_under_the_file_limit():
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert connection_cap(10**9) <= max(8, soft - 64) or soft == resource.RLIM_INFINITY
    assert connection_cap(10) <= 10
