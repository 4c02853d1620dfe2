"""Hostile clients against a running `mlmkit serve`, on loopback, bounded in count and time:
the server must stay responsive (`/healthz` answers within a bound throughout) and answer
every attack with its result or a 4xx/429, never a 5xx.

The attacks, all at once for `--seconds`: a /v1/classify template with 20,000 `{text}`
placeholders over 64 texts of 1,000 characters; a verbalizer word of 2,000 tokens; idle
connections (no bytes, half a request line, a body that never ends); a forged Host header
(DNS rebinding); and a flood of score requests from several clients (admission control).
Printed: /healthz latency (p50, max), each attack's statuses and slowest answer, the idle
connections the server closed, the flood's statuses, and the latency of a one-text fill
sent every 0.25 s beside the flood (it waits for about one batch, not the flood).

    .venv/bin/python benchmarks/serve_hostile.py --url http://127.0.0.1:8000 [--seconds 20]
        [--idle 100] [--flood-clients 8]

`attack(port)` is the same run as a function (tests/serve/test_serve_hostile.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import threading
import time
from collections import Counter
from urllib.parse import urlsplit


def request(port: int, method: str, path: str, body=None, host: str = "localhost",
            timeout: float = 60.0) -> tuple[int, float]:
    """(status, seconds) of one request; status 0 when the connection failed."""
    began = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={
            "Host": host, "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, time.monotonic() - began
    except (OSError, http.client.HTTPException):
        return 0, time.monotonic() - began
    finally:
        connection.close()


IDLE_OPENINGS = [b"", b"GET /healthz HTTP/1.1\r\nHost: loc",
                 b"POST /v1/score HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                 b"\r\nContent-Length: 100000\r\n\r\n{\"texts\": "]


def attack(port: int, seconds: float = 20.0, idle: int = 100, flood_clients: int = 8) -> dict:
    """Run every attack for about `seconds`; the figures (see the module's docstring)."""
    stop = time.monotonic() + seconds
    figures: dict = {}
    health: list[float] = []
    lock = threading.Lock()

    def poll_health():
        while time.monotonic() < stop:
            status, took = request(port, "GET", "/healthz", timeout=10)
            with lock:
                health.append(took if status == 200 else float("inf"))
            time.sleep(0.1)

    def once(name, method, path, body=None, host="localhost", times=1):
        results = [request(port, method, path, body, host) for _ in range(times)]
        with lock:
            figures[name] = {"statuses": dict(Counter(s for s, _ in results)),
                             "slowest_s": round(max(t for _, t in results), 3)}

    def idle_connections():
        sockets = []
        for i in range(idle):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(IDLE_OPENINGS[i % len(IDLE_OPENINGS)])
                sockets.append(s)
            except OSError:
                break
        while time.monotonic() < stop:
            time.sleep(0.2)
        closed = 0
        for s in sockets:
            s.setblocking(False)
            try:
                closed += s.recv(65536) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
            s.close()
        with lock:
            figures["idle_connections"] = {"opened": len(sockets), "closed_by_server": closed}

    small: list[float] = []

    def small_fills():  # a one-text fill beside the flood: waits for about one batch
        while time.monotonic() < stop:
            status, took = request(port, "POST", "/v1/fill", {"texts": "Open the [MASK]."})
            with lock:
                small.append(took if status == 200 else float("inf"))
            time.sleep(0.25)

    flood = Counter()

    def flood_client(k):
        texts = [f"Open the file number {k} {i} and " + "read the lines again " * 20
                 for i in range(8)]
        while time.monotonic() < stop:
            status, _ = request(port, "POST", "/v1/score", {"texts": texts})
            with lock:
                flood[status] += 1
            if status in (429, 503):
                time.sleep(0.2)

    amplification = {"texts": ["x" * 1000] * 64, "template": "{text}" * 20_000 +
                     " It was [MASK]."}
    word = {"texts": "It works.", "verbalizer": {"a": ["word " * 2000], "b": "bad"}}
    threads = [threading.Thread(target=poll_health), threading.Thread(target=small_fills),
               threading.Thread(target=idle_connections),
               threading.Thread(target=once, args=("template_amplification", "POST",
                                                   "/v1/classify", amplification),
                                kwargs={"times": 3}),
               threading.Thread(target=once, args=("long_verbalizer_word", "POST",
                                                   "/v1/classify", word)),
               threading.Thread(target=once, args=("forged_host", "GET", "/v1/models"),
                                kwargs={"host": "attacker.example"}),
               *(threading.Thread(target=flood_client, args=(k,))
                 for k in range(flood_clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    figures["flood"] = dict(flood)
    figures["healthz"] = {"polls": len(health),
                          "p50_s": round(statistics.median(health), 4) if health else None,
                          "max_s": round(max(health), 4) if health else None}
    figures["small_fill"] = {"requests": len(small),
                             "p50_s": round(statistics.median(small), 4) if small else None,
                             "max_s": round(max(small), 4) if small else None}
    figures["after"] = request(port, "GET", "/healthz", timeout=10)[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--flood-clients", type=int, default=8)
    args = parser.parse_args()
    parts = urlsplit(args.url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the attacks are for a server on this machine: --url http://127.0.0.1:PORT")
    figures = attack(parts.port or 80, args.seconds, min(args.idle, 1000),
                     min(args.flood_clients, 64))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
