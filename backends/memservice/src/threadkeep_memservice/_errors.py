"""Mapping the emulator's errors into threadkeep's tree: one context manager, one decorator.

The model is ``httpx._transports.default.map_httpcore_exceptions``: the driver's primitives
run inside :func:`map_service_errors`, so no emulator ``MemServiceError`` escapes to a
caller. Code that gives a service error a meaning (a stale ``If-Match`` to
retry, a missing session that means "no such chat") catches that one error where it happens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from threadkeep import BackendUnavailable, Conflict, InvalidArgument, PayloadTooLarge

from .emulator import (
    ConflictError,
    DocumentTooLarge,
    MemServiceError,
    NotFoundError,
    ServiceTimeout,
    ServiceUnavailable,
    ValidationError,
)

__all__ = ["map_service_errors", "mapped"]

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def map_service_errors() -> Iterator[None]:
    """Re-raise memory-service errors as the most specific threadkeep error.

    ``ServiceTimeout`` / ``ServiceUnavailable`` -> ``BackendUnavailable`` (retry; after a
    timeout the write may have happened, and retries with an ``agui_id`` are idempotent);
    ``DocumentTooLarge`` -> ``PayloadTooLarge``; ``ValidationError`` -> ``InvalidArgument``;
    ``ConflictError`` and a ``NotFoundError`` nobody handled (a record changed or vanished
    mid-operation) -> ``Conflict``; anything else -> ``BackendUnavailable``.
    """
    try:
        yield
    except ServiceTimeout as exc:
        msg = (
            f"the memory service did not answer in time ({exc}); the write may have happened, retry"
        )
        raise BackendUnavailable(msg) from exc
    except ServiceUnavailable as exc:
        raise BackendUnavailable(f"the memory service failed ({exc}); retry") from exc
    except DocumentTooLarge as exc:
        msg = f"the memory service refused a document as too large ({exc}); make it smaller"
        raise PayloadTooLarge(msg) from exc
    except ValidationError as exc:
        raise InvalidArgument(f"the memory service rejected the request: {exc}") from exc
    except (ConflictError, NotFoundError) as exc:
        msg = f"the record changed while the operation ran ({exc}); try again"
        raise Conflict(msg) from exc
    except MemServiceError as exc:
        raise BackendUnavailable(f"the memory service failed: {exc}") from exc


def mapped(
    function: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate an async driver primitive so it runs inside :func:`map_service_errors`."""

    @functools.wraps(function)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with map_service_errors():
            return await function(*args, **kwargs)

    return wrapper
