"""The emulator's own errors, shaped like the HTTP statuses a hosted service would answer.

::

    MemServiceError
    ├── ServiceUnavailable        (503: the call failed; nothing happened)
    │   └── ServiceTimeout        (504: no answer; the call may or may not have happened)
    ├── NotFoundError             (404: no such space, session or event)
    ├── ConflictError             (409: If-Match precondition failed)
    │   ├── DedupKeyTaken         (409: a live session already holds the dedup key)
    │   └── DuplicateEventKey     (409: an event dedup key is already stored in the session)
    └── ValidationError           (422: the request breaks a rule of the service)
        └── DocumentTooLarge      (413: a body or metadata document is over the size limit)

The threadkeep driver maps these to threadkeep's error tree in one context manager
(``threadkeep_memservice._errors.map_service_errors``); nothing else catches them broadly.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ConflictError",
    "DedupKeyTaken",
    "DocumentTooLarge",
    "DuplicateEventKey",
    "MemServiceError",
    "NotFoundError",
    "ServiceTimeout",
    "ServiceUnavailable",
    "ValidationError",
]


class MemServiceError(Exception):
    """Base class of every error the emulated memory service raises."""

    status = 500


class ServiceUnavailable(MemServiceError):
    """The call failed before it had any effect (an injected fault, HTTP 503)."""

    status = 503


class ServiceTimeout(ServiceUnavailable):
    """The call got no answer in time; its effect may or may not have happened (HTTP 504)."""

    status = 504


class NotFoundError(MemServiceError):
    """No such space, session or event; soft-deleted records count as absent (HTTP 404)."""

    status = 404


class ConflictError(MemServiceError):
    """An ``If-Match`` precondition failed: the record changed since it was read (HTTP 409)."""

    status = 409


class DedupKeyTaken(ConflictError):
    """Restoring a session whose dedup key a live session now holds (HTTP 409)."""


class DuplicateEventKey(ConflictError):
    """A batch names event dedup keys that are already stored (or repeats one); nothing was written.

    Attributes:
        keys: The offending dedup keys, in request order.
    """

    def __init__(self, message: str, keys: Sequence[str]) -> None:
        super().__init__(message)
        self.keys = tuple(keys)


class ValidationError(MemServiceError):
    """The request breaks a rule of the service (empty string, batch too big...; HTTP 422)."""

    status = 422


class DocumentTooLarge(ValidationError):
    """An event body or session metadata is over the document size limit (HTTP 413)."""

    status = 413
