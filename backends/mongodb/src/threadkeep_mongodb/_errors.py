"""PyMongo's errors mapped into the threadkeep error tree, in one place.

``map_errors()`` is the only place a native error becomes a public one (the shape of httpx's
``map_httpcore_exceptions``): every primitive runs inside it, and nothing from ``pymongo`` or
``bson`` escapes. The transaction runner (``_base``) retries transient write conflicts before
an error gets here; what is left after its bounded retries is mapped like everything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bson.errors import BSONError, InvalidDocument
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    ConnectionFailure,
    DocumentTooLarge,
    DuplicateKeyError,
    ExecutionTimeout,
    OperationFailure,
    PyMongoError,
)

from threadkeep import BackendUnavailable, Conflict, InvalidArgument, PayloadTooLarge

__all__ = [
    "TRANSIENT_LABEL",
    "UNKNOWN_COMMIT_LABEL",
    "duplicate_key_pattern",
    "is_duplicate_key",
    "map_errors",
]

TRANSIENT_LABEL = "TransientTransactionError"
"""Error label of a transaction that may be retried from the start (write conflicts)."""

UNKNOWN_COMMIT_LABEL = "UnknownTransactionCommitResult"
"""Error label of a commit whose outcome is unknown; the commit may be retried."""

_DUPLICATE_KEY = 11000
_TOO_LARGE = frozenset({10334, 17419, 17420})  # BSONObjectTooLarge, update results too large
_BAD_VALUE = 2
_WRITE_CONFLICT = 112


def is_duplicate_key(exc: BaseException) -> bool:
    """Return whether ``exc`` is a duplicate-key error (single write or bulk write)."""
    if isinstance(exc, DuplicateKeyError):
        return True
    if isinstance(exc, BulkWriteError):
        errors = exc.details.get("writeErrors", [])
        return bool(errors) and all(e.get("code") == _DUPLICATE_KEY for e in errors)
    return False


def duplicate_key_pattern(exc: BaseException) -> dict[str, Any]:
    """Return the key pattern of the index a duplicate-key error hit (``{}`` if unknown)."""
    if isinstance(exc, DuplicateKeyError):
        return dict((exc.details or {}).get("keyPattern") or {})
    if isinstance(exc, BulkWriteError):
        for error in exc.details.get("writeErrors", []):
            return dict(error.get("keyPattern") or {})
    return {}


def _too_large(exc: OperationFailure) -> bool:
    return exc.code in _TOO_LARGE or (exc.code == _BAD_VALUE and "too large" in str(exc).lower())


@contextmanager
def map_errors(action: str) -> Iterator[None]:
    """Map PyMongo and BSON errors raised inside the block to threadkeep errors.

    Args:
        action: What the block does, for the message (``"append messages"``).

    Raises:
        PayloadTooLarge: For a document over the server's 16 MiB BSON limit.
        Conflict: For a duplicate key the driver did not resolve, or a write conflict
            that outlasted the bounded transaction retries.
        BackendUnavailable: For network errors, server selection timeouts and every other
            server or driver failure (the operation may be retried).
        InvalidArgument: For a value BSON cannot encode, or a bad client option.
    """
    try:
        yield
    except (DocumentTooLarge, OperationFailure) as exc:
        if isinstance(exc, DocumentTooLarge) or _too_large(exc):
            msg = f"{action}: a document is over MongoDB's 16 MiB BSON limit; make it smaller"
            raise PayloadTooLarge(msg) from exc
        if is_duplicate_key(exc):
            msg = f"{action}: a record with this key already exists ({exc}); re-read and retry"
            raise Conflict(msg) from exc
        if exc.has_error_label(TRANSIENT_LABEL) or exc.code == _WRITE_CONFLICT:
            msg = f"{action}: concurrent writers kept conflicting; try again"
            raise Conflict(msg) from exc
        if isinstance(exc, ExecutionTimeout):
            msg = f"{action}: MongoDB timed out the operation; try again later"
            raise BackendUnavailable(msg) from exc
        raise BackendUnavailable(f"{action}: MongoDB refused the operation: {exc}") from exc
    except ConnectionFailure as exc:
        msg = (
            f"{action}: cannot reach MongoDB ({type(exc).__name__}: {exc}); check the URL "
            "and that the server is up, then retry"
        )
        raise BackendUnavailable(msg) from exc
    except ConfigurationError as exc:
        raise InvalidArgument(f"{action}: invalid MongoDB configuration: {exc}") from exc
    except PyMongoError as exc:
        raise BackendUnavailable(f"{action}: MongoDB driver error: {exc}") from exc
    except (InvalidDocument, BSONError) as exc:
        raise InvalidArgument(f"{action}: value cannot be stored in BSON: {exc}") from exc
