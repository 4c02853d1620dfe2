"""A real uvicorn server on a thread of the test process, for tests that need real HTTP."""

from __future__ import annotations

import contextlib
import threading
import time


@contextlib.contextmanager
def uvicorn_in_thread(app, **options):
    """Serve `app` on 127.0.0.1 at a free port; yields the port, stops the server after."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, **options)
    server = uvicorn.Server(config)
    sock = config.bind_socket()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
