"""Chat primitives of the MongoDB driver (``{prefix}chats`` and the ``chat_seq`` counter)."""

from __future__ import annotations

from uuid import UUID

from pymongo import ReturnDocument
from pymongo.errors import PyMongoError

from threadkeep import Chat, ChatFilter, Conflict, chat_deduplication_key

from ._base import MongoBase, Session
from ._codec import Document, chat_fields, to_us
from ._errors import duplicate_key_pattern, is_duplicate_key, map_errors
from ._queries import chat_query

__all__ = ["MongoChatsMixin"]

_CHAT_SEQ = "chat_seq"
_CREATE_ATTEMPTS = 3


class MongoChatsMixin(MongoBase):
    """Chats: idempotent create on a partial unique index, compare-and-set updates, pages."""

    async def insert_chat(self, chat: Chat) -> Chat:
        key = chat.dedup_key
        with map_errors("create a chat"):
            for _ in range(_CREATE_ATTEMPTS):
                found = await self._cols.chats.find_one({"dedup_key": key, "live": True})
                if found is not None:
                    return self._chat_from_doc(found)
                try:
                    return await self._write(lambda s: self._create(chat, s))
                except PyMongoError as exc:
                    # Another writer created the live chat of this key first: return it.
                    if not is_duplicate_key(exc) or "dedup_key" not in duplicate_key_pattern(exc):
                        raise
            raise Conflict(f"chat ({chat.user_id!r}, {chat.thread_id!r}) kept changing; retry")

    async def _create(self, chat: Chat, session: Session) -> Chat:
        counter = await self._cols.meta.find_one_and_update(
            {"_id": _CHAT_SEQ},
            {"$inc": {"value": 1}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
            session=session,
        )
        assert counter is not None
        created = to_us(chat.created_at)
        last = to_us(chat.last_message_at)
        doc: Document = {
            "_id": chat.chat_id,
            "seq": counter["value"],
            "revision": chat.revision,
            "next_seq": 1,
            "next_step_seq": 1,
            "created_us": created,
            "last_message_us": last,
            "idle_us": last if last is not None else created,
            **chat_fields(chat, self.record_body(chat)),
        }
        await self._cols.chats.insert_one(doc, session=session)
        return self._chat_from_doc(doc)

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        with map_errors("read a chat"):
            doc = await self._cols.chats.find_one({"_id": chat_id})
        return None if doc is None else self._chat_from_doc(doc)

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        key = chat_deduplication_key(user_id, thread_id, tenant_id)
        with map_errors("find a chat"):
            doc = await self._cols.chats.find_one({"dedup_key": key, "live": True})
        return None if doc is None else self._chat_from_doc(doc)

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        query: Document = {"_id": chat.chat_id}
        if expected_revision is not None:
            query["revision"] = expected_revision
        with map_errors("update a chat"):
            try:
                doc = await self._cols.chats.find_one_and_update(
                    query,
                    {
                        "$set": chat_fields(chat, self.record_body(chat)),
                        "$inc": {"revision": 1},
                    },
                    return_document=ReturnDocument.AFTER,
                )
            except PyMongoError as exc:
                if not is_duplicate_key(exc) or "dedup_key" not in duplicate_key_pattern(exc):
                    raise
                msg = (
                    f"another live chat holds ({chat.user_id!r}, {chat.thread_id!r}); "
                    "delete it before restoring this one"
                )
                raise Conflict(msg) from exc
        return None if doc is None else self._chat_from_doc(doc)

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        with map_errors("list chats"):
            cursor = self._cols.chats.find(
                chat_query(chat_filter, before_seq), sort=[("seq", -1)], limit=limit
            )
            return self._chats_from_docs(await cursor.to_list(None))

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        """Remove a chat for good: children first, the chat document last.

        The chat is first made unwritable (appends stop, its key is released), so a purge
        interrupted at any point is finished by running it again: ``purge`` and
        ``erase_user`` find the chat document until the very last step.
        """
        cols = self._cols
        with map_errors("purge a chat"):
            closed = await cols.chats.update_one(
                {"_id": chat_id}, {"$set": {"live": False, "writable": False, "purging": True}}
            )
            if closed.matched_count == 0:
                return dict.fromkeys(("chats", "messages", "steps", "runs", "archived_ids"), 0)
            messages = await cols.messages.delete_many({"chat_id": chat_id})
            await cols.chunks.delete_many({"chat_id": chat_id})
            steps = await cols.steps.delete_many({"chat_id": chat_id})
            runs = await cols.runs.delete_many({"chat_id": chat_id})
            indexed = await cols.archived_ids.delete_many({"chat_id": chat_id})
            chats = await cols.chats.delete_one({"_id": chat_id})
        return {
            "chats": chats.deleted_count,
            "messages": messages.deleted_count,
            "steps": steps.deleted_count,
            "runs": runs.deleted_count,
            "archived_ids": indexed.deleted_count,
        }
