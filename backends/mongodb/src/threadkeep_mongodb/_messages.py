"""Message reads: keyset pages on ``(chat_id, seq)``, lookups by id, agui_id and nested id.

Pages never use ``skip()``: a page is ``seq < before`` (or ``seq > after``) sorted on the
``(chat_id, seq)`` index with a limit, so a page deep in a long chat costs what the first
one does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from threadkeep import Message, MessageFilter, NestedKind

from ._base import MongoBase
from ._codec import Document
from ._errors import map_errors
from ._queries import message_query

__all__ = ["MongoMessagesMixin"]

_NESTED_LIST = {"tool_call": "tool_calls", "reasoning": "reasonings"}
_NESTED_ID = {"tool_call": "tool_calls.tool_call_id", "reasoning": "reasonings.reasoning_id"}
_HOLDERS_READ = 16


class MongoMessagesMixin(MongoBase):
    """The read primitives of messages."""

    async def _hot_and_docs(
        self, chat_id: UUID, query: Document, sort: int, limit: int, *, chat: str = "writable"
    ) -> list[Document] | None:
        """Read a chat's messages and check the chat, in two concurrent queries.

        Returns ``None`` if the chat is missing, deleted or (with ``chat="writable"``, the
        default) archived; ``chat="live"`` accepts an archived chat.
        """
        chat_read = self._cols.chats.find_one({"_id": chat_id, chat: True}, {"_id": 1})
        cursor = self._cols.messages.find(
            {"chat_id": chat_id, **query}, sort=[("seq", sort)], limit=limit
        )
        found, docs = await asyncio.gather(chat_read, cursor.to_list(None))
        return None if found is None else docs

    async def get_message(self, message_id: UUID) -> Message | None:
        with map_errors("read a message"):
            doc = await self._cols.messages.find_one({"_id": message_id, "deleted_us": None})
            if doc is None:
                return None
            # no chat_id: damaged, and the rebuild reports it (CorruptRecord, issue 12)
            if "chat_id" in doc and not await self._live_chat_ids([doc["chat_id"]]):
                return None
            found = await self._messages_from_docs([doc])
        return found[0] if found else None

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        with map_errors("read a message"):
            doc = await self._cols.messages.find_one(
                {"chat_id": chat_id, "agui_id": {"$eq": agui_id}, "deleted_us": None}
            )
            if doc is None or not await self._live_chat_ids([chat_id]):
                return None
            found = await self._messages_from_docs([doc])
        return found[0] if found else None

    async def page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        query = message_query(message_filter)
        if before_seq is not None:
            query["seq"] = {"$lt": before_seq}
        with map_errors("list messages"):
            docs = await self._hot_and_docs(chat_id, query, -1, limit)
            return None if docs is None else await self._messages_from_docs(docs)

    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        query = {"seq": {"$gt": after_seq}, "deleted_us": None}
        with map_errors("read messages"):
            docs = await self._hot_and_docs(chat_id, query, 1, limit, chat="live")
            return [] if docs is None else await self._messages_from_docs(docs)

    async def last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """One aggregation: each live, hot chat joined with its newest visible message.

        The ``$lookup`` sub-pipeline (``$match`` on ``chat_id``, ``$sort`` seq descending,
        ``$limit`` 1) runs per chat on the ``(chat_id, seq)`` index.
        """
        pipeline: list[dict[str, Any]] = [
            {"$match": {"_id": {"$in": list(chat_ids)}, "writable": True}},
            {
                "$lookup": {
                    "from": self._cols.messages.name,
                    "let": {"chat": "$_id"},
                    "pipeline": [
                        {"$match": {"$expr": {"$eq": ["$chat_id", "$$chat"]}, "deleted_us": None}},
                        {"$sort": {"seq": -1}},
                        {"$limit": 1},
                    ],
                    "as": "last",
                }
            },
            {"$project": {"last": 1}},
        ]
        with map_errors("read the last messages"):
            cursor = await self._cols.chats.aggregate(pipeline)
            docs = [doc["last"][0] async for doc in cursor if doc["last"]]
            messages = await self._messages_from_docs(docs)
        return {m.chat_id: m for m in messages if m.chat_id is not None}

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        with map_errors("find a nested record"):
            cursor = self._cols.messages.find(
                {_NESTED_ID[kind]: item_id, "deleted_us": None}, limit=_HOLDERS_READ
            )
            docs = await cursor.to_list(None)
            live = await self._live_chat_ids([d["chat_id"] for d in docs]) if docs else set()
            holders = [d for d in docs if d["chat_id"] in live]
            found = await self._messages_from_docs(holders[:1])
        return found[0] if found else None

    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        query = {f"{_NESTED_LIST[kind]}.agui_id": {"$eq": agui_id}, "deleted_us": None}
        with map_errors("find a nested record"):
            docs = await self._hot_and_docs(chat_id, query, -1, 1)
            found = await self._messages_from_docs(docs or [])
        return found[0] if found else None
