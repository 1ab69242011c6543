"""Message operations of ``Store``: append (idempotent), read, update, hide, page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ._boundary_rules import boundary_cut, check_compactions, is_compaction
from ._content import PreparedMessage, validate_model
from ._corrupt import collecting, window
from ._errors import (
    CapabilityNotSupported,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    MessageNotFound,
)
from ._models import Message, MessageInput
from ._paging import DEFAULT_PAGE_LIMIT, MessageFilter, Page, Viewer
from ._plugins import notify_messages_committed
from ._store_args import as_id, as_ids, as_items, as_model, as_str
from ._store_chats import ChatOps, _seq, page_of

__all__ = ["IMMUTABLE_MESSAGE_FIELDS", "MessageInput", "MessageOps"]

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

    def _prepare_batch(
        self, chat_id: UUID, messages: Sequence[MessageInput]
    ) -> list[PreparedMessage]:
        items = as_items(messages, "messages")
        return [self.prepare(self._coerce_message(m, chat_id)) for m in items]

    async def append_message(self, chat_id: UUID | str, message: MessageInput) -> Message:
        """Append one message; :meth:`append_messages` with a batch of one.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            message: A ``Message`` (or subclass) or a mapping of its fields
                (:data:`threadkeep.typing.MessageInput`).

        Returns:
            The stored message (``seq``, ``revision``, timestamps set), or the message
            already stored under its ``agui_id`` when the payload is equal.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            IdempotencyConflict: If its ``agui_id`` is stored with a different payload.
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            PayloadTooLarge: If it is over ``max_message_bytes`` (payload, UTF-8 bytes) or
                its other fields over 1 MiB of JSON; nothing is written.
            InvalidArgument: If ``chat_id`` is not an id, the message does not validate,
                or it is a compaction boundary that breaks ``compact``'s rules (see
                :meth:`append_messages`).
            BackendUnavailable: If the backend fails; nothing is written.
        """
        (stored,) = await self.append_messages(chat_id, [message])
        return stored

    async def append_messages(
        self, chat_id: UUID | str, messages: Sequence[MessageInput]
    ) -> list[Message]:
        """Append messages in order, all or nothing (SPEC section 3).

        The store assigns each a ``seq`` strictly greater than every earlier one of the chat.
        A message whose ``agui_id`` is already stored in the chat is not stored again: the
        stored message is returned in its place when the payload is equal (ids the store
        generated are not compared), so retries never duplicate. An archived chat is
        restored first.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            messages: A list or tuple of ``Message`` instances (subclasses keep their
                fields) or mappings. ``created_at`` may be given (tz-aware,
                informational); ``seq`` is ignored. The payload of each (content, tool-call
                arguments and results, reasoning) is at most ``max_message_bytes`` UTF-8
                bytes (default 16 MiB); everything else at most 1 MiB of JSON.

        Returns:
            The stored messages, aligned with ``messages``.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            IdempotencyConflict: If an ``agui_id`` is stored with a different payload (or
                repeats in the batch with different payloads); nothing is written.
            InvalidContent: If a string holds a lone surrogate, or a float is NaN or
                infinite; nothing is written.
            PayloadTooLarge: If a message is over the limits above; nothing is written.
            InvalidArgument: If ``chat_id`` is not an id, ``messages`` is not a list, a
                message does not validate, or a compaction boundary breaks ``compact``'s
                rules (its ``upto_seq`` is missing, below the current cut, or beyond the
                newest seq stored before the batch; a retry of a stored boundary is
                a retry, not held to them); nothing is written.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails; nothing is written.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        prepared = self._prepare_batch(chat_id, messages)
        if not prepared:
            return []
        await self._check_compactions(chat_id, prepared)
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

    async def _check_compactions(self, chat_id: UUID, prepared: list[PreparedMessage]) -> None:
        """Hold compaction boundaries in the batch to ``compact``'s rules (no-op without one).

        Raises:
            InvalidArgument: See :func:`check_compactions`.
            ChatNotFound: If the chat does not exist or is deleted.
        """
        batch = [item.message for item in prepared]
        if not any(is_compaction(message) for message in batch):
            return
        page = await self.list_messages(chat_id, limit=1)
        newest = page.items[-1].seq if page.items else None
        last = await self._last_boundary(chat_id)
        cut = 0 if last is None else boundary_cut(last)
        try:
            check_compactions(chat_id, batch, newest, cut)
        except InvalidArgument:
            # A retry of a stored boundary is not held to the rules (it writes nothing):
            # look for stored agui_ids only now, on the rare refused path.
            wanted = {m.agui_id for m in batch if is_compaction(m) and m.agui_id is not None}
            retries = await self._stored_agui_ids(chat_id, wanted)
            if not retries:
                raise
            check_compactions(chat_id, batch, newest, cut, retries)

    async def _stored_agui_ids(self, chat_id: UUID, agui_ids: set[str]) -> frozenset[str]:
        """Return which of ``agui_ids`` the chat stores, visible or hidden.

        Hidden messages are found with the archive scan where the driver has it.
        """
        found = set()
        for agui_id in agui_ids:
            if await self._get_message_by_agui_id(chat_id, agui_id) is not None:
                found.add(agui_id)
        missing = agui_ids - found
        after = 0
        try:
            while missing and (batch := await self._scan_messages(chat_id, after, 500)):
                found |= missing & {m.agui_id for m in batch}
                missing -= found
                after = batch[-1].seq or after
        except CapabilityNotSupported:
            pass  # no scan: a hidden stored boundary is checked like a new one
        return frozenset(found)

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

    async def get_message(self, message_id: UUID | str) -> Message:
        """Return a visible message by id (an archived chat holding it is rehydrated).

        Args:
            message_id: The message (a ``UUID`` or its text form).

        Returns:
            The message, as the store's ``message_model``.

        Raises:
            MessageNotFound: If it does not exist, is hidden, or its chat is deleted.
            InvalidArgument: If ``message_id`` is not an id.
            ArchiveError / ArchiveIntegrityError: If its archived chat cannot be read back.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        message_id = as_id(message_id, "message_id")
        message = await self._get_message(message_id)
        if message is None and await self._rehydrate_holder(message_id):
            message = await self._get_message(message_id)
        if message is None:
            raise MessageNotFound(f"no visible message {message_id}")
        return message

    async def get_message_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Message | None:
        """Return the chat's visible message with this client id, or ``None``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            agui_id: The client's message id, for example the AG-UI id.

        Returns:
            The message, or ``None`` if the chat holds no visible message with that id
            (also when the chat does not exist or is deleted).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``agui_id`` is not a ``str``.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        agui_id = as_str(agui_id, "agui_id")
        message = await self._get_message_by_agui_id(chat_id, agui_id)
        if message is None and await self._rehydrate_if_archived(chat_id):
            message = await self._get_message_by_agui_id(chat_id, agui_id)
        return message

    async def update_message(self, message_id: UUID | str, /, **changes: Any) -> Message:
        """Change fields of a visible message (content, status, in_progress, metadata, ...).

        Concurrent updates are serialized by a compare-and-set on the message's revision,
        retried a bounded number of times.

        Args:
            message_id: The message (a ``UUID`` or its text form).
            **changes: New field values; not any of :data:`IMMUTABLE_MESSAGE_FIELDS`.

        Returns:
            The stored message (``revision`` incremented).

        Raises:
            MessageNotFound: If the message is not visible.
            InvalidArgument: If ``message_id`` is not an id, a field is immutable or a
                value does not validate.
            InvalidContent / PayloadTooLarge: As for appends; nothing is written.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        message_id = as_id(message_id, "message_id")
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

    async def delete_messages(self, chat_id: UUID | str, message_ids: Sequence[UUID | str]) -> int:
        """Hide single messages (edits, redactions): every read path skips them from now on.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            message_ids: A list of message ids (``UUID`` or text each); ids of other chats,
                unknown or already hidden ones are skipped.

        Returns:
            How many of them were visible before (a count).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If an id is malformed or ``message_ids`` is not a list.
            BackendUnavailable: If the backend fails.
        """
        chat_id = as_id(chat_id, "chat_id")
        ids = as_ids(message_ids, "message_ids")
        await self._require_hot_chat(chat_id)
        return await self._hide_messages(chat_id, ids, self._now())

    async def list_messages(
        self,
        chat_id: UUID | str,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        message_filter: MessageFilter | Mapping[str, Any] | None = None,
        viewer: Viewer | Mapping[str, Any] | None = None,
    ) -> Page[Message]:
        """Return one page of a chat's history, boundaries included.

        The first page is the newest; items run oldest to newest; ``next_cursor`` walks to
        older messages. Keyset on ``seq``: a page 500,000 messages deep costs what the first
        does, and a walk yields every message once even while messages are appended.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            limit: Messages per page (count); default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page of the same chat and filter.
            message_filter: Roles, kinds, run, request or block to keep: a
                :class:`MessageFilter` or a mapping of its fields.
            viewer: When given (a :class:`Viewer` or a mapping), the chat must be visible
                to this viewer.

        Returns:
            ``Page[Message]``: ``items`` oldest to newest, ``next_cursor`` to older ones,
            ``has_more``.

        Raises:
            ChatNotFound: If the chat does not exist, is deleted or is not visible.
            InvalidArgument: If ``chat_id`` is not an id, ``limit`` is not an integer of
                at least 1, or the filter or viewer does not validate.
            InvalidCursor: If the cursor is foreign, altered, or for another chat/filter.
            CorruptRecord: If a row of the page is damaged (on a ``corrupt_records="skip"``
                store the page leaves it out and lists it in ``Page.corrupt`` instead).
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        chat_id = as_id(chat_id, "chat_id")
        message_filter = (
            MessageFilter()
            if message_filter is None
            else as_model(MessageFilter, message_filter, "message_filter")
        )
        size = self._page_limit(limit)
        scope = _message_scope(chat_id, message_filter)
        before = self._decode_cursor(cursor, scope)
        if viewer is not None:
            await self.get_chat(chat_id, viewer=viewer)
        with collecting(self.corrupt_records) as skipped:
            rows = await self._page_messages(chat_id, message_filter, before, size + 1)
            if rows is None:
                await self._require_hot_chat(chat_id)
                rows = await self._page_messages(chat_id, message_filter, before, size + 1)
        page, corrupt, has_more, last = window(rows or [], skipped, size, _seq)
        next_cursor = None
        if has_more:
            assert last is not None
            next_cursor = self._encode_cursor(scope, last)
        return page_of(Message, page[::-1], next_cursor, has_more, corrupt)

    async def get_last_messages(self, chat_ids: Sequence[UUID | str]) -> dict[UUID, Message]:
        """Map each hot chat of ``chat_ids`` that has a visible message to its newest one.

        One query for any number of chats (a chat list's previews). Deleted, unknown and
        archived chats are left out: an archived chat's messages are in the archive, and
        rehydrating every listed chat to show one preview would undo archiving (see
        ``docs/archive.md``). Read an archived chat with :meth:`list_messages`, which
        brings it back.

        Args:
            chat_ids: A list of chat ids (``UUID`` or text each); repeats are read once.

        Returns:
            ``{chat_id (UUID): newest visible message}``, for hot chats only.

        Raises:
            InvalidArgument: If ``chat_ids`` is not a list or an id is malformed.
            BackendUnavailable: If the backend fails.
        """
        self._require_open()
        ids = as_ids(chat_ids, "chat_ids")
        if not ids:
            return {}
        with collecting(self.corrupt_records):  # "skip": a damaged preview is left out
            return await self._last_messages(list(dict.fromkeys(ids)))


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
