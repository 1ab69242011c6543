"""``load_messages``: the bulk path of ``Store.load_messages`` on MongoDB (``insert_many``).

One transaction per batch (where the server has them), as an append (``_appends``), with
less work per message:

1. read which of the batch's ``agui_id`` s the chat stores, their fingerprints only (no
   bodies: nothing stored is read back into a message);
2. reserve the seqs of the other messages on the chat document (``$inc`` of ``next_seq``,
   only on a writable chat: ``None`` otherwise, nothing written);
3. write their body chunks and documents with ``insert_many(ordered=False)``: the server
   inserts them without waiting on each other. Whether anything is stored already was
   decided in step 1 (``IdempotencyConflict`` before any write), so no document of the
   batch is expected to fail; if one does (a concurrent writer without transactions), the
   transaction aborts, or without one this writer's documents are removed again
   (``_undo_inserts``) and the batch is retried as an append is.

Returns each message's new seq, ``None`` for those stored already.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from threadkeep import IdempotencyConflict, PreparedMessage
from threadkeep.driver import resolve_batch

from ._appends import MongoAppendsMixin
from ._base import Rollback, Session
from ._codec import Document

__all__ = ["MongoLoadMixin"]

_PRESENT = {"agui_id": 1, "fingerprint": 1, "seq": 1}


class MongoLoadMixin(MongoAppendsMixin):
    """``load_messages`` (``threadkeep.driver.BulkLoadDriver``), see the module docstring."""

    async def load_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        async with self._append_lock(chat_id):
            work = functools.partial(self._load, chat_id, messages, now)
            return await self._appending(chat_id, "load messages", work)

    async def _load(
        self,
        chat_id: UUID,
        messages: Sequence[PreparedMessage],
        now: datetime,
        session: Session,
    ) -> list[int | None] | None:
        stored = await self._stored_by_agui(chat_id, messages, session, _PRESENT)
        try:
            resolve_batch(chat_id, messages, functools.partial(_held, stored))
        except IdempotencyConflict:
            if await self._reserve(chat_id, 0, now, session) is None:
                raise Rollback(None) from None  # a missing chat wins over the conflict
            raise
        fresh = [m for m in messages if m.message.agui_id not in stored]
        chat = await self._reserve(chat_id, len(fresh), now, session)
        if chat is None:
            raise Rollback(None)
        first = chat["next_seq"] - len(fresh)
        docs: list[Document] = []
        chunks: list[Document] = []
        seqs: dict[UUID, int] = {}
        for offset, item in enumerate(fresh):
            doc, item_chunks = self._new_doc(chat_id, first + offset, item, now)
            docs.append(doc)
            chunks += item_chunks
            seqs[item.message.message_id] = first + offset
        await self._insert_docs(docs, chunks, session, ordered=False)
        return [
            None if m.message.agui_id in stored else seqs[m.message.message_id] for m in messages
        ]


def _held(stored: dict[str | None, Document], agui_id: str) -> tuple[str, Any] | None:
    doc = stored.get(agui_id)
    return None if doc is None else (doc["fingerprint"], doc["seq"])
