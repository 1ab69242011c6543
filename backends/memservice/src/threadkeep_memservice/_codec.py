"""How messages become events, and back.

**Placeholder codec.** The service rejects empty strings (``min_length=1``) anywhere in a
document, as the seed's memory service does. Every string value and object key is encoded
with :func:`encode_strings` before it is written: ``""`` becomes the zero-width space
:data:`PLACEHOLDER`, and a string that starts with the placeholder gets one more in front
(so a string that really is, or begins with, a zero-width space survives too).
:func:`decode_strings` reverses it exactly; the mapping is a bijection.

**Event keys.** A message's event carries a dedup key unique in its session:
``a:`` + the SHA-256 of its ``agui_id`` when it has one (so two writers of one ``agui_id``
can never both insert), else ``m:`` + its ``message_id``.

**Event bodies.** ``{"cols": {...}, "message": {...}}``: ``cols`` holds what threadkeep keeps
in columns (``message_id``, ``revision``, timestamps, ``fingerprint``); ``message`` is the
message body of ``PreparedMessage.body``. A body over the service's 1 MiB document limit
(messages may be 16 MiB) is written as ``{"cols": ..., "chunks": {"keys", "bytes",
"sha256"}}`` plus one ``chunk`` event per 720 KiB of the UTF-8 body (base64), in the same
atomic batch as the head.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from threadkeep import Message, MessageKind, PreparedMessage

from .emulator import MAX_DOCUMENT_BYTES, Event, NewEvent, document_size

__all__ = [
    "CHUNK_BYTES",
    "CHUNK_TYPE",
    "MESSAGE_TYPES",
    "PLACEHOLDER",
    "HeadColumns",
    "agui_event_key",
    "assemble_chunks",
    "chunk_keys_of",
    "columns",
    "columns_of",
    "decode_string",
    "decode_strings",
    "encode_string",
    "encode_strings",
    "event_key",
    "event_type_of",
    "inline_body",
    "message_events",
    "parse_time",
]

PLACEHOLDER = "\u200b"
"""Zero-width space: stands for the empty string in stored documents."""

CHUNK_TYPE = "chunk"
"""Event type of the continuation pieces of a large message."""

MESSAGE_TYPES = ("message", "boundary")
"""Event types of message heads (a boundary marker is its own type, so it can be found fast)."""

CHUNK_BYTES = 720 * 1024
"""Raw UTF-8 bytes per chunk event (base64 makes 960 KiB, under the 1 MiB document limit)."""

HeadColumns = dict[str, Any]
"""The ``cols`` of a head event: message_id, revision, created_at, updated_at, deleted_at,
fingerprint (timestamps as ISO-8601 text)."""


def encode_string(text: str) -> str:
    """Return ``text`` in its stored form (see the module docstring)."""
    if not text or text.startswith(PLACEHOLDER):
        return PLACEHOLDER + text
    return text


def decode_string(text: str) -> str:
    """Return the original of a stored string (the inverse of :func:`encode_string`)."""
    return text[1:] if text.startswith(PLACEHOLDER) else text


def encode_strings(value: Any) -> Any:
    """Return a copy of a JSON value with every string and object key encoded."""
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, Mapping):
        return {encode_string(k): encode_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_strings(v) for v in value]
    return value


def decode_strings(value: Any) -> Any:
    """Return a copy of a stored JSON value with every string and object key decoded."""
    if isinstance(value, str):
        return decode_string(value)
    if isinstance(value, Mapping):
        return {decode_string(k): decode_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_strings(v) for v in value]
    return value


def event_key(message: Message) -> str:
    """Return the dedup key of a message's head event (at most 66 characters)."""
    if message.agui_id is not None:
        digest = hashlib.sha256(message.agui_id.encode("utf-8")).hexdigest()
        return f"a:{digest}"
    return f"m:{message.message_id}"


def agui_event_key(agui_id: str) -> str:
    """Return the head-event dedup key of the message with this ``agui_id``."""
    return f"a:{hashlib.sha256(agui_id.encode('utf-8')).hexdigest()}"


def event_type_of(message: Message) -> str:
    """Return the event type of a message's head: ``boundary`` or ``message``."""
    return "boundary" if message.kind is MessageKind.BOUNDARY else "message"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def parse_time(value: Any) -> datetime | None:
    """Parse an ISO-8601 timestamp written by this module (``None`` stays ``None``)."""
    return None if value is None else datetime.fromisoformat(str(value))


def columns(
    message: Message,
    *,
    revision: int,
    created_at: datetime | None,
    updated_at: datetime | None,
    deleted_at: datetime | None,
    fingerprint: str,
) -> HeadColumns:
    """Return the ``cols`` of a head event."""
    return {
        "message_id": str(message.message_id),
        "revision": revision,
        "created_at": _iso(created_at),
        "updated_at": _iso(updated_at),
        "deleted_at": _iso(deleted_at),
        "fingerprint": fingerprint,
    }


def _fits(document: Mapping[str, Any], text_bytes: int) -> bool:
    # The codec grows a string by at most 3 bytes, and the shortest JSON string ("") is 2,
    # so a document is at most 2.5 times its plain JSON size: skip measuring small ones.
    if text_bytes * 5 // 2 + 4096 < MAX_DOCUMENT_BYTES:
        return True
    return document_size(document) <= MAX_DOCUMENT_BYTES


def message_events(prepared: PreparedMessage, cols: HeadColumns) -> list[NewEvent]:
    """Return the events that store one message: its head, then any chunks.

    Args:
        prepared: The message and its JSON body.
        cols: The head's columns (see :func:`columns`).

    Returns:
        One event when the encoded body fits in a document, else a head whose body lists
        the chunk keys followed by the chunk events.
    """
    message = prepared.message
    kind, key = event_type_of(message), event_key(message)
    raw = prepared.body.encode("utf-8")
    inline = {"cols": encode_strings(cols), "message": encode_strings(json.loads(prepared.body))}
    if _fits(inline, len(raw)):
        return [NewEvent(event_type=kind, body=inline, dedup_key=key)]
    pieces = [raw[i : i + CHUNK_BYTES] for i in range(0, len(raw), CHUNK_BYTES)]
    keys = [f"c:{uuid.uuid4()}" for _ in pieces]
    manifest = {"keys": keys, "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    head = NewEvent(
        event_type=kind, body={"cols": encode_strings(cols), "chunks": manifest}, dedup_key=key
    )
    chunks = [
        NewEvent(
            event_type=CHUNK_TYPE,
            body={"of": str(message.message_id), "index": i, "data": _b64(piece)},
            dedup_key=chunk_key,
        )
        for i, (piece, chunk_key) in enumerate(zip(pieces, keys, strict=True))
    ]
    return [head, *chunks]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def columns_of(event: Event) -> HeadColumns:
    """Return the decoded ``cols`` of a head event."""
    cols: HeadColumns = decode_strings(event.body["cols"])
    return cols


def chunk_keys_of(event: Event) -> list[str]:
    """Return the chunk keys of a chunked head event (``[]`` for an inline one)."""
    chunks = event.body.get("chunks")
    return [] if chunks is None else [str(k) for k in chunks["keys"]]


def assemble_chunks(head: Event, chunks: Sequence[Event]) -> str:
    """Return the message body text of a chunked head from its chunk events.

    Raises:
        ValueError: If a chunk is missing or the assembled body fails its checksum.
    """
    manifest = head.body["chunks"]
    by_key = {c.dedup_key: c for c in chunks}
    missing = [k for k in manifest["keys"] if k not in by_key]
    if missing:
        raise ValueError(f"message {head.event_id} lacks chunks {missing}")
    raw = b"".join(base64.b64decode(by_key[k].body["data"]) for k in manifest["keys"])
    if len(raw) != manifest["bytes"] or hashlib.sha256(raw).hexdigest() != manifest["sha256"]:
        raise ValueError(f"message {head.event_id}: chunks do not match their checksum")
    return raw.decode("utf-8")


def inline_body(head: Event) -> dict[str, Any] | None:
    """Return the decoded message body of an inline head event, or ``None`` if chunked."""
    body = head.body.get("message")
    return None if body is None else dict(decode_strings(body))
