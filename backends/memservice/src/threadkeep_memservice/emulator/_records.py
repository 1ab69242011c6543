"""What the emulated service stores and returns, and the rules every request must follow.

Limits (chosen to be like a hosted document service; the driver designs around them):

- every string in a request (dedup keys, descriptions, participants, event types, and every
  string value or object key inside metadata and event bodies) has at least 1 character;
- an event body and a session's metadata are each at most :data:`MAX_DOCUMENT_BYTES`
  (1 MiB) as compact UTF-8 JSON, measured by :func:`document_size`;
- a batch (create, patch, delete or get of events) holds at most :data:`MAX_BATCH` (200);
- a listing returns at most :data:`MAX_PAGE` (200) records per call;
- dedup keys are at most 72 characters, descriptions at most 1,024.

Records handed out are frozen copies: changing one never changes what is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import DocumentTooLarge, ValidationError

__all__ = [
    "MAX_BATCH",
    "MAX_DEDUP_KEY",
    "MAX_DESCRIPTION",
    "MAX_DOCUMENT_BYTES",
    "MAX_PAGE",
    "MAX_PARTICIPANTS",
    "Event",
    "EventPatch",
    "NewEvent",
    "Session",
    "Space",
    "check_batch",
    "check_string",
    "document_size",
    "encode_document",
]

MAX_DOCUMENT_BYTES = 1024 * 1024
"""Largest event body or session metadata, in bytes of compact UTF-8 JSON."""

MAX_BATCH = 200
"""Most events one batch call creates, patches, deletes or reads."""

MAX_PAGE = 200
"""Most records one listing call returns."""

MAX_DEDUP_KEY = 72
"""Longest dedup key, in characters."""

MAX_DESCRIPTION = 1024
"""Longest session description, in characters."""

MAX_PARTICIPANTS = 32
"""Most participants of one session."""


@dataclass(frozen=True)
class Space:
    """A space: the container of sessions (one per application)."""

    space_id: str
    dedup_key: str | None
    created_at: float


@dataclass(frozen=True)
class Session:
    """A session as the service returns it.

    Attributes:
        session_id: Service-assigned id (24 lowercase hex characters).
        space_id: The space holding it.
        sequence_id: Space-wide creation order, assigned by the service (increasing).
        dedup_key: Idempotent-create key; held only while the session is live.
        description: Free text, filterable by prefix in listings.
        participants: Participant ids, filterable in listings.
        metadata: The session's JSON metadata document.
        version: Starts at 1 and grows by 1 on every write to the session or its events
            (the ``If-Match`` value of updates and conditional event writes).
        created_at: Service clock, seconds since the epoch.
        updated_at: Service clock of the last write.
        deleted_at: Service clock of the soft delete, or ``None`` while live.
    """

    session_id: str
    space_id: str
    sequence_id: int
    dedup_key: str | None
    description: str | None
    participants: tuple[str, ...]
    metadata: dict[str, Any]
    version: int
    created_at: float
    updated_at: float
    deleted_at: float | None


@dataclass(frozen=True)
class Event:
    """An event as the service returns it.

    Attributes:
        event_id: Service-assigned id.
        session_id: The session holding it.
        sequence_id: Order within the session, assigned at commit (strictly increasing in
            commit order; a batch gets consecutive ids), or given explicitly on import.
        event_type: Free text, filterable in listings.
        dedup_key: Optional key, unique among the session's stored events.
        body: The event's JSON body document.
        version: Opaque token that changes on every patch (the ``If-Match`` of patches).
        created_at: Service clock, seconds since the epoch.
        updated_at: Service clock of the last patch.
        deleted_at: Service clock of the soft delete, or ``None``.
    """

    event_id: str
    session_id: str
    sequence_id: int
    event_type: str
    dedup_key: str | None
    body: dict[str, Any]
    version: str
    created_at: float
    updated_at: float
    deleted_at: float | None


@dataclass(frozen=True)
class NewEvent:
    """One event of a ``create_events`` batch.

    Attributes:
        event_type: At least 1 character.
        body: A JSON object of at most :data:`MAX_DOCUMENT_BYTES`.
        dedup_key: Optional key, unique within the session.
        sequence_id: Explicit sequence id (importing history); must not be in use in the
            session. ``None`` lets the service assign the next one.
    """

    event_type: str
    body: Mapping[str, Any]
    dedup_key: str | None = None
    sequence_id: int | None = None


@dataclass(frozen=True)
class EventPatch:
    """One replacement of an event body in a ``patch_events`` batch.

    Attributes:
        event_id: The event to patch.
        body: The new body (replaces the old one whole).
        if_match: The event version the caller read; a different stored version fails the
            whole batch with ``ConflictError``. ``None`` skips the check.
    """

    event_id: str
    body: Mapping[str, Any]
    if_match: str | None = None


def check_string(value: str, where: str, *, max_length: int | None = None) -> None:
    """Apply the service's string rules to one string.

    Raises:
        ValidationError: If ``value`` is not a string, is empty, or is longer than
            ``max_length`` characters.
    """
    if not isinstance(value, str):
        raise ValidationError(f"{where}: expected a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(f"{where}: string must have at least 1 character (min_length=1)")
    if max_length is not None and len(value) > max_length:
        raise ValidationError(f"{where}: string is longer than {max_length} characters")


def _check_strings(value: Any, where: str) -> None:
    if isinstance(value, str):
        check_string(value, where)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_string(key, f"{where} (a key)")
            _check_strings(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_strings(item, f"{where}[{index}]")


def _dump(document: Mapping[str, Any], where: str) -> str:
    if not isinstance(document, Mapping):
        raise ValidationError(f"{where}: expected a JSON object, got {type(document).__name__}")
    try:
        text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where}: not a JSON document: {exc}") from exc
    return text


def document_size(document: Mapping[str, Any]) -> int:
    """Return the size the service limits: bytes of the compact UTF-8 JSON of ``document``.

    Raises:
        ValidationError: If the document is not a JSON object, not serializable, or holds a
            lone surrogate.
    """
    return len(_dump(document, "document").encode("utf-8"))


def encode_document(document: Mapping[str, Any], where: str) -> str:
    """Validate a JSON document against the service's rules and return its wire text.

    Raises:
        ValidationError: If it is not a JSON object, holds an empty string or key, is not
            serializable, or holds a lone surrogate.
        DocumentTooLarge: If it is over :data:`MAX_DOCUMENT_BYTES`.
    """
    text = _dump(document, where)
    _check_strings(document, where)
    size = len(text.encode("utf-8"))
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(f"{where}: {size} bytes, over the limit of {MAX_DOCUMENT_BYTES}")
    return text


def check_batch(items: Sequence[Any], what: str) -> None:
    """Reject an empty batch or one over :data:`MAX_BATCH` items.

    Raises:
        ValidationError: As above.
    """
    if not items:
        raise ValidationError(f"{what}: a batch needs at least one item")
    if len(items) > MAX_BATCH:
        raise ValidationError(f"{what}: {len(items)} items, over the batch limit of {MAX_BATCH}")
