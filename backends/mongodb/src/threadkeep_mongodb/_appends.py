"""Message writes: batch appends, compare-and-set replaces, and hiding.

An append reserves its seqs with one ``find_one_and_update`` (``$inc`` of ``next_seq`` on the
chat document) inside the transaction that inserts the messages and their body chunks. Two
appends to one chat both write that document, so MongoDB lets only one commit and the other
gets a write conflict (``TransientTransactionError``) and is retried from the start: seqs are
strictly increasing in commit order, and a batch is all or nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pymongo import ReturnDocument
from pymongo.errors import PyMongoError

from threadkeep import IdempotencyConflict, Message, PreparedMessage
from threadkeep.driver import resolve_batch

from ._base import MongoBase, Rollback, Session
from ._codec import Document, message_fields, split_body, to_us
from ._errors import duplicate_key_pattern, is_duplicate_key, map_errors

__all__ = ["MongoAppendsMixin"]

_APPEND_ATTEMPTS = 3
_NO_SEQ = 2**62  # above every seq: ``$lt`` of it keeps a seq stored as another type out
_log = logging.getLogger("threadkeep_mongodb")
T = TypeVar("T")


def _held(stored: dict[str | None, Document], agui_id: str) -> tuple[str, Document] | None:
    doc = stored.get(agui_id)
    return None if doc is None else (doc["fingerprint"], doc)


class MongoAppendsMixin(MongoBase):
    """``insert_messages``, ``replace_message`` and ``hide_messages``.

    Appends to one chat from one store are queued on a per-chat ``asyncio.Lock``: they
    would only conflict on the chat document and retry (issue 12: 50 writers on one chat);
    queued, each runs its transaction once. Other processes' appends still conflict and
    are retried (``CONFLICT_RETRY_SECONDS``).
    """

    def _append_lock(self, chat_id: UUID) -> asyncio.Lock:
        locks: weakref.WeakValueDictionary[UUID, asyncio.Lock] | None
        locks = self.__dict__.get("_tk_append_locks")
        if locks is None:
            locks = self.__dict__["_tk_append_locks"] = weakref.WeakValueDictionary()
        lock = locks.get(chat_id)
        if lock is None:
            lock = locks[chat_id] = asyncio.Lock()
        return lock

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        async with self._append_lock(chat_id):
            return await self._insert_queued(chat_id, messages, now)

    async def _insert_queued(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        return await self._appending(
            chat_id, "append messages", lambda s: self._append(chat_id, messages, now, s)
        )

    async def _appending(
        self, chat_id: UUID, what: str, work: Callable[[Session], Awaitable[T]]
    ) -> T:
        """Run an append's ``work`` atomically, repairing a counter behind a stored row once."""
        repaired = False
        with map_errors(what):
            for attempt in range(1, _APPEND_ATTEMPTS + 2):
                try:
                    return await self._write(work)
                except PyMongoError as exc:
                    key = duplicate_key_pattern(exc) if is_duplicate_key(exc) else {}
                    if "seq" in key and not repaired:
                        # A document written around the store holds a reserved seq (issue
                        # 12): nothing of the batch is stored; repair the counter, run again.
                        await self._repair_next_seq(chat_id)
                        repaired = True
                        continue
                    # A concurrent append stored one of these agui_ids first (possible only
                    # without transactions): run again, and it is found as stored.
                    if "agui_id" not in key or attempt >= _APPEND_ATTEMPTS:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _repair_next_seq(self, chat_id: UUID) -> None:
        """Raise the chat's ``next_seq`` past its highest stored seq, atomically (``$max``).

        Called after an append failed on the ``(chat_id, seq)`` unique index (nothing of it
        stored): a message document written outside threadkeep (a restored dump, a manual
        insert) holds a seq at or above the counter, and every append reserving it would
        fail the same way. ``$max`` never lowers the counter, so seqs that concurrent
        appends reserved stay theirs. Logged as a ``WARNING`` naming the chat.
        """
        top = await self._cols.messages.find_one(
            {"chat_id": chat_id, "seq": {"$lt": _NO_SEQ}}, {"seq": 1}, sort=[("seq", -1)]
        )
        seq = 0 if top is None else int(top["seq"])
        await self._cols.chats.update_one({"_id": chat_id}, {"$max": {"next_seq": seq + 1}})
        _log.warning(
            "threadkeep: chat %s: a message document written outside threadkeep took a seq "
            "an append reserved; next seq repaired to at least %d (highest stored seq %d)",
            chat_id,
            seq + 1,
            seq,
            extra={"chat_id": str(chat_id), "stored_seq": seq},
        )

    async def _append(
        self,
        chat_id: UUID,
        messages: Sequence[PreparedMessage],
        now: datetime,
        session: Session,
    ) -> list[tuple[Message, bool]] | None:
        stored = await self._stored_by_agui(chat_id, messages, session)
        try:
            resolve_batch(chat_id, messages, functools.partial(_held, stored))
        except IdempotencyConflict:
            # A missing chat wins over the conflict, as in the reference driver.
            if await self._reserve(chat_id, 0, now, session) is None:
                raise Rollback(None) from None
            raise
        fresh = [m for m in messages if m.message.agui_id not in stored]
        chat = await self._reserve(chat_id, len(fresh), now, session)
        if chat is None:
            raise Rollback(None)
        first = chat["next_seq"] - len(fresh)
        new_docs: dict[UUID, Document] = {}
        chunks: list[Document] = []
        for offset, item in enumerate(fresh):
            doc, item_chunks = self._new_doc(chat_id, first + offset, item, now)
            new_docs[item.message.message_id] = doc
            chunks += item_chunks
        await self._insert_docs(list(new_docs.values()), chunks, session)
        existing = await self._messages_from_docs(list(stored.values()), session)
        by_agui = {m.agui_id: m for m in existing}
        results: list[tuple[Message, bool]] = []
        for item in messages:
            created = new_docs.get(item.message.message_id)
            if created is not None and item.message.agui_id not in stored:
                results.append((self._message_from_doc(created, item.body), True))
            else:
                results.append((by_agui[item.message.agui_id], False))
        return results

    async def _stored_by_agui(
        self,
        chat_id: UUID,
        messages: Sequence[PreparedMessage],
        session: Session,
        projection: dict[str, int] | None = None,
    ) -> dict[str | None, Document]:
        aguis = [m.message.agui_id for m in messages if m.message.agui_id is not None]
        if not aguis:
            return {}
        cursor = self._cols.messages.find(
            {"chat_id": chat_id, "agui_id": {"$in": aguis}}, projection, session=session
        )
        return {doc["agui_id"]: doc async for doc in cursor}

    async def _reserve(
        self, chat_id: UUID, count: int, now: datetime, session: Session
    ) -> Document | None:
        """Reserve ``count`` seqs on a writable chat; return the chat (``None`` if not)."""
        query = {"_id": chat_id, "writable": True}
        if count == 0:
            return await self._cols.chats.find_one(query, {"next_seq": 1}, session=session)
        at = to_us(now)
        return await self._cols.chats.find_one_and_update(
            query,
            {
                "$inc": {"next_seq": count, "revision": 1},
                "$set": {"last_message_us": at, "updated_us": at, "idle_us": at},
            },
            projection={"next_seq": 1},
            return_document=ReturnDocument.AFTER,
            session=session,
        )

    def _new_doc(
        self, chat_id: UUID, seq: int, item: PreparedMessage, now: datetime
    ) -> tuple[Document, list[Document]]:
        message = item.message
        body_fields, chunks = split_body(item.body, chat_id)
        doc: Document = {
            "_id": message.message_id,
            "chat_id": chat_id,
            "seq": seq,
            "fingerprint": item.fingerprint,
            "revision": 0,
            "created_us": to_us(message.created_at or now),
            "updated_us": to_us(now),
            "deleted_us": None,
            **message_fields(message),
            **body_fields,
        }
        if message.agui_id is not None:
            doc["agui_id"] = message.agui_id
        return doc, chunks

    async def _insert_docs(
        self,
        docs: list[Document],
        chunks: list[Document],
        session: Session,
        *,
        ordered: bool = True,
    ) -> None:
        """Insert chunks, then messages; without a transaction, undo both on failure."""
        try:
            if chunks:
                await self._cols.chunks.insert_many(chunks, ordered=ordered, session=session)
            if docs:
                await self._cols.messages.insert_many(docs, ordered=ordered, session=session)
        except BaseException:
            if session is None:
                await self._undo_inserts(docs, chunks)
            raise

    async def _undo_inserts(self, docs: list[Document], chunks: list[Document]) -> None:
        # Only this writer's documents: fresh body ids, and (message id, seq) pairs it chose.
        if chunks:
            body_ids = list({c["body_id"] for c in chunks})
            await self._cols.chunks.delete_many({"body_id": {"$in": body_ids}})
        for doc in docs:
            await self._cols.messages.delete_one(
                {"_id": doc["_id"], "chat_id": doc["chat_id"], "seq": doc["seq"]}
            )

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        with map_errors("update a message"):
            return await self._write(lambda s: self._replace(prepared, expected_revision, now, s))

    async def _replace(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime, session: Session
    ) -> Message | None:
        message = prepared.message
        chat_id = message.chat_id
        bumped = await self._cols.chats.update_one(
            {"_id": chat_id, "live": True}, {"$inc": {"revision": 1}}, session=session
        )
        if bumped.matched_count == 0:
            raise Rollback(None)
        assert chat_id is not None
        body_fields, chunks = split_body(prepared.body, chat_id)
        changes: dict[str, Any] = {
            "$set": {
                "fingerprint": prepared.fingerprint,
                "revision": expected_revision + 1,
                "updated_us": to_us(now),
                **message_fields(message),
                **body_fields,
            },
        }
        gone = {"body", "body_id", "body_chunks", "body_bytes"} - set(body_fields)
        changes["$unset"] = dict.fromkeys(gone, "")
        if chunks:
            await self._cols.chunks.insert_many(chunks, session=session)
        before = await self._cols.messages.find_one_and_update(
            {
                "_id": message.message_id,
                "chat_id": chat_id,
                "revision": expected_revision,
                "deleted_us": None,
            },
            changes,
            return_document=ReturnDocument.BEFORE,
            session=session,
        )
        if before is None:
            if chunks and session is None:
                await self._undo_inserts([], chunks)
            raise Rollback(None)
        if "body_id" in before:
            await self._cols.chunks.delete_many({"body_id": before["body_id"]}, session=session)
        after = {**before, **changes["$set"]}
        for field in gone:
            after.pop(field, None)
        return self._message_from_doc(after, prepared.body)

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        with map_errors("delete messages"):
            return await self._write(lambda s: self._hide(chat_id, message_ids, now, s))

    async def _hide(
        self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime, session: Session
    ) -> int:
        at = to_us(now)
        result = await self._cols.messages.update_many(
            {"_id": {"$in": list(message_ids)}, "chat_id": chat_id, "deleted_us": None},
            {"$set": {"deleted_us": at, "updated_us": at}, "$inc": {"revision": 1}},
            session=session,
        )
        if result.modified_count:
            await self._cols.chats.update_one(
                {"_id": chat_id}, {"$inc": {"revision": 1}}, session=session
            )
        return result.modified_count
