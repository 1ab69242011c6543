"""Request limits: a body over the gateway's size limit answers 413 before it is buffered.

Uvicorn reads a request body of any size into memory when the app asks for it; a gateway
in front of untrusted clients must bound that. :class:`BodyLimit` refuses a declared
``Content-Length`` over the limit without reading a byte, and counts the bytes of a body
without one (chunked), answering ``413 payload_too_large`` once the count passes the limit.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._errors import InvalidArgument
from ._errors import error_response

__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyLimit", "checked_body_limit"]

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""The default limit, in bytes: room for a long AG-UI ``RunAgentInput`` (whose ``messages``
carry the thread so far) over the stores' 16 MiB message size limit."""


def checked_body_limit(value: Any) -> int:
    """Return ``value`` as a body limit in bytes.

    Raises:
        InvalidArgument: If it is not an integer >= 1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"max_body_bytes is an integer >= 1, not {value!r}")
    return value


def _too_large(limit: int) -> str:
    return f"the request body is over this gateway's limit of {limit} bytes"


class BodyLimit:
    """ASGI middleware: HTTP request bodies of at most ``limit`` bytes.

    Args:
        app: The wrapped ASGI app.
        limit: The most bytes a request body may have.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``scope``, refusing a body over the limit with ``413 payload_too_large``."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            response = error_response(413, "payload_too_large", _too_large(self.limit))
            await response(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # FastAPI passes an HTTPException raised while reading a body through
                    # to the app's handler (any other exception becomes a generic 400).
                    raise HTTPException(413, _too_large(self.limit))
            return message

        await self.app(scope, counted, send)
