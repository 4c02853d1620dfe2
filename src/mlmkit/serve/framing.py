"""A request that is not HTTP/1.1 at all (a bad request line, broken headers or chunking)
answered with the API's JSON error, like every other bad request.

uvicorn answers those itself, before the app sees anything, with a plain-text 400
("Invalid HTTP request received."). `json_errors_protocol` is uvicorn's HTTP protocol
(httptools where installed, else h11, as uvicorn's "auto" picks) with that one answer
replaced.
"""

from __future__ import annotations

import json


def framing_error_body(detail: str) -> bytes:
    message = (f"the request is not valid HTTP/1.1 ({detail.rstrip('.')}): send a request "
               "line, headers and a body as HTTP/1.1 frames them")
    return json.dumps({"error": {"type": "BadRequest", "message": message}}).encode()


def _httptools_protocol():
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    class JSONErrorsHttpTools(HttpToolsProtocol):
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

    class JSONErrorsH11(H11Protocol):
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


def json_errors_protocol():
    """uvicorn's HTTP protocol class with JSON framing errors, or "auto" (uvicorn's own)
    where this uvicorn's protocol classes are not the ones known here."""
    try:
        import httptools  # noqa: F401  (uvicorn's "auto" prefers it)
    except ImportError:
        pass
    else:
        try:
            return _httptools_protocol()
        except (ImportError, AttributeError):
            return "auto"
    try:
        return _h11_protocol()
    except (ImportError, AttributeError):
        return "auto"
