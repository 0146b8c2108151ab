"""Reading a client's request body: what can go wrong, as the 400s it is.

Every route that takes a body (the API routes, the admin routes) reads it through here, so a
broken gzip stream, a body labelled with an encoding it is not in, or a cut connection is a
clear 400 everywhere and never a server error. (The API handler reads the body inline for
speed and uses `UNREADABLE` and `unreadable` to the same effect.)
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
from aiohttp import web, web_protocol

from proxy import knowntools
from proxy.errors import ProxyError

# What reading a request body can raise besides "too large" (a broken gzip, a cut connection).
UNREADABLE = (
    ValueError,
    UnicodeError,
    OSError,
    aiohttp.ClientPayloadError,
    web_protocol.RequestPayloadError,
)


def unreadable(exc: Exception) -> ProxyError:
    return ProxyError(
        400,
        f"Could not read the request body ({type(exc).__name__}); send plain JSON, or JSON "
        "encoded as its Content-Encoding header says (gzip or deflate).",
        code="invalid_body",
        close=True,  # aiohttp drops the connection after a body it could not read
    )


def parse_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 saying what it is instead."""
    try:
        body = knowntools.parse(raw)  # orjson.loads, a tools list seen before not parsed again
    except orjson.JSONDecodeError as exc:
        # Checked only on failure: stripping a large body to test it would copy it every time.
        if not raw.strip():
            raise ProxyError(
                400, "The request body is empty; send a JSON object.", code="invalid_json"
            ) from None
        raise ProxyError(
            400,
            f"The request body is not valid UTF-8 JSON ({exc}). Send a JSON object.",
            code="invalid_json",
        ) from None
    if not isinstance(body, dict):
        raise ProxyError(
            400,
            f"The request body must be a JSON object, not a {type(body).__name__}.",
            code="invalid_json",
        )
    return body


async def read_object(request: web.Request, *, empty: bool = False) -> dict[str, Any]:
    """Read and parse the body; with `empty`, no body at all is an empty object."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise
    except UNREADABLE as exc:
        raise unreadable(exc) from None
    if empty and not raw.strip():
        return {}
    return parse_object(raw)
