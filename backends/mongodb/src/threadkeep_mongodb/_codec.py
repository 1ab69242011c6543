"""Documents from records: instants, typed message and chat fields, and body chunks.

See :mod:`threadkeep_mongodb._schema` for the document shapes. Nothing here does I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from bson.binary import Binary

from threadkeep import (
    Chat,
    ChatStatus,
    Message,
    Step,
    StepStatus,
    Unreadable,
)

from ._schema import CHUNK_BYTES, INLINE_BODY_BYTES

__all__ = [
    "Document",
    "chat_fields",
    "from_us",
    "join_chunks",
    "message_fields",
    "required",
    "split_body",
    "step_document",
    "stored_time",
    "to_us",
]

Document = dict[str, Any]
"""A BSON document as PyMongo reads and writes it."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime | None) -> int | None:
    """Return an aware datetime as int64 microseconds since the Unix epoch (exact)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICROSECOND


def from_us(value: int | None) -> datetime | None:
    """Return microseconds since the Unix epoch as an aware UTC datetime."""
    return None if value is None else _EPOCH + timedelta(microseconds=value)


def stored_time(value: object) -> datetime | Unreadable | None:
    """Return a stored ``*_us`` field as :func:`from_us` does; another BSON type is damage.

    A document changed outside threadkeep may hold a string or a nested document there;
    it becomes :class:`threadkeep.Unreadable`, so the rebuild raises ``CorruptRecord``
    naming the row and the field instead of a raw ``TypeError`` (issue 12).
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        try:
            return from_us(value)
        except OverflowError:
            pass
    return Unreadable(value, f"is not microseconds since the epoch ({value!r:.60})")


def required(doc: Document, name: str) -> Any:
    """Return ``doc[name]``, or :class:`threadkeep.Unreadable` if the field is missing.

    A document a tool outside threadkeep stripped of a field (``$unset``) is damage: the
    rebuild raises ``CorruptRecord`` naming the field, never a raw ``KeyError``, and never
    rebuilds the record without it (issue 12).
    """
    if name in doc:
        return doc[name]
    return Unreadable(None, "is missing from the document")


def split_body(body: str, chat_id: UUID) -> tuple[Document, list[Document]]:
    """Return the body fields of a message document and the chunk documents it needs.

    Args:
        body: The JSON body text.
        chat_id: The chat, copied into each chunk (purges find chunks by chat).

    Returns:
        ``({"body": body}, [])`` for a body of at most ``INLINE_BODY_BYTES`` UTF-8 bytes;
        otherwise ``({"body_id", "body_chunks", "body_bytes"}, chunks)`` with the UTF-8 bytes
        cut into ``CHUNK_BYTES`` pieces (a code point may straddle two chunks: readers join
        the bytes before decoding).
    """
    if len(body) <= INLINE_BODY_BYTES // 4:  # at most 4 UTF-8 bytes per character
        return {"body": body}, []
    data = body.encode("utf-8")
    if len(data) <= INLINE_BODY_BYTES:
        return {"body": body}, []
    body_id = uuid4()
    chunks = [
        {
            "body_id": body_id,
            "n": n,
            "chat_id": chat_id,
            "data": Binary(data[start : start + CHUNK_BYTES]),
        }
        for n, start in enumerate(range(0, len(data), CHUNK_BYTES))
    ]
    fields = {"body_id": body_id, "body_chunks": len(chunks), "body_bytes": len(data)}
    return fields, chunks


def join_chunks(doc: Document, chunks: list[Document]) -> str | None:
    """Return the body of a chunked message, or ``None`` if ``chunks`` is incomplete.

    Args:
        doc: The message document (``body_chunks``, ``body_bytes``).
        chunks: Its chunk documents, in ``n`` order.
    """
    if [c["n"] for c in chunks] != list(range(doc["body_chunks"])):
        return None
    data = b"".join(bytes(c["data"]) for c in chunks)
    if len(data) != doc["body_bytes"]:
        return None
    return data.decode("utf-8")


def _nested(items: list[Any], id_field: str) -> list[Document]:
    entries = []
    for item in items:
        entry: Document = {id_field: getattr(item, id_field)}
        if item.agui_id is not None:
            entry["agui_id"] = item.agui_id
        entries.append(entry)
    return entries


def message_fields(message: Message) -> Document:
    """Return the typed fields that queries on a message need (its body holds the rest)."""
    fields: Document = {
        "role": str(message.role),
        "kind": str(message.kind),
        "run_id": message.run_id,
        "request_id": message.request_id,
        "block_id": message.block_id,
        "tool_calls": _nested(message.tool_calls, "tool_call_id"),
        "reasonings": _nested(message.reasonings, "reasoning_id"),
    }
    return fields


def chat_fields(chat: Chat, body: str) -> Document:
    """Return every field of a chat document a write may set (all but the counters).

    ``seq``, ``created_us``, ``last_message_us``, ``idle_us`` and the counters are set by
    inserts and appends only; ``revision`` is incremented by the caller.
    """
    live = chat.deleted_at is None
    return {
        "dedup_key": chat.dedup_key,
        "live": live,
        "writable": live and chat.status is ChatStatus.ACTIVE,
        "user_id": chat.user_id,
        "thread_id": chat.thread_id,
        "tenant_id": chat.tenant_id,
        "team_id": chat.team_id,
        "agent_id": chat.agent_id,
        "channel": chat.channel,
        "status": str(chat.status),
        "share": str(chat.share),
        "name": chat.name,
        "name_folded": None if chat.name is None else chat.name.casefold(),
        "updated_us": to_us(chat.updated_at),
        "deleted_us": to_us(chat.deleted_at),
        "body": body,
    }


def step_document(step: Step, body: str) -> Document:
    """Return the document of a stored step (``step.seq`` set) with its JSON ``body``."""
    return {
        "_id": step.step_id,
        "chat_id": step.chat_id,
        "seq": step.seq,
        "run_id": step.run_id,
        "stack_id": step.stack_id,
        "completed": step.status is StepStatus.COMPLETED,
        "created_us": to_us(step.created_at),
        "body": body,
    }
