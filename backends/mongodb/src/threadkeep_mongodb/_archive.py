"""The hot-row primitives cold archiving needs (capability ``archive``): scan, delete, restore.

Restores are idempotent (records already stored are skipped), so the archive service may
re-run one after a crash; each group of records is restored in one transaction where the
server has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TypeVar
from uuid import UUID

from pymongo.errors import BulkWriteError

from threadkeep import Message, Step

from ._base import MongoBase, Rollback, Session
from ._codec import Document, message_fields, split_body, step_document, to_us
from ._errors import is_duplicate_key, map_errors

__all__ = ["MongoArchiveMixin"]

T = TypeVar("T")

_RESTORE_GROUP = 100
"""Records per restore transaction: keeps each transaction well inside MongoDB's limits."""


def _groups(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class MongoArchiveMixin(MongoBase):
    """``scan_messages``, ``delete_hot_messages``, ``restore_messages`` and the step pair."""

    async def scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        with map_errors("scan messages"):
            cursor = self._cols.messages.find(
                {"chat_id": chat_id, "seq": {"$gt": after_seq}}, sort=[("seq", 1)], limit=limit
            )
            return await self._messages_from_docs(await cursor.to_list(None))

    async def delete_hot_messages(self, chat_id: UUID) -> int:
        with map_errors("delete hot messages"):
            return await self._write(partial(self._delete_messages, chat_id))

    async def _delete_messages(self, chat_id: UUID, session: Session) -> int:
        deleted = await self._cols.messages.delete_many({"chat_id": chat_id}, session=session)
        await self._cols.chunks.delete_many({"chat_id": chat_id}, session=session)
        return deleted.deleted_count

    async def delete_hot_steps(self, chat_id: UUID) -> int:
        with map_errors("delete hot steps"):
            deleted = await self._cols.steps.delete_many({"chat_id": chat_id})
        return deleted.deleted_count

    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        with map_errors("delete archived rows"):
            return await self._write(partial(self._delete_archived, chat_id, expected_revision))

    async def _delete_archived(
        self, chat_id: UUID, expected_revision: int, session: Session
    ) -> dict[str, int] | None:
        """Delete messages, chunks and steps of a chat archived at ``expected_revision``.

        In a transaction the chat document is written first (its revision bumped), so a
        rehydration or any other write to the chat conflicts with this delete instead of
        interleaving with it. Without transactions the check and the deletes are separate
        steps (the standalone caveat of ``MongoStore``).
        """
        query = {"_id": chat_id, "status": "archived", "revision": expected_revision}
        bumped = await self._cols.chats.update_one(
            query, {"$inc": {"revision": 1}}, session=session
        )
        if bumped.matched_count == 0:
            raise Rollback(None)
        steps = await self._cols.steps.delete_many({"chat_id": chat_id}, session=session)
        messages = await self._delete_messages(chat_id, session)
        return {"messages": messages, "steps": steps.deleted_count}

    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        ids = list(dict.fromkeys(item_ids))
        if not ids:
            return 0
        with map_errors("index archived ids"):
            cursor = self._cols.archived_ids.find({"_id": {"$in": ids}}, {"_id": 1})
            known = {doc["_id"] async for doc in cursor}
            fresh = [{"_id": i, "chat_id": chat_id} for i in ids if i not in known]
            if not fresh:
                return 0
            try:
                result = await self._cols.archived_ids.insert_many(fresh, ordered=False)
            except BulkWriteError as exc:
                if not is_duplicate_key(exc):  # a concurrent archiver recorded some first
                    raise
                return int(exc.details.get("nInserted", 0))
            return len(result.inserted_ids)

    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        with map_errors("look up an archived id"):
            doc = await self._cols.archived_ids.find_one({"_id": item_id})
        return None if doc is None else UUID(str(doc["chat_id"]))

    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        inserted = 0
        with map_errors("restore messages"):
            for group in _groups(messages, _RESTORE_GROUP):
                batch = [m for m in group if m.seq is not None]
                inserted += await self._write(partial(self._restore, chat_id, batch))
        return inserted

    async def _restore(self, chat_id: UUID, messages: list[Message], session: Session) -> int:
        ids = [m.message_id for m in messages]
        cursor = self._cols.messages.find({"_id": {"$in": ids}}, {"_id": 1}, session=session)
        stored = {doc["_id"] async for doc in cursor}
        fresh = [m for m in messages if m.message_id not in stored]
        if not fresh:
            return 0
        chat = await self._cols.chats.find_one_and_update(
            {"_id": chat_id},
            {"$max": {"next_seq": max(m.seq or 0 for m in fresh) + 1}},
            projection={"_id": 1},
            session=session,
        )
        if chat is None:
            return 0
        docs: list[Document] = []
        chunks: list[Document] = []
        for message in fresh:
            doc, message_chunks = self._restored_doc(chat_id, message)
            docs.append(doc)
            chunks += message_chunks
        if chunks:
            await self._cols.chunks.insert_many(chunks, session=session)
        await self._cols.messages.insert_many(docs, session=session)
        return len(docs)

    def _restored_doc(self, chat_id: UUID, message: Message) -> tuple[Document, list[Document]]:
        body_fields, chunks = split_body(self.message_body(message), chat_id)
        doc: Document = {
            "_id": message.message_id,
            "chat_id": chat_id,
            "seq": message.seq,
            "fingerprint": self.fingerprint(message),
            "revision": message.revision,
            "created_us": to_us(message.created_at),
            "updated_us": to_us(message.updated_at),
            "deleted_us": to_us(message.deleted_at),
            **message_fields(message),
            **body_fields,
        }
        if message.agui_id is not None:
            doc["agui_id"] = message.agui_id
        return doc, chunks

    async def restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        inserted = 0
        with map_errors("restore steps"):
            for group in _groups(steps, _RESTORE_GROUP):
                batch = [s for s in group if s.seq is not None]
                inserted += await self._write(partial(self._restore_step_group, chat_id, batch))
        return inserted

    async def _restore_step_group(self, chat_id: UUID, steps: list[Step], session: Session) -> int:
        ids = [s.step_id for s in steps]
        cursor = self._cols.steps.find({"_id": {"$in": ids}}, {"_id": 1}, session=session)
        stored = {doc["_id"] async for doc in cursor}
        fresh = [s for s in steps if s.step_id not in stored]
        if not fresh:
            return 0
        chat = await self._cols.chats.find_one_and_update(
            {"_id": chat_id},
            {"$max": {"next_step_seq": max(s.seq or 0 for s in fresh) + 1}},
            projection={"_id": 1},
            session=session,
        )
        if chat is None:
            return 0
        docs = [step_document(s, self.record_body(s)) for s in fresh]
        await self._cols.steps.insert_many(docs, session=session)
        return len(docs)
