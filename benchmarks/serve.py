"""Benchmark: `mlmkit serve` with dynamic batching against the same server without it.

Two real servers (`mlmkit serve MODEL --json`, one with `--no-batching`) on the same saved
model, one after the other, each sent the same requests by 32 concurrent clients, in two
workloads: score (one sentence's PLL per request: the rescoring service) and fill (one
sentence with one [MASK] per request: the fill-mask API). Printed per workload: both
throughputs, the ratio, and whether every request got the same numbers from both servers
(max |difference| of the PLLs / top-1 probabilities; the floor is 3x at identical results),
the server process's CPU milliseconds per request (all its threads), split into the model's
thread (the library call: tokenizing, the forward passes, the results; the server's own count,
`cpu_seconds` of GET /v1/models) and the event loop (HTTP, JSON, validation, the token-length
check), and the MFU of each server (benchmarks/flops.py: PLL FLOPs of the score
texts, one read per fill text, over the requests' wall time and a wall-clock matmul peak
measured here at the servers' threads).
Then the batched server is held under 50 concurrent clients for a minute (score and fill
mixed): errors (must be 0), requests/s and latency percentiles.

Last, the overload run: a fresh batched server with a bounded queue (`--max-queued-tokens`)
under 64 clients for 30 s, one in four sending an expensive request (64 sentences to score:
about a batch of model work), the others a cheap one (a one-text fill), each client sending
its next request as soon as it has an answer (far past the sustainable rate) and, on a 429,
waiting the Retry-After it was given. Printed: p50/p99 latency of each class against the
cheap requests' unloaded p99 (one client, before the burst), the share of each class answered
429, the 5xx count (must be 0), and the server's resident memory before, at its peak and
10 s after the burst.

The load generator shares the 2 cores with the server, so it is made cheap, the same for both
servers: one asyncio process of raw HTTP/1.1 keep-alive connections on asyncio streams (no
HTTP library), its own CPU per request printed beside the servers' (about 0.1-0.5 ms, where
httpx cost more per request than the server's own HTTP layer).

    .venv/bin/python benchmarks/serve.py [--preset tiny] [--requests 256] [--clients 32]
        [--load-clients 50] [--load-seconds 60] [--overload-clients 64]
        [--overload-seconds 30] [--overload-only] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def sentences(count: int) -> list[str]:
    from mlmkit.corpus.python_docs import python_docs

    out = []
    for doc in python_docs("validation") + python_docs("train"):
        for piece in re.split(r"(?<=[.!?])\s+", doc.replace("\n", " ")):
            words = piece.split()
            if 6 <= len(words) <= 30 and piece[0].isupper():
                out.append(" ".join(words))
                if len(out) == count:
                    return out
    return out


def saved_model(preset: str, vocab: int) -> Path:
    """A random model of `preset` with a WordPiece tokenizer, saved once in the cache."""
    from mlmkit.core.cache import cache_dir

    folder = cache_dir("benchmarks", f"serve-{preset}-{vocab}")
    if (folder / "config.json").exists():
        return folder
    from mlmkit.corpus.python_docs import python_docs
    from mlmkit.models import build_mlm
    from mlmkit.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(python_docs("train")[:3000], folder / "tokenizer",
                                kind="wordpiece", vocab_size=vocab, show_progress=False)
    model = build_mlm(preset, tokenizer, max_length=512, seed=0).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class Server:
    """`mlmkit serve` in a subprocess; stopped with SIGTERM (graceful)."""

    def __init__(self, model: Path, *flags: str):
        command = [sys.executable, "-m", "mlmkit", "serve", str(model), "--port", "0", "--json",
                   *flags]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, "MLMKIT_PROGRESS": "0"})
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the server did not start: {' '.join(command)}")
        self.url = json.loads(line)["url"]

    def cpu_seconds(self, main_thread: bool = False) -> float:
        """CPU seconds the server process (or its main thread: the event loop) has used so
        far (Linux /proc)."""
        pid = self.process.pid
        path = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """The server process's resident memory, in MB (Linux /proc)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


def masked(text: str) -> str:
    words = text.split()
    words[len(words) // 2] = "[MASK]"
    return " ".join(words)


REQUESTS = {  # workload -> (path, body of one text, the number to compare)
    "score": ("/v1/score", lambda t: {"texts": [t]}, lambda r: r["pll"]),
    "fill": ("/v1/fill", lambda t: {"texts": [masked(t)], "top_k": 5},
             lambda r: r["masks"][0]["candidates"][0]["score"]),
}


IDLE_RECONNECT_S = 4.0
"""A connection idle this long is opened again before its next request: the server closes
idle keep-alive connections after 5 s (--keep-alive-timeout), and a request written on a
connection it has closed fails on the client's side (HTTP clients' pools do the same)."""


class Connection:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: the load generator shares the
    machine with the server, so it should cost as little CPU as possible (httpx costs more
    per request than the server's own HTTP layer)."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host.strip("[]"), int(port)
        self.reader = self.writer = None
        self.last_used = time.perf_counter()

    async def request(self, method: str, path: str, body=None) -> tuple[int, dict]:
        if self.writer is not None and time.perf_counter() - self.last_used > IDLE_RECONNECT_S:
            self.close()
            self.reader = self.writer = None
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        self.writer.write(f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: "
                          f"application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                          .encode() + data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = dict(line.lower().split(":", 1) for line in lines[1:] if ":" in line)
        self.retry_after = float(headers.get("retry-after", 0))
        answer = json.loads(await self.reader.readexactly(int(headers["content-length"])))
        self.last_used = time.perf_counter()
        if headers.get("connection", "").strip() == "close":  # an early 4xx closes
            self.close()
            self.reader = self.writer = None
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _send_all(server: Server, texts: list[str], clients: int, workload: str):
    """The requests, by `clients` concurrent connections: (seconds, per-request numbers,
    library calls, model-thread CPU s, load-generator CPU s, server CPU s, event-loop CPU s),
    the CPU times counted after the connections' warm-up."""
    url = server.url
    path, body, number = REQUESTS[workload]
    results: list[float | None] = [None] * len(texts)
    queue: asyncio.Queue = asyncio.Queue()
    for i in range(len(texts)):
        queue.put_nowait(i)
    connections = [Connection(url) for _ in range(clients)]
    await asyncio.gather(*(c.request("POST", path, body(texts[0])) for c in connections))

    async def client(connection):
        while not queue.empty():
            i = queue.get_nowait()
            status, answer = await connection.request("POST", path, body(texts[i]))
            if status != 200:
                raise SystemExit(f"{path} answered {status}: {answer}")
            results[i] = number(answer["results"][0])

    before, model_before = await _calls(connections[0])
    cpu, loop = server.cpu_seconds(), server.cpu_seconds(main_thread=True)
    start, client_cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(c) for c in connections))
    seconds, client_cpu = time.perf_counter() - start, time.process_time() - client_cpu
    cpu, loop = server.cpu_seconds() - cpu, server.cpu_seconds(main_thread=True) - loop
    calls, model_cpu = await _calls(connections[0])
    for c in connections:
        c.close()
    return seconds, results, calls - before, model_cpu - model_before, client_cpu, cpu, loop


async def _calls(connection) -> tuple[int, float]:
    """Library calls the server has run (a gathered batch counts once), and their CPU seconds
    on the model's thread."""
    _, info = await connection.request("GET", "/v1/models")
    return (sum(m["calls"] for m in info["models"]),
            sum(m["cpu_seconds"] for m in info["models"]))


async def _hold(url: str, texts: list[str], clients: int, seconds: float):
    latencies, errors, statuses = [], 0, {}
    stop_at = time.perf_counter() + seconds

    async def client(k: int):
        nonlocal errors
        connection, n = Connection(url), k
        while time.perf_counter() < stop_at:
            text = texts[n % len(texts)]
            n += clients
            if n % 4 == 0:
                path, body = "/v1/fill", {"texts": [masked(text)], "top_k": 5}
            else:
                path, body = "/v1/score", {"texts": [text]}
            began = time.perf_counter()
            try:
                status, _ = await connection.request("POST", path, body)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                status, connection = 0, Connection(url)
            statuses[status] = statuses.get(status, 0) + 1
            latencies.append(time.perf_counter() - began)
            errors += status != 200
        connection.close()

    began = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    elapsed = time.perf_counter() - began
    return np.array(latencies), errors, elapsed, statuses


CHEAP, EXPENSIVE = "cheap (1-text fill)", "expensive (64-text score)"


def _overload_request(kind: str, texts: list[str], n: int) -> tuple[str, dict]:
    if kind == CHEAP:
        return "/v1/fill", {"texts": [masked(texts[n % len(texts)])], "top_k": 5}
    chosen = [texts[(n + i) % len(texts)] for i in range(64)]
    return "/v1/score", {"texts": chosen}


async def _unloaded(url: str, texts: list[str], seconds: float) -> np.ndarray:
    """Latencies of cheap requests from one client, nothing else running."""
    connection, latencies, n = Connection(url), [], 0
    stop_at = time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        path, body = _overload_request(CHEAP, texts, n)
        began = time.perf_counter()
        status, answer = await connection.request("POST", path, body)
        if status != 200:
            raise SystemExit(f"{path} answered {status}: {answer}")
        latencies.append(time.perf_counter() - began)
        n += 1
    connection.close()
    return np.array(latencies)


async def _overload(server: Server, texts: list[str], clients: int, seconds: float):
    """`clients` closed-loop clients (one in four expensive) for `seconds`: per class, the
    latencies of the answered requests and the statuses; and the server's peak RSS."""
    latencies = {CHEAP: [], EXPENSIVE: []}
    statuses = {CHEAP: {}, EXPENSIVE: {}}
    peak = server.rss_mb()
    stop_at = time.perf_counter() + seconds

    async def client(k: int):
        kind, connection, n = EXPENSIVE if k % 4 == 0 else CHEAP, Connection(server.url), k
        while time.perf_counter() < stop_at:
            path, body = _overload_request(kind, texts, n)
            n += clients
            began = time.perf_counter()
            try:
                status, _ = await connection.request("POST", path, body)
            except (OSError, asyncio.IncompleteReadError, ValueError) as error:
                status, connection = type(error).__name__, Connection(server.url)
            statuses[kind][status] = statuses[kind].get(status, 0) + 1
            if status == 200:
                latencies[kind].append(time.perf_counter() - began)
            elif status == 429:
                await asyncio.sleep(connection.retry_after)
        connection.close()

    async def watch_memory():
        nonlocal peak
        while time.perf_counter() < stop_at:
            peak = max(peak, server.rss_mb())
            await asyncio.sleep(0.25)

    await asyncio.gather(watch_memory(), *(client(k) for k in range(clients)))
    return {k: np.array(v) for k, v in latencies.items()}, statuses, peak


def overload_run(model: Path, flags: list[str], texts: list[str], clients: int,
                 seconds: float) -> None:
    admission = ["--max-batch-tokens", "2048", "--max-queued-tokens", "131072",
                 "--max-concurrent-requests", "16"]
    server = Server(model, *flags, *admission)
    try:
        asyncio.run(_unloaded(server.url, texts, 2.0))  # warm-up
        unloaded = asyncio.run(_unloaded(server.url, texts, 10.0))
        rss_before = server.rss_mb()
        latencies, statuses, peak = asyncio.run(_overload(server, texts, clients, seconds))
        time.sleep(10.0)
        rss_after = server.rss_mb()
    finally:
        code = server.stop()
    base_p99 = float(np.percentile(unloaded, 99)) * 1000
    print(f"overload: {clients} clients for {seconds:.0f} s (1 in 4 expensive), server "
          f"{' '.join(admission)}; cheap requests unloaded (1 client): p50 "
          f"{float(np.percentile(unloaded, 50)) * 1000:.0f} ms, p99 {base_p99:.0f} ms")
    errors = 0
    for kind in (CHEAP, EXPENSIVE):
        answered, counts = latencies[kind], statuses[kind]
        sent = sum(counts.values())
        errors += sum(v for s, v in counts.items() if isinstance(s, str) or s >= 500)
        p50, p99 = ((float(np.percentile(answered, q)) * 1000 if len(answered) else float("nan"))
                    for q in (50, 99))
        print(f"  {kind:<26} {sent} sent, {len(answered)} answered: p50 {p50:.0f} ms, p99 "
              f"{p99:.0f} ms ({p99 / base_p99:.1f}x the unloaded cheap p99); 429 "
              f"{100 * counts.get(429, 0) / max(sent, 1):.1f}%; statuses {counts}")
    print(f"  5xx or failed connections: {errors}; server RSS {rss_before:.0f} MB before, "
          f"{peak:.0f} MB at the peak, {rss_after:.0f} MB 10 s after "
          f"({100 * (rss_after - rss_before) / rss_before:+.1f}%); SIGTERM exit {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--load-clients", type=int, default=50)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--overload-clients", type=int, default=64)
    parser.add_argument("--overload-seconds", type=float, default=30.0)
    parser.add_argument("--overload-only", action="store_true",
                        help="Run only the overload run (skip the batching comparison and the "
                             "load).")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    model = saved_model(args.preset, args.vocab)
    texts = sentences(args.requests)
    flags = ["--threads", str(args.threads), "--device", args.device, "--max-texts", "64"]
    words = np.mean([len(t.split()) for t in texts])
    print(f"model: random {args.preset} (vocab {args.vocab}) on {args.device}, "
          f"{args.threads} thread(s); {len(texts)} score requests of one sentence "
          f"({words:.1f} words on average), {args.clients} concurrent clients; "
          f"load average {os.getloadavg()[0]:.2f}")

    if args.overload_only:
        overload_run(model, flags, texts, args.overload_clients, args.overload_seconds)
        return
    measured, server_cpu, loop_cpu = {}, {}, {}
    for name, extra in (("batched", []), ("unbatched", ["--no-batching"])):
        server = Server(model, *flags, *extra)
        try:
            for workload in REQUESTS:
                measured[name, workload] = asyncio.run(
                    _send_all(server, texts, args.clients, workload))
                server_cpu[name, workload], loop_cpu[name, workload] = \
                    measured[name, workload][5:]
        finally:
            code = server.stop()
        print(f"  {name} server stopped by SIGTERM after draining (exit {code})")
    n = len(texts)
    for workload in REQUESTS:
        (fast, a, calls, *_), (slow, b, *_) = measured["batched", workload], \
            measured["unbatched", workload]
        difference = float(np.max(np.abs(np.array(a, np.float64) - np.array(b, np.float64))))
        same = "exactly" if difference == 0 else f"max |difference| {difference:.1e}"
        print(f"  {workload:<6} batched {len(texts) / fast:7.1f} requests/s, unbatched "
              f"{len(texts) / slow:7.1f} requests/s: {slow / fast:.2f}x; same results: {same}; "
              f"{len(texts) / max(calls, 1):.1f} requests per batched call")
        print(f"         server CPU per request: batched "
              f"{1000 * server_cpu['batched', workload] / len(texts):.1f} ms, unbatched "
              f"{1000 * server_cpu['unbatched', workload] / len(texts):.1f} ms: "
              f"{server_cpu['unbatched', workload] / server_cpu['batched', workload]:.2f}x "
              "(load-robust: the wall ratio above also holds the load generator and the "
              "other jobs on these cores)")
        for name in ("batched", "unbatched"):
            model_cpu, client_cpu = measured[name, workload][3:5]
            print(f"           {name:<9} model thread (library call) "
                  f"{1000 * model_cpu / n:.1f} ms, event loop (HTTP, JSON, checks) "
                  f"{1000 * loop_cpu[name, workload] / n:.1f} ms, other threads "
                  f"{max(0.0, 1000 * (server_cpu[name, workload] - model_cpu - loop_cpu[name, workload]) / n):.1f}"
                  f" ms; load generator {1000 * client_cpu / n:.2f} ms")
    from flops import forward_flops, matmul_peak, mfu, mfu_text, pll_flops
    from transformers import AutoConfig, AutoTokenizer

    config, tokenizer = AutoConfig.from_pretrained(model), AutoTokenizer.from_pretrained(model)
    needed = {"score": pll_flops(config, [len(x) for x in tokenizer(texts)["input_ids"]]),
              "fill": sum(forward_flops(config, len(x), 1) for x in
                          tokenizer([masked(t) for t in texts])["input_ids"])}
    peak = matmul_peak(threads=args.threads, device=args.device)
    for workload in REQUESTS:
        print(f"  {workload:<6} " + mfu_text({
            name: mfu(needed[workload], measured[name, workload][0], peak)
            for name in ("batched", "unbatched")}, peak,
            f"wall clock, {args.device}, {args.threads} thread(s)"))

    if args.load_seconds > 0:
        server = Server(model, *flags)
        try:
            latencies, errors, elapsed, statuses = asyncio.run(
                _hold(server.url, texts, args.load_clients, args.load_seconds))
        finally:
            code = server.stop()
        p50, p90, p99 = (float(np.percentile(latencies, q)) * 1000 for q in (50, 90, 99))
        print(f"load: {args.load_clients} clients for {elapsed:.0f} s (3 score : 1 fill): "
              f"{len(latencies)} requests, {errors} errors, {len(latencies) / elapsed:.1f} "
              f"requests/s; latency p50 {p50:.0f} ms, p90 {p90:.0f} ms, p99 {p99:.0f} ms, "
              f"max {latencies.max() * 1000:.0f} ms; statuses {statuses}; SIGTERM exit {code}")

    if args.overload_seconds > 0:
        overload_run(model, flags, texts, args.overload_clients, args.overload_seconds)


if __name__ == "__main__":
    main()
