"""An in-process emulator of a hosted session/event memory service (see ``MemoryService``).

It is faithful to what makes such a service hard to build on: no query across sessions, no
transactions, ``If-Match`` versions, strings of at least one character, 1 MiB documents,
batches of at most 200 events, soft deletes that expire, and faults injected by rule.
"""

from ._base import DEFAULT_SOFT_DELETE_TTL, Call
from ._errors import (
    ConflictError,
    DedupKeyTaken,
    DocumentTooLarge,
    DuplicateEventKey,
    MemServiceError,
    NotFoundError,
    ServiceTimeout,
    ServiceUnavailable,
    ValidationError,
)
from ._faults import ArgsPredicate, FaultAction, FaultRule, FaultTable
from ._records import (
    MAX_BATCH,
    MAX_DEDUP_KEY,
    MAX_DESCRIPTION,
    MAX_DOCUMENT_BYTES,
    MAX_PAGE,
    MAX_PARTICIPANTS,
    Event,
    EventPatch,
    NewEvent,
    Session,
    Space,
    document_size,
)
from ._service import MemoryService, drop_named_service, named_service

__all__ = [
    "DEFAULT_SOFT_DELETE_TTL",
    "MAX_BATCH",
    "MAX_DEDUP_KEY",
    "MAX_DESCRIPTION",
    "MAX_DOCUMENT_BYTES",
    "MAX_PAGE",
    "MAX_PARTICIPANTS",
    "ArgsPredicate",
    "Call",
    "ConflictError",
    "DedupKeyTaken",
    "DocumentTooLarge",
    "DuplicateEventKey",
    "Event",
    "EventPatch",
    "FaultAction",
    "FaultRule",
    "FaultTable",
    "MemServiceError",
    "MemoryService",
    "NewEvent",
    "NotFoundError",
    "ServiceTimeout",
    "ServiceUnavailable",
    "Session",
    "Space",
    "ValidationError",
    "document_size",
    "drop_named_service",
    "named_service",
]
