"""Serve an application with uvicorn: bind checks first, then the socket, then requests.

uvicorn handles SIGTERM and Ctrl-C gracefully: it stops accepting connections, lets the
requests in flight finish (up to the request timeout), then exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import json
import logging
import resource
import socket
import sys
import time

import uvicorn

from mlmkit.errors import InvalidArgument
from mlmkit.serve.framing import json_errors_protocol
from mlmkit.serve.metrics import ACCESS_LOG


def check_port(host: str, port: int) -> None:
    """The port is free on `host` (a clear error now rather than a traceback from uvicorn)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                fix = "pick another --port, or 0 for any free port"
            elif error.errno == errno.EACCES:
                fix = "pick a --port above 1023, or 0 for any free port"
            else:  # not an address of this machine, or a name that does not resolve
                fix = "use an address of this machine (127.0.0.1, or 0.0.0.0 for all of them)"
            raise InvalidArgument(f"cannot listen on {host}:{port} (--host/--port): "
                                  f"{error.strerror or error}; {fix}") from None


def connection_cap(wanted: int) -> int:
    """`wanted` connections, or fewer where the process may open fewer files: a socket is
    a file descriptor, and the models, the logs and the accept loop need some too."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(8, min(wanted, soft - 64))


class QuietOutOfFiles:
    """The event loop's exception handler: running out of file descriptors (EMFILE, ENFILE)
    is one log line per `interval` seconds, not a traceback per refused accept (the loop
    retries accepting by itself); everything else goes to the default handler."""

    def __init__(self, interval: float = 10.0):
        self.interval, self.last, self.dropped = interval, float("-inf"), 0

    def __call__(self, loop, context) -> None:
        error = context.get("exception")
        if not (isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE)):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last < self.interval:
            self.dropped += 1
            return
        logging.getLogger("mlmkit.serve").warning(
            "out of file descriptors (%s): new connections wait; %d more like this since the "
            "last line (raise ulimit -n or lower --max-connections)", error.strerror,
            self.dropped)
        self.last, self.dropped = now, 0


def run_server(app, *, host: str = "127.0.0.1", port: int = 8000, announce_json: bool = False,
               timeout: float = 60.0, log_level: str = "warning") -> None:
    """Serve `app` until SIGTERM/SIGINT; announce the URL on stderr (or as JSON on stdout)."""

    check_port(host, port)  # port 0 too: a host that is not this machine's fails there

    bounds = app.state.server.config
    cap = connection_cap(bounds.max_connections)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=max(1, int(timeout) + 1),
                            access_log=False, lifespan="on",
                            # requests beyond it get uvicorn's 503 at once
                            limit_concurrency=cap,
                            ssl_certfile=bounds.ssl_certfile, ssl_keyfile=bounds.ssl_keyfile,
                            timeout_keep_alive=bounds.keep_alive_timeout,
                            h11_max_incomplete_event_size=bounds.max_header_bytes,
                            http=json_errors_protocol(bounds.read_timeout, cap,
                                                      bounds.max_header_bytes))
    sock = config.bind_socket()
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if bounds.ssl_certfile else "http"
    url = f"{scheme}://{shown}:{bound}"
    if bounds.access_log:
        access = logging.getLogger(ACCESS_LOG)
        access.setLevel(logging.INFO)
        access.propagate = False
        access.addHandler(logging.StreamHandler(sys.stderr))

    def announce() -> None:
        if announce_json:
            print(json.dumps({"url": url, "host": host, "port": bound,
                              "models": list(app.state.server.models)}), flush=True)
        else:
            print(f"mlmkit serve: {url}  (playground {url}/ , API {url}/v1/..., OpenAPI "
                  f"{url}/openapi.json; Ctrl-C or SIGTERM stops it)", file=sys.stderr,
                  flush=True)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            asyncio.get_running_loop().set_exception_handler(QuietOutOfFiles())
            await super().startup(sockets=sockets)
            if not self.should_exit:
                announce()  # only once connections are accepted

        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            if self.force_exit:  # a second Ctrl-C: the requests in flight are cut, and
                # uvicorn would log each cancelled task's traceback; the CLI says "interrupted"
                logging.getLogger("uvicorn.error").disabled = True

        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn raises the SIGTERM / SIGINT it drained on again once it has stopped,
            # so the process died of it (exit 143, or 130 and "interrupted"); a drained
            # shutdown is the normal end of a server: exit 0 (docs/CLI.md). A second Ctrl-C
            # (force_exit: the requests in flight were not finished) is an interruption,
            # raised once the loop has stopped (below), not inside it.
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()

    # The models, torch, transformers and the app are a million long-lived objects: each
    # full collection of the garbage collector walked them all (~0.2 s on the event loop,
    # ~0.8 ms per request of a 256-request run). Frozen, collections walk only what requests
    # allocate.

    gc.collect()
    gc.freeze()
    server = Server(config)
    server.run(sockets=[sock])
    if server.force_exit:
        raise KeyboardInterrupt  # the CLI's "interrupted", exit 130
