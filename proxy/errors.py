"""OpenAI-shaped errors: the one way latchgate tells a client something went wrong.

Every error latchgate itself produces goes through `error_body`/`error_response`, so a client's
SDK always finds `{"error": {"message", "type", "param", "code"}}` and raises the exception class
that fits the status. Messages say what to do next, never only what failed.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

# Default `type` per status, as OpenAI uses them; the SDK maps statuses to exception classes.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "upstream_timeout",
}


def error_body(
    status: int,
    message: str,
    *,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """The OpenAI error object for `status`, with a type chosen from the status if not given."""
    return {
        "error": {
            "message": message,
            "type": type or _TYPES.get(status, "api_error"),
            "param": param,
            "code": code,
        }
    }


def error_response(
    status: int,
    message: str,
    *,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """A JSON error response in OpenAI's shape."""
    body = orjson.dumps(error_body(status, message, type=type, param=param, code=code))
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


class ProxyError(Exception):
    """An error latchgate answers itself; carries everything `error_response` needs."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        code: str | None = None,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        # The connection ends after the answer (`Connection: close`): what is left of the
        # request on it cannot be told apart from the next one's bytes.
        self.close = close
        self.headers = headers  # headers the answer carries (a 405's `Allow`)

    def body(self) -> dict[str, Any]:
        return error_body(
            self.status, self.message, type=self.type, param=self.param, code=self.code
        )

    def response(self, headers: dict[str, str] | None = None) -> web.Response:
        response = error_response(
            self.status,
            self.message,
            type=self.type,
            param=self.param,
            code=self.code,
            headers={**self.headers, **(headers or {})} if self.headers else headers,
        )
        if self.close:
            response.force_close()
        return response


def too_deep_to_send() -> ProxyError:
    """The 400 for a request latchgate must write again to send and cannot: orjson reads JSON
    nested 1024 levels deep but writes only 254."""
    return ProxyError(
        400,
        "The request nests JSON more than 254 levels deep, and latchgate must re-encode it to "
        "send it: flatten the deepest part.",
        code="invalid_value",
    )


def too_deep_to_write(param: str, written_as: str) -> ProxyError:
    """The 400 for a part of a request latchgate must write again (as `written_as`) and cannot:
    nested past the 254 levels orjson writes."""
    return ProxyError(
        400,
        f"{param} nests JSON more than 254 levels deep, and latchgate must write it as "
        f"{written_as}: flatten the deepest part.",
        param=param,
        code="invalid_value",
    )


def sse_error_event(status: int, message: str, *, code: str | None = None) -> bytes:
    """An SSE `data:` event carrying an OpenAI error: the openai SDK raises it mid-stream."""
    payload = error_body(status, message, code=code)
    return b"data: " + orjson.dumps(payload) + b"\n\n"
