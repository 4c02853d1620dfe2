"""Every failure as a 4xx (or 5xx) JSON body `{"error": {"type", "message"}}`, never a traceback.

`BodyGuard` reads each request body before FastAPI does: it refuses a body over the size
bound (413), bytes that are not UTF-8, text that is not JSON, and NaN / Infinity (which
Python's json module accepts, and which would otherwise reach validation and make FastAPI's
default handler fail with a 500 while serialising the error) — all as 400 with what was
wrong. The handlers turn validation errors (422), mlmkit's errors (400), unknown routes
and models (404) and anything unexpected (500, logged on the server) into the same shape.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import secrets
import sys
import typing

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from mlmkit.errors import MlmkitError
from mlmkit.generation.confidence import CONFIDENCES
from mlmkit.generation.options import REMASKS, REVEALS
from mlmkit.generation.samplers import SAMPLERS
from mlmkit.serve import schemas

log = logging.getLogger("mlmkit.serve")


class HTTPError(Exception):
    """An error with its HTTP status, a type name and a one-line message."""

    def __init__(self, status: int, kind: str, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message
        self.headers = headers


def error_response(status: int, kind: str, message: str, headers=None) -> JSONResponse:
    """The error body; a long value the message quotes is shortened (see `for_http`)."""
    return JSONResponse({"error": {"type": kind, "message": shortened(message)}},
                        status_code=status, headers=headers)


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number: send finite numbers (or null)")


class _RefusedBody(ValueError):
    """A body refused with its own message (not json's 'Expecting ...')."""


def _representable_float(text: str) -> float:
    """A JSON number with a fraction or exponent, refused when a double cannot hold it:
    1e-400 reads as 0.0 (a temperature of 1e-400 would silently sample greedily) and 1e400
    as infinity."""
    value = float(text)
    mantissa = text.lower().split("e")[0]
    if value in (float("inf"), float("-inf")) or (
            value == 0.0 and any(digit in mantissa for digit in "123456789")):
        size = "large" if value else "small: it would be read as 0"
        raise _RefusedBody(f"the request body holds the number {text[:40]}, too {size} for "
                            "a double-precision float: send numbers of a usual size")
    return value


def _representable_int(text: str) -> int:
    """A JSON whole number, refused past what a double holds (about 1.8e308), as a float of
    that size is: the library's range checks read a number through `math.isfinite`, which
    raised OverflowError on such an int (a 500 for a stride or a sampler top_k of 10**400).
    Past Python's 4,300-digit guard, int() raises its own ValueError (caught below)."""
    value = int(text)
    if abs(value) > sys.float_info.max:
        raise _RefusedBody(f"the request body holds the number {text[:40]}…, too large for "
                           "any field: send numbers of a usual size")
    return value


def _unique_keys(pairs: list) -> dict:
    """An object of the body, refused when it names a key twice: Python's json (and so
    FastAPI) keeps the last value silently, so {"top_k": 2, "top_k": 3} ran with 3."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _RefusedBody(f"the request body gives {key!r} twice in one object: send each "
                            "field once")
    return value


def json_problem(body: bytes) -> str | None:
    """What is wrong with `body` as a JSON request, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        return (f"the request body is not UTF-8 (byte 0x{body[error.start]:02x} at offset "
                f"{error.start}): send JSON encoded as UTF-8")
    if not text.strip():
        return "the request body is empty: send a JSON object"
    try:
        value = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys,
                           parse_float=_representable_float, parse_int=_representable_int)
    except RecursionError:  # not a ValueError: it would be a 500 (and FastAPI parses again)
        return (f"the request body nests deeper than {MAX_DEPTH} levels: send a flat JSON "
                "object")
    except _RefusedBody as error:
        return str(error)
    except ValueError as error:
        if "integer string conversion" in str(error):  # Python's 4,300-digit guard
            return ("the request body holds a number with thousands of digits: send numbers "
                    "of a usual size")
        return f"the request body is not valid JSON: {str(error).splitlines()[0]}"
    # Only bodies that could be too deep or hold a surrogate's \u escape are walked.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH or b"\\ud" in body or b"\\uD" in body:
        return _structure_problem(value)
    return None


MAX_DEPTH = 32
"""Nesting a request body may have (the API's deepest field is 3 levels down)."""


def _structure_problem(value) -> str | None:
    """Too deep, or a string with a lone UTF-16 surrogate (JSON's "\\ud800" parses into a
    str that no tokenizer or UTF-8 response can encode)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                return (f"the request body nests deeper than {MAX_DEPTH} levels: send a flat "
                        "JSON object")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as error:
                return (f"a string of the request body holds an unpaired surrogate "
                        f"(\\u{ord(item[error.start]):04x}): send valid Unicode text")
    return None


CLOSE = {"Connection": "close"}
"""On an answer given before the body was read: the unread body must not be taken for the
next request, and a client that sends too much is not kept."""

PUBLIC = {"/", "/healthz", "/readyz", "/docs", "/openapi.json"}
"""Paths (and /static/) served without the API key: the playground asks for it itself."""


def authorised(headers: dict, key: str | None) -> bool:
    """`Authorization: Bearer KEY` or `X-API-Key: KEY` among raw ASGI `headers`."""
    if key is None:
        return True
    given = headers.get(b"x-api-key")
    auth = headers.get(b"authorization", b"")
    if auth[:7].lower() == b"bearer ":
        given = auth[7:].strip()
    return given is not None and secrets.compare_digest(given, key.encode())


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def host_name(value: bytes) -> str:
    """The name of a Host header, without its port, in lower case ("[::1]" keeps its
    brackets)."""
    text = value.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[:text.find("]") + 1] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


class HostGuard:
    """ASGI middleware against DNS rebinding: only requests whose Host header names one of
    `allowed` reach the app (421 otherwise). A page of any site whose name the attacker
    points at 127.0.0.1 could otherwise drive the user's loopback server, and read its
    answers, from the user's browser: the browser sends the page's name as Host."""

    def __init__(self, app, allowed):
        self.app = app
        self.allowed = frozenset(name.strip().lower() for name in allowed if name.strip())

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host = dict(scope.get("headers") or []).get(b"host")
        name = host_name(host) if host is not None else ""
        if name not in self.allowed:
            shown = name[:60] or "missing"
            return await error_response(421, "MisdirectedRequest", f"the Host header "
                                        f"({shown}) is not a name of this server: use "
                                        f"{', '.join(sorted(self.allowed))}, or start the "
                                        "server with --allowed-hosts NAME", CLOSE)(
                scope, receive, send)
        return await self.app(scope, receive, send)


class BodyGuard:
    """ASGI middleware, before anything reads a body: the API key (401), then on POST a JSON
    content type (415) and a bounded (413), UTF-8, JSON body without NaN/Infinity (400)."""

    def __init__(self, app, max_bytes: int, api_key: str | None = None):
        self.app, self.max_bytes, self.api_key = app, max_bytes, api_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        path = scope["path"]
        if not (path in PUBLIC or path.startswith("/static/") or authorised(headers,
                                                                             self.api_key)):
            # Checked before the body is read: no parsing for clients without the key.
            return await error_response(401, "Unauthorized", "this server needs its API key: "
                                        "send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                                        {"WWW-Authenticate": "Bearer", **CLOSE})(
                scope, receive, send)
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind != b"application/json" and not kind.endswith(b"+json"):
            # FastAPI answered 422 "the body: Input should be a valid dictionary" here.
            shown = kind.decode("latin-1") or "none"
            return await error_response(415, "UnsupportedMediaType", f"the request's "
                                        f"Content-Type is {shown}: send the JSON body with "
                                        "'Content-Type: application/json'",
                                        CLOSE)(scope, receive, send)
        coding = headers.get(b"content-encoding", b"").strip().lower()
        if coding not in (b"", b"identity"):  # was "not UTF-8 (byte 0x8b ...)" for gzip
            return await error_response(415, "UnsupportedMediaType", f"the request's "
                                        f"Content-Encoding is {coding.decode('latin-1')}: "
                                        "send the JSON body uncompressed", CLOSE)(
                scope, receive, send)
        declared = headers.get(b"content-length")
        limit = f"the request body is larger than {self.max_bytes:,} bytes (--max-body-bytes)"
        if declared is not None:
            if not declared.isdigit():
                return await error_response(400, "BadRequest", "Content-Length is not a "
                                            "number")(scope, receive, send)
            if int(declared) > self.max_bytes:
                return await error_response(413, "TooLarge", limit + ": send fewer or "
                                            "shorter texts", CLOSE)(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await error_response(413, "TooLarge", limit + ": send fewer or shorter "
                                            "texts", CLOSE)(scope, receive, send)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = json_problem(body)
        if problem is not None:
            return await error_response(400, "InvalidJSON", problem)(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later: the disconnect, for cancellation

        return await self.app(scope, replay, send)


def _where(loc) -> str:
    out = ""
    for part in loc:
        if part != "body":
            out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "the body"


UNION_MEMBERS = {"str": "a string", "list[str]": "a list of strings", "int": "a whole number"}
"""How pydantic names the members of the request fields' unions in an error's location."""


def _merge_union(errors: list) -> list:
    """pydantic reports a union field (`texts`: a string or a list of strings) once per
    member, under the member's name: ("texts", "str"), ("texts", "list[str]", 0). One error
    instead: the member that got furthest, its name taken out ("texts[0]: Input should be a
    valid string"), or, when none got past the field, "texts: Input should be a string or a
    list of strings"."""
    if len(errors) < 2:
        return errors
    a, b = (tuple(e.get("loc", ())) for e in errors[:2])
    at = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if at is None or a[at] not in UNION_MEMBERS or b[at] not in UNION_MEMBERS:
        return errors
    prefix = a[:at]
    group = [e for e in errors if tuple(e["loc"][:at]) == prefix and len(e["loc"]) > at
             and e["loc"][at] in UNION_MEMBERS]
    rest = [e for e in errors if e not in group]
    deepest = max(group, key=lambda e: len(e["loc"]))
    if len(deepest["loc"]) > at + 1:
        merged = {**deepest, "loc": prefix + tuple(deepest["loc"][at + 1:])}
    else:
        members = " or ".join(UNION_MEMBERS[e["loc"][at]] for e in group)
        merged = {"loc": prefix, "msg": f"Input should be {members}", "type": "union"}
    return [merged, *rest]


def validation_message(errors, path: str | None = None) -> str:
    """One line from pydantic's errors, without echoing the values sent; a field of another
    endpoint sent to `path` says which endpoint takes it."""
    errors = _merge_union(list(errors))
    first = errors[0] if errors else {}
    message = f"{_where(first.get('loc', ()))}: {first.get('msg', 'invalid')}"
    if first.get("type") == "extra_forbidden":
        loc = tuple(first.get("loc", ()))
        takers = _endpoints_of().get(loc[-1], ()) if loc[:1] == ("body",) and len(loc) == 2 \
            else ()
        if takers and path is not None:
            named = takers[0] if len(takers) == 1 else \
                f"{', '.join(takers[:-1])} and {takers[-1]}"
            message += f" ({loc[-1]} is a field of {named}, not of {path}: see GET /openapi.json)"
        else:
            message += " (unknown field: see GET /openapi.json for the fields of this endpoint)"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return message


STATUS_OF = {"UnknownModel": 404}


@functools.cache
def _endpoints_of() -> dict[str, tuple[str, ...]]:
    """Each request field -> the endpoints whose body takes it."""

    bodies = {"/v1/fill": schemas.FillRequest, "/v1/score": schemas.ScoreRequest,
              "/v1/generate": schemas.GenerateRequest, "/v1/infill": schemas.InfillRequest,
              "/v1/classify": schemas.ClassifyRequest, "/v1/compare": schemas.CompareRequest}
    out: dict[str, tuple[str, ...]] = {}
    for route, body in bodies.items():
        for name in body.model_fields:
            out[name] = (*out.get(name, ()), route)
    return out


@functools.cache
def _request_fields() -> dict[str, frozenset[str]]:
    """Each request field of the API, with the words it takes as a value (its choices)."""

    choices = {"sampler": SAMPLERS, "confidence": CONFIDENCES, "reveal": REVEALS,
               "remask": REMASKS}
    fields: dict[str, frozenset[str]] = {}
    for model in (schemas.FillRequest, schemas.ScoreRequest, schemas.GenerateRequest,
                  schemas.InfillRequest, schemas.ClassifyRequest, schemas.CompareRequest):
        for name, info in model.model_fields.items():
            literal = typing.get_args(info.annotation) \
                if typing.get_origin(info.annotation) is typing.Literal else ()
            fields[name] = frozenset(choices.get(name, ())) | frozenset(literal)
    return fields


_FLAG = re.compile(r"(\b[a-z_]+=\S+ \()?--([a-z][a-z0-9-]*)(\))?(?: ([A-Za-z0-9.+-]+))?")
_NUMBER = re.compile(r"[+-]?\d[\d,]*(\.\d+)?")


def for_http(message: str) -> str:
    """A library message as an HTTP client reads it: the CLI's flags are the request's
    fields ("--top-p" is top_p; "--reveal threshold" is reveal="threshold"; "top_p=0
    (--top-p)" loses its repetition). Flags that are not request fields (the server's own
    bounds, such as --max-tokens) stay as they are."""
    fields = _request_fields()

    def field(match: re.Match) -> str:
        named, flag, closed, value = match.groups()
        name = flag.replace("-", "_")
        if name not in fields:
            return match[0]
        if named and closed:  # "top_p=0 (--top-p)": the field is named already
            shown = named[:-2]
            return shown + (f" {value}" if value else "") if shown.startswith(name + "=") \
                else match[0]
        if value is None or named or closed:
            return match[0].replace(f"--{flag}", name)
        if _NUMBER.fullmatch(value):
            return f"{name}={value}"
        if value in fields[name]:
            return f'{name}="{value}"'
        return f"{name} {value}"

    # A value the message quotes is shortened: a 5,000-character verbalizer word came back
    # whole inside the one-line error (the request's own values are not echoed at length).
    # "a verbalizer (--verbalizer)" would read "a verbalizer (verbalizer)": once is enough
    return shortened(_REPEATED.sub(r"\1", _FLAG.sub(field, message)))


_REPEATED = re.compile(r"\b(\w+) \(\1\)")


def shortened(message: str) -> str:
    """`message` with each value it quotes at 80 characters or more cut to its first 59."""
    return _LONG_QUOTE.sub(lambda m: f"{m[1][:60]}…{m[1][0]}", message)


_LONG_QUOTE = re.compile(r"""(?<!\w)('[^'\n]{80,}(?=')|"[^"\n]{80,}(?="))['"](?!\w)""")
"""A quoted value of 80 characters or more (not an apostrophe: "the model's")."""


def install_handlers(app) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request, error):
        return error_response(422, "InvalidRequest", validation_message(error.errors(),
                                                                        request.url.path))

    @app.exception_handler(HTTPError)
    async def _http_error(request, error):
        return error_response(error.status, error.kind, error.message, error.headers)

    @app.exception_handler(MlmkitError)
    async def _mlmkit(request, error):
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return error_response(400, type(error).__name__, for_http(lines[0]))

    @app.exception_handler(StarletteHTTPException)
    async def _starlette(request, error):
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = {404: f"no route {request.url.path}: see GET /openapi.json",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(
            error.status_code, str(error.detail))
        return error_response(error.status_code, kind, message, getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request, error):
        log.error("request %s %s failed", request.method, request.url.path, exc_info=error)
        return error_response(500, "InternalError", f"the server failed on this request "
                              f"({type(error).__name__}); its log has the details")
