"""Message operations of ``Store``: append (idempotent), read, update, hide, page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ._content import PreparedMessage, validate_model
from ._errors import Conflict, IdempotencyConflict, InvalidArgument, MessageNotFound
from ._models import Message
from ._paging import DEFAULT_PAGE_LIMIT, MessageFilter, Page, Viewer
from ._plugins import notify_messages_committed
from ._store_chats import ChatOps, page_of

__all__ = ["IMMUTABLE_MESSAGE_FIELDS", "MessageOps"]

IMMUTABLE_MESSAGE_FIELDS = frozenset(
    {
        "message_id",
        "chat_id",
        "agui_id",
        "seq",
        "revision",
        "created_at",
        "updated_at",
        "deleted_at",
        "kind",
        "boundary",
    }
)
"""Fields ``update_message`` refuses to change."""

_CAS_ATTEMPTS = 16

MessageInput = Message | Mapping[str, Any]
"""A message to append: a ``Message`` (or subclass) instance, or a mapping of its fields."""


class MessageOps(ChatOps):
    """Message operations (SPEC section 3, "Ordering and identity", "Pages")."""

    def _coerce_message(self, message: object, chat_id: UUID) -> Message:
        if isinstance(message, Message):
            data = message.model_dump(serialize_as_any=True)  # keep nested subclass fields
        elif isinstance(message, Mapping):
            data = dict(message)
        else:
            msg = f"a message is a Message or a mapping, not {type(message).__name__}"
            raise InvalidArgument(msg)
        data["chat_id"] = chat_id
        for field in ("seq", "updated_at", "deleted_at"):
            data.pop(field, None)
        data["revision"] = 0
        model = type(message) if isinstance(message, Message) else self.message_model
        return validate_model(model, data)

    async def append_message(self, chat_id: UUID, message: MessageInput) -> Message:
        """Append one message; see :meth:`append_messages` for the rules and errors."""
        (stored,) = await self.append_messages(chat_id, [message])
        return stored

    async def append_messages(
        self, chat_id: UUID, messages: Sequence[MessageInput]
    ) -> list[Message]:
        """Append messages in order, all or nothing (SPEC section 3).

        The store assigns each a ``seq`` strictly greater than every earlier one of the chat.
        A message whose ``agui_id`` is already stored in the chat is not stored again: the
        stored message is returned in its place when the payload is equal (ids the store
        generated are not compared), so retries never duplicate. An archived chat is
        restored first.

        Args:
            chat_id: The chat.
            messages: ``Message`` instances (subclasses keep their fields) or mappings.
                ``created_at`` may be given (tz-aware, informational); ``seq`` is ignored.

        Returns:
            The stored messages, aligned with ``messages``.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            IdempotencyConflict: If an ``agui_id`` is stored with a different payload (or
                repeats in the batch with different payloads); nothing is written.
            InvalidContent: If a string holds a lone surrogate; nothing is written.
            PayloadTooLarge: If a message is over ``max_message_bytes``; nothing is written.
            InvalidArgument: If a message does not validate; nothing is written.
            BackendUnavailable: If the backend fails; nothing is written.
        """
        self._require_open()
        prepared = [self.prepare(self._coerce_message(m, chat_id)) for m in messages]
        if not prepared:
            return []
        unique, positions = _dedupe_batch(prepared)
        results = await self._insert_messages(chat_id, unique, self._now())
        if results is None:
            await self._require_hot_chat(chat_id)
            results = await self._insert_messages(chat_id, unique, self._now())
            if results is None:
                raise Conflict(f"chat {chat_id} changed state during the append; try again")
        for item, (stored, created) in zip(unique, results, strict=True):
            if not created and not self._same_payload(stored, item):
                raise IdempotencyConflict(_conflict_text(stored))
        created_messages = [stored for stored, created in results if created]
        if created_messages:
            notify_messages_committed(self, chat_id, created_messages)
        return [results[i][0] for i in positions]

    def _same_payload(self, stored: Message, item: PreparedMessage) -> bool:
        """Whether a retry equals the stored message (SPEC section 3, idempotency).

        The stored copy is read back as ``message_model``; a retry written as another
        ``Message`` class differs from it only by that model's defaults, so it is compared
        after validating it as the stored class.
        """
        stored_fingerprint = self.fingerprint(stored)
        if stored_fingerprint == item.fingerprint:
            return True
        if type(stored) is type(item.message):
            return False
        try:
            as_stored = type(stored).model_validate(item.message.model_dump(serialize_as_any=True))
        except ValueError:
            return False
        return self.fingerprint(as_stored) == stored_fingerprint

    async def get_message(self, message_id: UUID) -> Message:
        """Return a visible message by id (an archived chat holding it is rehydrated).

        Raises:
            MessageNotFound: If it does not exist, is hidden, or its chat is deleted.
        """
        self._require_open()
        message = await self._get_message(message_id)
        if message is None and await self._rehydrate_holder(message_id):
            message = await self._get_message(message_id)
        if message is None:
            raise MessageNotFound(f"no visible message {message_id}")
        return message

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        """Return the chat's visible message with this client id, or ``None``."""
        self._require_open()
        message = await self._get_message_by_agui_id(chat_id, agui_id)
        if message is None and await self._rehydrate_if_archived(chat_id):
            message = await self._get_message_by_agui_id(chat_id, agui_id)
        return message

    async def update_message(self, message_id: UUID, **changes: Any) -> Message:
        """Change fields of a visible message (content, status, in_progress, metadata, ...).

        Concurrent updates are serialized by a compare-and-set on the message's revision,
        retried a bounded number of times.

        Args:
            message_id: The message.
            **changes: New field values; not any of :data:`IMMUTABLE_MESSAGE_FIELDS`.

        Returns:
            The stored message (``revision`` incremented).

        Raises:
            MessageNotFound: If the message is not visible.
            InvalidArgument: If a field is immutable or a value does not validate.
            InvalidContent / PayloadTooLarge: As for appends; nothing is written.
            Conflict: If the message kept changing under concurrent writers.
        """
        frozen = set(changes) & IMMUTABLE_MESSAGE_FIELDS
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a message")
        return await self._rewrite_message(message_id, lambda m: {**m.model_dump(), **changes})

    async def _rewrite_message(self, message_id: UUID, edit: Any) -> Message:
        self._require_open()
        for _ in range(_CAS_ATTEMPTS):
            current = await self.get_message(message_id)
            updated = validate_model(type(current), edit(current))
            stored = await self._replace_message(
                self.prepare(updated), current.revision, self._now()
            )
            if stored is not None:
                return stored
        raise Conflict(f"message {message_id} kept changing under concurrent writers")

    async def delete_messages(self, chat_id: UUID, message_ids: Sequence[UUID]) -> int:
        """Hide single messages (edits, redactions): every read path skips them from now on.

        Returns:
            How many of them were visible before.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
        """
        await self._require_hot_chat(chat_id)
        return await self._hide_messages(chat_id, list(message_ids), self._now())

    async def list_messages(
        self,
        chat_id: UUID,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        message_filter: MessageFilter | None = None,
        viewer: Viewer | None = None,
    ) -> Page[Message]:
        """Return one page of a chat's history, boundaries included.

        The first page is the newest; items run oldest to newest; ``next_cursor`` walks to
        older messages. Keyset on ``seq``: a page 500,000 messages deep costs what the first
        does, and a walk yields every message once even while messages are appended.

        Args:
            chat_id: The chat.
            limit: Messages per page; default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page of the same chat and filter.
            message_filter: Roles, kinds, run, request or block to keep.
            viewer: When given, the chat must be visible to this viewer.

        Raises:
            ChatNotFound: If the chat does not exist, is deleted or is not visible.
            InvalidArgument: If ``limit`` is below 1.
            InvalidCursor: If the cursor is foreign, altered, or for another chat/filter.
        """
        self._require_open()
        message_filter = message_filter or MessageFilter()
        size = self._page_limit(limit)
        scope = _message_scope(chat_id, message_filter)
        before = self._decode_cursor(cursor, scope)
        if viewer is not None:
            await self.get_chat(chat_id, viewer=viewer)
        rows = await self._page_messages(chat_id, message_filter, before, size + 1)
        if rows is None:
            await self._require_hot_chat(chat_id)
            rows = await self._page_messages(chat_id, message_filter, before, size + 1) or []
        page = rows[:size]
        has_more = len(rows) > size
        next_cursor = None
        if has_more:
            assert page[-1].seq is not None
            next_cursor = self._encode_cursor(scope, page[-1].seq)
        return page_of(Message, page[::-1], next_cursor, has_more)

    async def get_last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """Map each live chat of ``chat_ids`` that has a visible message to its newest one.

        One query for any number of chats (a chat list's previews). Deleted or unknown chats
        are left out.
        """
        self._require_open()
        if not chat_ids:
            return {}
        return await self._last_messages(list(dict.fromkeys(chat_ids)))


def _message_scope(chat_id: UUID, message_filter: MessageFilter) -> dict[str, Any]:
    data = message_filter.model_dump(mode="json")
    for key in ("roles", "kinds"):
        if data[key] is not None:
            data[key] = sorted(data[key])
    return {"kind": "messages", "chat_id": str(chat_id), "filter": data}


def _dedupe_batch(
    prepared: list[PreparedMessage],
) -> tuple[list[PreparedMessage], list[int]]:
    """Collapse repeated ``agui_id``s in one batch; return unique items and input positions."""
    unique: list[PreparedMessage] = []
    positions: list[int] = []
    seen: dict[str, int] = {}
    for item in prepared:
        agui_id = item.message.agui_id
        if agui_id is not None and agui_id in seen:
            first = unique[seen[agui_id]]
            if first.fingerprint != item.fingerprint:
                msg = f"agui_id {agui_id!r} appears twice in the batch with different payloads"
                raise IdempotencyConflict(msg)
            positions.append(seen[agui_id])
            continue
        if agui_id is not None:
            seen[agui_id] = len(unique)
        positions.append(len(unique))
        unique.append(item)
    return unique, positions


def _conflict_text(stored: Message) -> str:
    return (
        f"agui_id {stored.agui_id!r} is already stored in chat {stored.chat_id} "
        f"(message {stored.message_id}, seq {stored.seq}) with a different payload; "
        "use a new agui_id, or update_message to change it"
    )
