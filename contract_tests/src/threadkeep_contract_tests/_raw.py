"""What a driver's back door returns: stored rows, read without the store's own read path.

The contract suite checks persistence against these rows (zarr's ``StoreTests`` back-door
``get``/``set`` is the model): a driver whose read path hides its own write bug still fails.
A driver author builds them from whatever the backend holds (SQL rows, documents, objects);
``from_body`` decodes the JSON body threadkeep asks drivers to store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from threadkeep import Store

__all__ = ["BackDoor", "RawChat", "RawMessage"]


def _decode(body: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(body, Mapping):
        return dict(body)
    decoded = json.loads(body)
    if not isinstance(decoded, dict):
        msg = f"a stored body must be a JSON object, not {type(decoded).__name__}"
        raise TypeError(msg)
    return decoded


@dataclass(frozen=True)
class RawChat:
    """One stored chat as the backend holds it.

    Attributes:
        chat_id: The chat's id.
        user_id: The owner.
        thread_id: The caller's thread key.
        deleted: Whether the chat is soft-deleted (it is still stored).
        tenant_id: The tenant, if any.
        body: The decoded stored record (every field the driver keeps).
    """

    chat_id: UUID
    user_id: str
    thread_id: str
    deleted: bool
    tenant_id: str | None = None
    body: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_body(cls, body: str | bytes | Mapping[str, Any], *, deleted: bool) -> RawChat:
        """Build a raw chat from a stored chat record (``Store.record_body`` text).

        Args:
            body: The stored JSON text (or its decoded mapping) holding ``chat_id``,
                ``user_id``, ``thread_id`` and optionally ``tenant_id``.
            deleted: The backend's own soft-delete flag or column.

        Raises:
            KeyError: If the body lacks ``chat_id``, ``user_id`` or ``thread_id``.
            TypeError: If the body is not a JSON object.
        """
        data = _decode(body)
        return cls(
            chat_id=UUID(str(data["chat_id"])),
            user_id=str(data["user_id"]),
            thread_id=str(data["thread_id"]),
            deleted=deleted,
            tenant_id=data.get("tenant_id"),
            body=data,
        )


@dataclass(frozen=True)
class RawMessage:
    """One stored message as the backend holds it.

    Attributes:
        message_id: The message's id.
        chat_id: Its chat.
        seq: The store-assigned order within the chat.
        role: The role as stored (``"user"``, ``"assistant"``...).
        content: The text content as stored, decoded from the body.
        hidden: Whether the message is soft-deleted (``delete_messages``).
        agui_id: The client id, if any.
        body: The decoded stored body (``tool_calls``, ``metadata``, extra fields...).
    """

    message_id: UUID
    chat_id: UUID
    seq: int
    role: str
    content: str
    hidden: bool
    agui_id: str | None = None
    body: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_body(
        cls,
        body: str | bytes | Mapping[str, Any],
        *,
        chat_id: UUID,
        seq: int,
        hidden: bool,
    ) -> RawMessage:
        """Build a raw message from its stored body (``PreparedMessage.body``) and columns.

        Args:
            body: The stored JSON body text (or its decoded mapping).
            chat_id: The chat column.
            seq: The seq column.
            hidden: Whether the row's ``deleted_at`` column is set.

        Raises:
            KeyError: If the body lacks ``message_id`` or ``role``.
            TypeError: If the body is not a JSON object.
        """
        data = _decode(body)
        return cls(
            message_id=UUID(str(data["message_id"])),
            chat_id=chat_id,
            seq=seq,
            role=str(data["role"]),
            content=str(data.get("content", "")),
            hidden=hidden,
            agui_id=data.get("agui_id"),
            body=data,
        )


class BackDoor(Protocol):
    """The two raw reads a driver's contract test class implements."""

    async def raw_chats(self, store: Store) -> list[RawChat]:
        """Return every chat stored (deleted ones included), in any order."""
        ...

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        """Return every message row stored for the chat (hidden ones included), any order."""
        ...

    # Optional, for the corrupt-row tests (``_corrupt_rows.py``, ``_damaged_records.py``):
    # ``async def damage_row(self, store, kind, chat_id, seq, damage) -> str | None`` writes
    # damage straight into the backend: ``kind`` is "message" (the row of ``seq``), "chat"
    # (``seq`` is None), "step" (the chat's step of that ``seq``) or "run" (``seq`` is None:
    # the chat's one run; the tests start one run per chat), ``damage`` a key of
    # ``_corrupt_rows.DAMAGES``. It returns the column (document field) a ``CorruptRecord``
    # must name, or None if the backend cannot hold that damage (or has no such rows).
    # Optional, for the seq-collision tests (``_seq_collisions.py``):
    # ``async def move_message(self, store, chat_id, seq, new_seq) -> str | None`` moves the
    # stored row of message ``seq`` to ``new_seq`` (higher) around the store, as a restored
    # backup or a manual insert would put it, leaving the chat's own seq counter alone. It
    # returns "behind" when the backend's counter stayed behind the row (the driver must
    # repair it on the next append and log a WARNING naming the chat), "followed" when the
    # backend itself keeps its counter past every stored seq (the memory service), or None
    # if the backend cannot hold such a row.
    # Optional, for drivers with ``strong_uuid_lookup=False`` (not part of the Protocol's
    # required surface): ``async def lookup_may_miss(self, store, kind, item_id) -> bool``
    # returns True when the driver's index entry for the record is really absent (a lost
    # best-effort write), so the state machine accepts a "not found" only then.
