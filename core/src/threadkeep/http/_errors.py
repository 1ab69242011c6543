"""Error answers: every failure is a JSON body ``{"error": {"code", "message"}}``.

The codes are stable (programs branch on them); the messages are for people. A store error
maps by its class in the ``ThreadkeepError`` tree; an unknown or foreign id is always
``404 not_found``, never 403, so ids cannot be probed (issue 17).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._errors import (
    ArchiveError,
    BackendUnavailable,
    CapabilityNotSupported,
    Conflict,
    InvalidArgument,
    InvalidCursor,
    NotFound,
    PayloadTooLarge,
    ThreadkeepError,
)
from ._wire import ErrorBody

__all__ = [
    "ERROR_RESPONSES",
    "RETRY_AFTER_SECONDS",
    "ApiError",
    "error_response",
    "install_error_handlers",
]

_log = logging.getLogger("threadkeep.http")

# (class, HTTP status, code): the first matching class wins, so subclasses come first.
_STORE_ERRORS: tuple[tuple[type[ThreadkeepError], int, str], ...] = (
    (NotFound, 404, "not_found"),
    (InvalidCursor, 400, "invalid_cursor"),
    (PayloadTooLarge, 413, "payload_too_large"),
    (InvalidArgument, 400, "invalid_argument"),
    (Conflict, 409, "conflict"),
    (BackendUnavailable, 503, "backend_unavailable"),
    (ArchiveError, 503, "archive_unavailable"),
    (CapabilityNotSupported, 501, "not_supported"),
)

_HTTP_CODES = {
    400: "invalid_request",  # FastAPI's "There was an error parsing the body"
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}

# What a 5xx answer says: the driver's own text (its exception class, host, port) goes to
# the server's log only, never to the caller.
_UNAVAILABLE = {
    "backend_unavailable": "the store's backend cannot be reached; retry later",
    "archive_unavailable": "the archive cannot be reached; retry later",
}

RETRY_AFTER_SECONDS = 5
"""The ``Retry-After`` a 503 answer carries, in seconds."""


class ApiError(Exception):
    """An error answer raised by the gateway's own code.

    Args:
        status: The HTTP status (for example 401, 404).
        code: The stable error code (``unauthorized``, ``not_found``, ...).
        message: What went wrong, for people.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """Return the JSON error answer.

    A 401 also carries ``WWW-Authenticate: Bearer`` (RFC 6750 section 3), a 503
    ``Retry-After`` (:data:`RETRY_AFTER_SECONDS`, RFC 9110 section 10.2.3).
    """
    headers = None
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    elif status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def _store_error(request: Request, exc: Exception) -> JSONResponse:
    for cls, status, code in _STORE_ERRORS:
        if isinstance(exc, cls):
            if status == 404:  # never say whether the id exists elsewhere
                return error_response(404, code, "no such thread, message or run")
            if status >= 500:
                _log.warning("threadkeep: %s %s: %s", request.method, request.url.path, exc)
            return error_response(status, code, _UNAVAILABLE.get(code) or str(exc))
    _log.error("threadkeep: unexpected store error", exc_info=exc)
    return error_response(500, "internal_error", "the server failed; see its log")


def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg', 'invalid')}"
        for error in exc.errors()
    )
    return error_response(400, "invalid_request", problems or "the request does not validate")


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    _log.error(
        "threadkeep: unexpected error in %s %s", request.method, request.url.path, exc_info=exc
    )
    return error_response(500, "internal_error", "the server failed; see its log")


def install_error_handlers(app: FastAPI) -> None:
    """Make every error ``app`` answers a JSON body with a stable code (see module doc)."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ThreadkeepError, _store_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "Bad limit, cursor or body (invalid_cursor, invalid_request, ...)",
    },
    401: {"model": ErrorBody, "description": "No valid credentials (unauthorized)"},
    404: {"model": ErrorBody, "description": "Unknown or foreign id (not_found)"},
    409: {"model": ErrorBody, "description": "A concurrent change won (conflict)"},
}
"""The error answers every gateway route documents in the OpenAPI document."""
