"""uvicorn's HTTP protocol with what an open network needs: JSON framing errors, a deadline
to read each request, and a cap on open connections.

- A request that is not HTTP/1.1 at all (a bad request line, broken headers or chunking) is
  answered with the API's JSON error, like every other bad request (uvicorn answers a
  plain-text 400 itself, before the app sees anything).
- `read_timeout`: a connection must deliver each request, headers and body, within it, or it
  is closed. uvicorn only times out a connection idle after a response, so a client that
  sends nothing, half its headers or its body a byte at a time held a socket (and a worker
  reading the body) forever.
- `max_connections`: a connection past the cap is closed as soon as it is accepted, before
  anything is read, so open sockets stay under the process's file descriptors.

`json_errors_protocol` is uvicorn's protocol (httptools where installed, else h11, as
uvicorn's "auto" picks) with these added.
"""

from __future__ import annotations

import json


class Guarded:
    """Mixed into uvicorn's protocol classes: the read deadline and the connection cap."""

    read_timeout: float = 30.0
    max_connections: int = 1024
    max_header_bytes: int = 32_768

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.abort()  # connection_lost removes it from the set
            return
        self._deadline = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        if cycle is None or cycle.response_complete:  # still reading a request's head
            end = data.find(b"\r\n\r\n")
            self._head = getattr(self, "_head", 0) + (len(data) if end < 0 else end)
            if self._head > self.max_header_bytes:
                self._refuse_head()
                return
            if end >= 0:
                self._head = 0
        super().data_received(data)

    def _refuse_head(self) -> None:
        body = json.dumps({"error": {"type": "TooLarge", "message": (
            f"the request line and headers pass {self.max_header_bytes:,} bytes "
            "(--max-header-bytes): send fewer or shorter headers")}}).encode()
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                             b"content-type: application/json\r\ncontent-length: "
                             + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
                             + body)
        self.transport.close()

    def _arm(self) -> None:
        """Start the time the next request has to arrive whole."""
        self._head = 0
        self._waiting_since = self.loop.time()
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _reading(self) -> bool:
        """Whether the connection waits for (more of) a request, rather than serving one."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _read_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._reading():
            return  # a request is being served: on_response_complete arms the next wait
        left = self._waiting_since + self.read_timeout - self.loop.time()
        if left > 0:
            self._deadline = self.loop.call_later(left, self._read_timed_out)
            return
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
        super().connection_lost(exc)


def framing_error_body(detail: str) -> bytes:
    message = (f"the request is not valid HTTP/1.1 ({detail.rstrip('.')}): send a request "
               "line, headers and a body as HTTP/1.1 frames them")
    return json.dumps({"error": {"type": "BadRequest", "message": message}}).encode()


def _httptools_protocol():
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    class JSONErrorsHttpTools(Guarded, HttpToolsProtocol):
        def send_400_response(self, msg: str) -> None:
            body = framing_error_body(msg)
            content = [STATUS_LINE[400]]
            for name, value in self.server_state.default_headers:
                content.extend([name, b": ", value, b"\r\n"])
            content.extend([b"content-type: application/json\r\n",
                            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                            b"connection: close\r\n", b"\r\n", body])
            self.transport.write(b"".join(content))
            self.transport.close()

    return JSONErrorsHttpTools


def _h11_protocol():
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class JSONErrorsH11(Guarded, H11Protocol):
        def send_400_response(self, msg: str) -> None:
            body = framing_error_body(msg)
            headers = [(b"content-type", b"application/json"),
                       (b"content-length", str(len(body)).encode("ascii")),
                       (b"connection", b"close")]
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                          h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return JSONErrorsH11


def json_errors_protocol(read_timeout: float = 30.0, max_connections: int = 1024,
                        max_header_bytes: int = 32_768):
    """uvicorn's HTTP protocol class with JSON framing errors, the read deadline and the
    connection cap, or "auto" (uvicorn's own) where this uvicorn's protocol classes are not
    the ones known here."""
    try:
        import httptools  # noqa: F401  (uvicorn's "auto" prefers it)
    except ImportError:
        make = _h11_protocol
    else:
        make = _httptools_protocol
    try:
        protocol = make()
    except (ImportError, AttributeError):
        return "auto"
    return type(protocol.__name__, (protocol,), {"read_timeout": read_timeout,
                                                  "max_connections": max_connections,
                                                  "max_header_bytes": max_header_bytes})
