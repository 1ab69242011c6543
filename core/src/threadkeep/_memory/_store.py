"""``MemoryDriver``: the in-memory reference driver (``memory://`` and ``memory://NAME``)."""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from .._batch import resolve_batch
from .._capabilities import Capabilities
from .._content import PreparedMessage
from .._corrupt import skip_damaged
from .._dedup import chat_deduplication_key
from .._driver import NestedKind
from .._driver_base import DriverBase
from .._errors import Conflict
from .._filters import chat_matches, message_matches
from .._models import Chat, ChatStatus, Message
from .._open import store_for
from .._paging import ChatFilter, MessageFilter
from .._store import Store
from ._runs import MemoryRunsMixin
from ._state import ChatRow, MemoryState, MessageRow, named_state

__all__ = ["MemoryDriver", "MemoryStore"]

_log = logging.getLogger("threadkeep.memory")


class MemoryDriver(MemoryRunsMixin, DriverBase):
    """The reference driver: every rule of the contract, in plain Python dicts.

    ``memory://`` is a private store that lives as long as the object; ``memory://NAME`` is
    shared by every store opened with that URL in this process and survives close/reopen.
    Not shared between processes.
    """

    schemes: ClassVar[tuple[str, ...]] = ("memory",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        transactions=True,
        steps=True,
        archive=True,
        persistent=True,
        concurrent_processes=False,
        notes={"persistent": "within one process, for named stores (memory://NAME)"},
    )

    def __init__(self, url: str = "memory://", **options: Any) -> None:
        super().__init__(url, **options)
        name = url.partition("://")[2].strip("/")
        self._state = named_state(name) if name else MemoryState()

    # -- lifecycle -----------------------------------------------------------------------

    async def _load_secret(self, candidate: bytes) -> bytes:
        with self._state.lock:
            if self._state.secret is None:
                self._state.secret = candidate
            return self._state.secret

    # -- chats ---------------------------------------------------------------------------

    def _chat(self, row: ChatRow) -> Chat:
        return self.record_from_body(
            self.chat_model,
            row.body,
            seq=row.seq,
            revision=row.revision,
            last_message_at=row.last_message_at,
            updated_at=row.updated_at,
        )

    async def insert_chat(self, chat: Chat) -> Chat:
        await asyncio.sleep(0)
        state = self._state
        with state.lock:
            key = chat.dedup_key
            if key in state.live_keys:
                return self._chat(state.chats[state.live_keys[key]])
            if chat.chat_id in state.chats:  # as a SQL or MongoDB primary key refuses it
                raise Conflict(f"a chat with the chat_id {chat.chat_id} already exists")
            state.chat_seq += 1
            row = ChatRow(
                body=self.record_body(chat),
                user_id=chat.user_id,
                thread_id=chat.thread_id,
                seq=state.chat_seq,
                last_message_at=chat.last_message_at,
                updated_at=chat.updated_at,
            )
            state.chats[chat.chat_id] = row
            state.live_keys[key] = chat.chat_id
            return self._chat(row)

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        with self._state.lock:
            row = self._state.chats.get(chat_id)
            return None if row is None else self._chat(row)

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        key = chat_deduplication_key(user_id, thread_id, tenant_id)
        with self._state.lock:
            chat_id = self._state.live_keys.get(key)
            return None if chat_id is None else self._chat(self._state.chats[chat_id])

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        await asyncio.sleep(0)
        state = self._state
        with state.lock:
            row = state.chats.get(chat.chat_id)
            if row is None or (expected_revision is not None and row.revision != expected_revision):
                return None
            key = chat.dedup_key  # tenant, user and thread never change
            deleted = chat.deleted_at is not None
            if row.deleted and not deleted and key in state.live_keys:
                raise Conflict(
                    f"another live chat holds ({row.user_id!r}, {row.thread_id!r}); "
                    "delete it before restoring this one"
                )
            if deleted:
                state.live_keys.pop(key, None) if state.live_keys.get(key) == chat.chat_id else None
            else:
                state.live_keys[key] = chat.chat_id
            row.body, row.updated_at = self.record_body(chat), chat.updated_at
            row.deleted, row.archived = deleted, chat.status is ChatStatus.ARCHIVED
            row.revision += 1
            return self._chat(row)

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        with self._state.lock:
            rows = sorted(self._state.chats.values(), key=lambda r: r.seq, reverse=True)
            found: list[Chat] = []
            for row in rows:
                if before_seq is not None and row.seq >= before_seq:
                    continue
                chat = skip_damaged(self._chat, row)
                if chat is not None and chat_matches(chat_filter, chat):
                    found.append(chat)
                    if len(found) == limit:
                        break
            return found

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        state = self._state
        with state.lock:
            row = state.chats.pop(chat_id, None)
            if row is None:
                return {"chats": 0, "messages": 0, "steps": 0, "runs": 0, "archived_ids": 0}
            # The key is the chat's dedup key (tenant included); purges are rare, so a scan.
            held = [key for key, holder in state.live_keys.items() if holder == chat_id]
            for key in held:
                del state.live_keys[key]
            for message in row.messages.values():
                self._unindex(message)
            steps = [s for s, step in state.steps.items() if step.chat_id == chat_id]
            for step_id in steps:
                del state.steps[step_id]
            runs = [k for k in state.runs if k[0] == chat_id]
            for run_key in runs:
                del state.runs[run_key]
            indexed = [i for i, owner in state.archived_ids.items() if owner == chat_id]
            for item_id in indexed:
                del state.archived_ids[item_id]
            counts = {"chats": 1, "messages": len(row.messages), "steps": len(steps)}
            return counts | {"runs": len(runs), "archived_ids": len(indexed)}

    # -- messages ------------------------------------------------------------------------

    def _message(self, row: MessageRow) -> Message:
        return self.message_from_row(
            row.body,
            chat_id=row.chat_id,
            seq=row.seq,
            revision=row.revision,
            created_at=row.created_at,
            updated_at=row.updated_at,
            deleted_at=row.deleted_at,
        )

    def _hot_row(self, chat_id: UUID) -> ChatRow | None:
        row = self._state.chats.get(chat_id)
        if row is None or row.deleted or row.archived:
            return None
        return row

    def _index(self, row: MessageRow) -> None:
        self._state.message_index[row.message_id] = (row.chat_id, row.seq)
        if row.agui_id is not None:
            self._state.agui_index[(row.chat_id, row.agui_id)] = row.seq

    def _unindex(self, row: MessageRow) -> None:
        self._state.message_index.pop(row.message_id, None)
        if row.agui_id is not None:
            self._state.agui_index.pop((row.chat_id, row.agui_id), None)

    def _new_row(self, chat_id: UUID, seq: int, item: PreparedMessage, now: datetime) -> MessageRow:
        message = item.message
        return MessageRow(
            body=item.body,
            chat_id=chat_id,
            seq=seq,
            message_id=message.message_id,
            agui_id=message.agui_id,
            fingerprint=item.fingerprint,
            revision=0,
            created_at=message.created_at or now,
            updated_at=now,
            run_id=message.run_id,
            **_nested_keys(message),
        )

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        await asyncio.sleep(0)
        with self._state.lock:
            if self._hot_row(chat_id) is None:
                return None
            return self._insert_locked(chat_id, messages, now)

    def _insert_locked(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]]:
        """``insert_messages`` for a hot chat, the lock held; raises before writing."""
        state = self._state
        chat = state.chats[chat_id]
        if chat.seqs and chat.seqs[-1] >= chat.next_seq:
            # A row written around the store sits in the way of the next seq: writing there
            # would overwrite it. Repair the counter from the highest stored seq (issue 12).
            _log.warning(
                "threadkeep: chat %s stores seq %d at or above its next seq %d (a row "
                "written outside threadkeep); next seq repaired to %d",
                chat_id,
                chat.seqs[-1],
                chat.next_seq,
                chat.seqs[-1] + 1,
                extra={"chat_id": str(chat_id), "stored_seq": chat.seqs[-1]},
            )
            chat.next_seq = chat.seqs[-1] + 1

        def stored(agui_id: str) -> tuple[str, MessageRow] | None:
            seq = state.agui_index.get((chat_id, agui_id))
            row = chat.messages.get(seq) if seq is not None else None
            return None if row is None else (row.fingerprint, row)

        results: list[tuple[MessageRow, bool]] = []
        for item, existing in zip(messages, resolve_batch(chat_id, messages, stored), strict=True):
            if existing is not None:
                results.append((existing, False))
            else:
                results.append(
                    (self._new_row(chat_id, chat.next_seq + len(results), item, now), True)
                )
        created = [row for row, is_new in results if is_new]
        for row in created:
            chat.add(row)
            self._index(row)
        if created:
            chat.last_message_at = chat.updated_at = now
            chat.revision += 1
        return [(self._message(row), is_new) for row, is_new in results]

    def _visible(self, message_id: UUID) -> MessageRow | None:
        location = self._state.message_index.get(message_id)
        if location is None:
            return None
        chat = self._state.chats.get(location[0])
        if chat is None or chat.deleted:
            return None
        row = chat.messages.get(location[1])
        return None if row is None or row.deleted_at is not None else row

    async def get_message(self, message_id: UUID) -> Message | None:
        with self._state.lock:
            row = self._visible(message_id)
            return None if row is None else self._message(row)

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        with self._state.lock:
            seq = self._state.agui_index.get((chat_id, agui_id))
            chat = self._state.chats.get(chat_id)
            if seq is None or chat is None or chat.deleted:
                return None
            row = chat.messages.get(seq)
            return None if row is None or row.deleted_at is not None else self._message(row)

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        await asyncio.sleep(0)
        with self._state.lock:
            row = self._visible(prepared.message.message_id)
            if row is None or row.revision != expected_revision:
                return None
            row.body, row.fingerprint = prepared.body, prepared.fingerprint
            row.revision, row.updated_at = expected_revision + 1, now
            row.run_id = prepared.message.run_id
            for key, value in _nested_keys(prepared.message).items():
                setattr(row, key, value)
            self._state.chats[row.chat_id].revision += 1
            return self._message(row)

    def _rows_desc(self, chat: ChatRow, before_seq: int | None) -> list[MessageRow]:
        seqs = chat.seqs
        if before_seq is not None:
            seqs = seqs[: bisect.bisect_left(seqs, before_seq)]
        return [chat.messages[s] for s in reversed(seqs)]

    async def page_messages(
        self, chat_id: UUID, message_filter: MessageFilter, before_seq: int | None, limit: int
    ) -> list[Message] | None:
        with self._state.lock:
            chat = self._hot_row(chat_id)
            if chat is None:
                return None
            found: list[Message] = []
            for row in self._rows_desc(chat, before_seq):
                if row.deleted_at is None:
                    message = skip_damaged(self._message, row)
                    if message is not None and message_matches(message_filter, message):
                        found.append(message)
                        if len(found) == limit:
                            break
            return found

    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        return await self.scan_messages(chat_id, after_seq, limit, hidden=False)

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        with self._state.lock:
            hidden = 0
            for message_id in message_ids:
                row = self._visible(message_id)
                if row is not None and row.chat_id == chat_id:
                    row.deleted_at, row.updated_at = now, now
                    row.revision += 1
                    hidden += 1
            if hidden:
                self._state.chats[chat_id].revision += 1
            return hidden

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        with self._state.lock:
            for chat in self._state.chats.values():
                if chat.deleted:
                    continue
                for row in chat.messages.values():
                    ids = row.tool_call_ids if kind == "tool_call" else row.reasoning_ids
                    if item_id in ids and row.deleted_at is None:
                        return self._message(row)
            return None

    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        with self._state.lock:
            chat = self._hot_row(chat_id)
            if chat is None:
                return None
            for row in self._rows_desc(chat, None):
                aguis = row.tool_call_aguis if kind == "tool_call" else row.reasoning_aguis
                if agui_id in aguis and row.deleted_at is None:
                    return self._message(row)
            return None

    # -- archive support -----------------------------------------------------------------

    async def scan_messages(
        self, chat_id: UUID, after_seq: int, limit: int, *, hidden: bool = True
    ) -> list[Message]:
        with self._state.lock:
            chat = self._state.chats.get(chat_id)
            if chat is None or (chat.deleted and not hidden):
                return []
            start = bisect.bisect_right(chat.seqs, after_seq)
            found: list[Message] = []
            for seq in chat.seqs[start:]:
                row = chat.messages[seq]
                if hidden or row.deleted_at is None:
                    message = skip_damaged(self._message, row)
                    if message is not None:
                        found.append(message)
                    if len(found) == limit:
                        break
            return found

    async def delete_hot_messages(self, chat_id: UUID) -> int:
        with self._state.lock:
            return self._drop_messages(chat_id)

    def _drop_messages(self, chat_id: UUID) -> int:
        chat = self._state.chats.get(chat_id)
        if chat is None:
            return 0
        for row in chat.messages.values():
            self._unindex(row)
        count = len(chat.messages)
        chat.messages.clear()
        chat.seqs.clear()
        return count

    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        state = self._state
        with state.lock:
            chat = state.chats.get(chat_id)
            if chat is None or not chat.archived or chat.revision != expected_revision:
                return None
            doomed = [k for k, r in state.steps.items() if r.chat_id == chat_id]
            for key in doomed:
                del state.steps[key]
            chat.revision += 1
            return {"messages": self._drop_messages(chat_id), "steps": len(doomed)}

    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        with self._state.lock:
            added = 0
            for item_id in item_ids:
                if item_id not in self._state.archived_ids:
                    self._state.archived_ids[item_id] = chat_id
                    added += 1
            return added

    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        with self._state.lock:
            return self._state.archived_ids.get(item_id)

    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        with self._state.lock:
            chat = self._state.chats.get(chat_id)
            if chat is None:
                return 0
            inserted = 0
            for message in messages:
                if message.message_id in self._state.message_index or message.seq is None:
                    continue
                row = MessageRow(
                    body=self.message_body(message),
                    chat_id=chat_id,
                    seq=message.seq,
                    message_id=message.message_id,
                    agui_id=message.agui_id,
                    fingerprint=self.fingerprint(message),
                    revision=message.revision,
                    created_at=message.created_at,
                    updated_at=message.updated_at,
                    deleted_at=message.deleted_at,
                    run_id=message.run_id,
                    **_nested_keys(message),
                )
                chat.add(row)
                self._index(row)
                inserted += 1
            return inserted


def _nested_keys(message: Message) -> dict[str, Any]:
    return {
        "tool_call_ids": frozenset(c.tool_call_id for c in message.tool_calls),
        "reasoning_ids": frozenset(r.reasoning_id for r in message.reasonings),
        "tool_call_aguis": frozenset(c.agui_id for c in message.tool_calls if c.agui_id),
        "reasoning_aguis": frozenset(r.agui_id for r in message.reasonings if r.agui_id),
    }


def MemoryStore(url: str = "memory://", **options: Any) -> Store:  # noqa: N802 - a factory
    """Return an unopened ``Store`` holding a :class:`MemoryDriver` for ``url``.

    Args:
        url: ``memory://`` (private to this store) or ``memory://NAME`` (shared by every
            store of this process opened with that URL; survives close/reopen).
        **options: :class:`threadkeep.Store` options (``cursor_secret``, ``clock``...).

    Raises:
        InvalidArgument: If an option is unknown or invalid.
    """
    return store_for(MemoryDriver, url, **options)
