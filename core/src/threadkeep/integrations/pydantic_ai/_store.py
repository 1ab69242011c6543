"""``ThreadkeepConversationStore``: Pydantic AI's ``ConversationStore`` on any threadkeep store.

Pydantic AI keeps a conversation as a log of entries (one message each, pointing at the entry
before it, shared by forks) and a record (the newest entry, usage, deferred tool requests,
scope, branches, a revision that changes on every save). The five storage primitives its
``ConversationStore`` asks a backend for map onto threadkeep as:

- the entries of every conversation are messages of one entries chat
  (``(user_id, "<namespace>/entries")``, channel :data:`CHANNEL`), each found by its entry id
  (the message's ``agui_id``), its JSON in ``content``: forks point at entries of the
  conversation they forked, so one chat holds them all;
- a conversation is the chat ``(user_id, "<namespace>/conversation/<conversation_id>")``; each
  save appends one message holding the record's JSON, and the newest one is the record;
- a save is a compare-and-set: the record is appended, then the record just before it must be
  the revision the save expected (none for a new conversation); otherwise the new record is
  taken back and ``ConversationConflict`` raised, so of concurrent savers exactly one wins;
- ``delete_record`` is a compare-and-set too: it appends a deletion marker expecting the
  revision, and deletes the conversation's chat only if the marker won as a save wins (a
  threadkeep soft delete; ``purge`` removes it for good); of a save and a delete expecting one
  revision exactly one succeeds. Entries are kept: a fork's or a concurrent save's history may
  reach them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest
from typing_extensions import override

from threadkeep import MAX_PAGE_LIMIT, Chat, ChatNotFound, InvalidArgument, Message, Role, Store

from .._backend import StoreHandle, StoreSource

__all__ = ["CHANNEL", "ThreadkeepConversationStore"]

_BASED_ON = "based_on"
"""Metadata key of a record message: the revision its save expected (``None``: a new one)."""

_DELETES = "deletes"
"""Metadata key (``True``) of a deletion marker: a record message of ``delete_record``."""

CHANNEL = "pydantic-ai-conversations"
"""The channel of the chats a :class:`ThreadkeepConversationStore` keeps."""


class _Envelope(BaseModel):
    """A record, serialised with bytes as base64 (Pydantic AI's own message adapter's rule)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
    record: ConversationRecord


def _record_json(record: ConversationRecord) -> str:
    return json.dumps(_Envelope(record=record).model_dump(mode="json")["record"])


def _entry_json(entry: ConversationEntry) -> str:
    message = ModelMessagesTypeAdapter.dump_python([entry.message], mode="json")[0]
    return json.dumps(
        {"id": entry.id, "parent_id": entry.parent_id, "kind": entry.kind, "message": message}
    )


def _entry_of(message: Message) -> ConversationEntry:
    data = json.loads(message.content or "{}")
    (model_message,) = ModelMessagesTypeAdapter.validate_json(json.dumps([data["message"]]))
    return ConversationEntry(id=data["id"], parent_id=data["parent_id"], message=model_message)


def _record_of(message: Message) -> ConversationRecord:
    return _Envelope.model_validate({"record": json.loads(message.content or "{}")}).record


class ThreadkeepConversationStore(ConversationStore):
    """Pydantic AI conversations (records, entries, branches, forks) in a threadkeep store.

    ::

        store = ThreadkeepConversationStore("sqlite+aiosqlite:///./chats.db")
        conversation = await store.load(cid) or Conversation(conversation_id=cid)
        result = await agent.run(prompt, conversation=conversation)
        await store.save(result)

    Args:
        store: A store URL (one shared sync store per URL), a ``threadkeep.sync`` store, or an
            async ``threadkeep.Store`` used on the caller's loop.
        user_id: The owner of the store's chats (default ``"pydantic-ai"``); Pydantic AI's
            ``scope`` is kept in each record, as its ``InMemoryConversationStore`` keeps it.
        namespace: Prefix of the chats' thread ids (default ``"pydantic-ai"``): two stores with
            different namespaces on one threadkeep store never see each other's conversations.
        **options: Driver options, with a URL only.

    Raises:
        InvalidArgument: If ``user_id`` or ``namespace`` is empty, or ``store`` is not a store
            or URL.

    Besides ``ConversationConflict`` and ``UserError`` as ``ConversationStore`` documents, every
    method raises the store's typed errors (``BackendUnavailable``, ``InvalidContent``...).
    """

    def __init__(
        self,
        store: StoreSource,
        *,
        user_id: str = "pydantic-ai",
        namespace: str = "pydantic-ai",
        **options: Any,
    ) -> None:
        for name, value in (("user_id", user_id), ("namespace", namespace)):
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"{name} must be a non-empty string")
        self._handle = StoreHandle(store, **options)
        self._user_id = user_id
        self._namespace = namespace

    def _thread(self, conversation_id: str) -> str:
        return f"{self._namespace}/conversation/{conversation_id}"

    async def _entries_chat(self, store: Store) -> Chat:
        return await store.create_chat(self._user_id, f"{self._namespace}/entries", channel=CHANNEL)

    # -- the five storage primitives ----------------------------------------------------------

    @override
    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """Return the conversation's newest record, or ``None`` if the store has none."""

        async def read(store: Store) -> ConversationRecord | None:
            return await self._current(store, conversation_id)

        return await self._handle.run(read)

    @override
    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """Return the records (of ``scope`` if given), newest ``updated_at`` first, up to ``limit``.

        Reads the newest message of every conversation chat, 200 chats a page.
        """

        async def read(store: Store) -> list[ConversationRecord]:
            records: list[ConversationRecord] = []
            prefix = f"{self._namespace}/conversation/"
            cursor: str | None = None
            while True:
                page = await store.list_chats(
                    {"user_id": self._user_id, "channel": CHANNEL},
                    limit=MAX_PAGE_LIMIT,
                    cursor=cursor,
                )
                ids = [c.chat_id for c in page.items if c.thread_id.startswith(prefix)]
                newest = await store.get_last_messages(ids) if ids else {}
                records.extend(_record_of(m) for m in newest.values() if not _deletes(m))
                if not page.has_more:
                    break
                cursor = page.next_cursor
            kept = [r for r in records if scope is None or r.scope == scope]
            kept.sort(key=lambda r: r.updated_at, reverse=True)
            return kept[:limit]

        return await self._handle.run(read)

    @override
    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store ``new_entries`` and ``record`` if the stored revision is ``expected_revision``.

        Raises:
            ConversationConflict: If the stored record's revision is not ``expected_revision``
                (a record exists when it is ``None``), or ``record.head_id`` is an entry neither
                the store nor ``new_entries`` has.
        """

        async def write(store: Store) -> None:
            entries = await self._entries_chat(store)
            new_ids = {entry.id for entry in new_entries}
            head = record.head_id
            if (
                head is not None
                and head not in new_ids
                and await store.get_message_by_agui_id(entries.chat_id, head) is None
            ):
                raise ConversationConflict(record.conversation_id)
            if _revision(await self._current(store, record.conversation_id)) != expected_revision:
                raise ConversationConflict(record.conversation_id)
            if new_entries:
                await store.append_messages(
                    entries.chat_id,
                    [
                        {"role": _role(entry), "content": _entry_json(entry), "agui_id": entry.id}
                        for entry in new_entries
                    ],
                )
            chat = await store.create_chat(
                self._user_id, self._thread(record.conversation_id), channel=CHANNEL
            )
            with _deleted_is_conflict(record.conversation_id):  # a delete came in between
                (mine,) = await store.append_messages(
                    chat.chat_id,
                    [
                        {
                            "role": Role.SYSTEM,
                            "content": _record_json(record),
                            "metadata": {_BASED_ON: expected_revision},
                        }
                    ],
                )
                accepted = await _accepted(store, chat.chat_id)
                if mine.message_id not in {m.message_id for m in accepted}:
                    # Another save landed first: take this record back (its entries stay).
                    await store.delete_messages(chat.chat_id, [mine.message_id])
                    raise ConversationConflict(record.conversation_id)

        await self._handle.run(write)

    @override
    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation's chat if its record's revision is ``expected_revision``.

        Its entries are kept (a fork's history may reach them).

        Raises:
            ConversationConflict: If no record with ``expected_revision`` is stored.
        """

        async def delete(store: Store) -> None:
            chat = await store.find_chat(self._user_id, self._thread(conversation_id))
            if chat is None:
                raise ConversationConflict(conversation_id)
            with _deleted_is_conflict(conversation_id):  # another delete came in between
                accepted = await _accepted(store, chat.chat_id)
                if not accepted or _revision_of(accepted[-1]) != expected_revision:
                    raise ConversationConflict(conversation_id)
                marker = {_BASED_ON: expected_revision, _DELETES: True}
                (mine,) = await store.append_messages(
                    chat.chat_id, [{"role": Role.SYSTEM, "content": "deleted", "metadata": marker}]
                )
                accepted = await _accepted(store, chat.chat_id)
                if mine.message_id not in {m.message_id for m in accepted}:
                    # A save landed first: take the marker back, the conversation stays.
                    await store.delete_messages(chat.chat_id, [mine.message_id])
                    raise ConversationConflict(conversation_id)
                await store.delete_chat(chat.chat_id)

        await self._handle.run(delete)

    @override
    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """Return the entry with this id.

        Raises:
            KeyError: If the store has no such entry (a ``LookupError``, as the base expects).
        """

        async def read(store: Store) -> ConversationEntry:
            entries = await self._entries_chat(store)
            message = await store.get_message_by_agui_id(entries.chat_id, entry_id)
            if message is None:
                raise KeyError(entry_id)
            return _entry_of(message)

        return await self._handle.run(read)

    @override
    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """Return the entries from the first up to ``head_id``, in order (the last ``limit``).

        One store call for the whole walk (an indexed lookup per entry) instead of one per entry.

        Raises:
            KeyError: If an entry of the walk is not in the store (a ``LookupError``).
        """

        async def walk(store: Store) -> list[ConversationEntry]:
            chat = await self._entries_chat(store)
            entries: list[ConversationEntry] = []
            entry_id = head_id
            while entry_id is not None and (limit is None or len(entries) < limit):
                message = await store.get_message_by_agui_id(chat.chat_id, entry_id)
                if message is None:
                    raise KeyError(entry_id)
                entry = _entry_of(message)
                entries.append(entry)
                entry_id = entry.parent_id
            entries.reverse()
            return entries

        return await self._handle.run(walk)

    async def _current(self, store: Store, conversation_id: str) -> ConversationRecord | None:
        """The conversation's record: the newest accepted one (:func:`_accepted`)."""
        chat = await store.find_chat(self._user_id, self._thread(conversation_id))
        if chat is None:
            return None
        try:
            accepted = await _accepted(store, chat.chat_id)
        except ChatNotFound:  # deleted since it was found
            return None
        if not accepted or _deletes(accepted[-1]):  # none, or being deleted
            return None
        return _record_of(accepted[-1])


def _role(entry: ConversationEntry) -> Role:
    return Role.USER if isinstance(entry.message, ModelRequest) else Role.ASSISTANT


def _revision(record: ConversationRecord | None) -> str | None:
    return record.revision if record is not None else None


@contextmanager
def _deleted_is_conflict(conversation_id: str) -> Iterator[None]:
    """Raise ``ConversationConflict`` for the conversation's chat deleted under a save or delete.

    A concurrent ``delete_record`` that won deletes the chat between this call's read and its
    write (``ChatNotFound`` from the store): the conversation was deleted since it was read.
    """
    try:
        yield
    except ChatNotFound as exc:
        raise ConversationConflict(conversation_id) from exc


def _deletes(message: Message) -> bool:
    """Whether a record message is a deletion marker (:data:`_DELETES`)."""
    return (message.metadata or {}).get(_DELETES) is True


def _revision_of(message: Message) -> str:
    """The revision a record message makes current (a deletion marker's: none a save expects)."""
    return f"deleted:{message.message_id}" if _deletes(message) else _record_of(message).revision


async def _accepted(store: Store, chat_id: UUID) -> list[Message]:
    """The record messages of the conversation that won their save, oldest first.

    Each record message names the revision its save expected (:data:`_BASED_ON`). A record is
    accepted when that is the revision of the accepted record before it (``None`` for the
    first), so of saves (and deletion markers) expecting one revision, the first stored wins,
    and a save built on a record that lost (read in the instant before it was taken back)
    loses too. Only the newest page (200 records) is read: its oldest record is taken as
    accepted when older ones exist (a losing record is taken back at once, so one that old
    is a winner).
    """
    page = await store.list_messages(chat_id, limit=MAX_PAGE_LIMIT)
    accepted: list[Message] = []
    last: str | None = None
    for index, message in enumerate(page.items):
        based_on = (message.metadata or {}).get(_BASED_ON)
        if based_on == last or (index == 0 and page.has_more):
            accepted.append(message)
            last = _revision_of(message)
    return accepted
