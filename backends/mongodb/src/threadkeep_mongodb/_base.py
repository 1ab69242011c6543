"""State and helpers every part of the MongoDB driver shares: collections, transactions, reads.

Writes that touch several documents run through :meth:`MongoBase._write`: a multi-document
transaction on a replica set or sharded cluster, retried from the start a bounded number of
times when MongoDB labels an error ``TransientTransactionError`` (write conflicts: two
appends to one chat both reserving seqs on its document). On a standalone server, which has
no transactions, the same work runs without a session and each write step compensates for
itself (see ``capabilities`` on :class:`threadkeep_mongodb.MongoDriver`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast
from uuid import UUID

from pymongo import AsyncMongoClient
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import ConnectionFailure, PyMongoError

from threadkeep import BackendUnavailable, Chat, Message
from threadkeep.driver import DriverBase

from ._codec import Document, join_chunks, required, stored_time
from ._errors import TRANSIENT_LABEL, UNKNOWN_COMMIT_LABEL

__all__ = [
    "CONFLICT_RETRY_SECONDS",
    "MAX_TRANSACTION_ATTEMPTS",
    "Collections",
    "MongoBase",
    "Rollback",
    "Session",
]

T = TypeVar("T")

Session = AsyncClientSession | None
"""The transaction's session, or ``None`` on a standalone server."""

MAX_TRANSACTION_ATTEMPTS = 60
"""Kept for compatibility: write conflicts are no longer bounded by a count of attempts.

See :data:`CONFLICT_RETRY_SECONDS`: a count ran out under 50 writers on one chat (issue 12).
"""

CONFLICT_RETRY_SECONDS = 60.0
"""How long a transaction is retried on write conflicts before they become ``Conflict``.

A write conflict means another transaction holds the document: it either commits (so the
writers make progress, and the retry succeeds soon) or is aborted by the server after its
``transactionLifetimeLimitSeconds`` (60 s by default). Retrying for that long therefore
never gives up on writers that merely compete (any number of them), and still ends when
something holds the document for good. In-process appends to one chat are also queued
(see ``MongoAppendsMixin``), so they do not conflict with each other at all.
"""

_BACKOFF_BASE_SECONDS = 0.002
_BACKOFF_CAP_SECONDS = 0.1
_NETWORK_ATTEMPTS = 2
_COMMIT_ATTEMPTS = 3
_BODY_READ_ATTEMPTS = 3


class Rollback(Exception):
    """Raised by transaction work to abort it (writing nothing) and return ``value``."""

    def __init__(self, value: object = None) -> None:
        super().__init__("rollback")
        self.value = value


@dataclass(frozen=True, slots=True)
class Collections:
    """The store's collections (names carry the collection prefix)."""

    chats: AsyncCollection[Document]
    messages: AsyncCollection[Document]
    chunks: AsyncCollection[Document]
    steps: AsyncCollection[Document]
    runs: AsyncCollection[Document]
    archived_ids: AsyncCollection[Document]
    meta: AsyncCollection[Document]


def _backoff(attempt: int) -> float:
    """Full-jitter exponential backoff, in seconds."""
    return random.uniform(
        0, min(_BACKOFF_CAP_SECONDS, _BACKOFF_BASE_SECONDS * 2 ** min(attempt, 16))
    )


def _worth_retrying(exc: PyMongoError, attempt: int, deadline: float) -> bool:
    """Whether a failed transaction should run again from the start.

    Write conflicts (labelled transient) are retried until ``deadline`` (event-loop time,
    :data:`CONFLICT_RETRY_SECONDS` after the first attempt); a lost connection (also
    labelled transient) once, since PyMongo already waited ``serverSelectionTimeoutMS``
    for a server before giving up.
    """
    if not exc.has_error_label(TRANSIENT_LABEL):
        return False
    if isinstance(exc, ConnectionFailure):
        return attempt < _NETWORK_ATTEMPTS
    return asyncio.get_running_loop().time() < deadline


async def _commit(session: AsyncClientSession) -> None:
    for attempt in range(1, _COMMIT_ATTEMPTS + 1):
        try:
            await session.commit_transaction()
            return
        except PyMongoError as exc:
            if not exc.has_error_label(UNKNOWN_COMMIT_LABEL) or attempt == _COMMIT_ATTEMPTS:
                raise


async def _abort(session: AsyncClientSession) -> None:
    if session.in_transaction:
        # If the abort fails, the server aborts the abandoned transaction by itself.
        with contextlib.suppress(PyMongoError):
            await session.abort_transaction()


class MongoBase(DriverBase):
    """Connection state and the helpers the chat, message, run and archive parts share."""

    shield_writes = True  # a cancelled write commits or aborts whole (issue 12)

    _client_or_none: AsyncMongoClient[Document] | None
    _cols_or_none: Collections | None
    _transactions: bool

    @property
    def _client(self) -> AsyncMongoClient[Document]:
        if self._client_or_none is None:
            raise BackendUnavailable("the MongoDB store is not open; open it first")
        return self._client_or_none

    @property
    def _cols(self) -> Collections:
        if self._cols_or_none is None:
            raise BackendUnavailable("the MongoDB store is not open; open it first")
        return self._cols_or_none

    # -- transactions --------------------------------------------------------------------

    async def _write(self, work: Callable[[Session], Awaitable[T]]) -> T:
        """Run ``work`` atomically where the server allows, retrying write conflicts.

        ``work`` receives the session to pass to every operation (``None`` on a standalone
        server) and may raise :class:`Rollback` to abort and return a value. It may run more
        than once, so it must not keep state between runs.
        """
        if not self._transactions:
            try:
                return await work(None)
            except Rollback as stop:
                return cast(T, stop.value)
        deadline = asyncio.get_running_loop().time() + CONFLICT_RETRY_SECONDS
        async with self._client.start_session() as session:
            for attempt in itertools.count(1):
                await session.start_transaction()
                try:
                    result = await work(session)
                    await _commit(session)
                except Rollback as stop:
                    return cast(T, stop.value)
                except PyMongoError as exc:
                    if not _worth_retrying(exc, attempt, deadline):
                        raise
                else:
                    return result
                finally:
                    await _abort(session)  # a no-op after a commit
                await asyncio.sleep(_backoff(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- reading records -------------------------------------------------------------------

    def _chat_from_doc(self, doc: Document) -> Chat:
        return self.record_from_body(
            self.chat_model,
            required(doc, "body"),
            **dict(zip(_CHAT_ROW, _chat_columns(doc), strict=True)),
        )

    def _chats_from_docs(self, docs: Sequence[Document]) -> list[Chat]:
        """Rebuild a page of chats at once (``records_from_rows``; damaged ones row by row)."""
        rows = [(*_chat_columns(doc), required(doc, "body")) for doc in docs]
        return self.records_from_rows(self.chat_model, _CHAT_ROW, rows)

    def _message_from_doc(self, doc: Document, body: str) -> Message:
        return self.message_from_row(
            body,
            # required(): a damaged document is reported (CorruptRecord), never a KeyError.
            chat_id=cast(UUID, required(doc, "chat_id")),
            seq=cast(int, required(doc, "seq")),
            revision=cast(int, required(doc, "revision")),
            created_at=stored_time(doc.get("created_us")),
            updated_at=stored_time(doc.get("updated_us")),
            deleted_at=stored_time(doc.get("deleted_us")),
        )

    async def _messages_from_docs(
        self, docs: Sequence[Document], session: Session = None
    ) -> list[Message]:
        """Rebuild messages from their documents, fetching the chunks of chunked bodies."""
        pairs = await self._with_bodies(docs, session)
        # One pydantic-core call for the page (``messages_from_rows``); a document with a
        # missing or unreadable field fails its fast path and is rebuilt (and reported)
        # row by row, as ``_message_from_doc`` would.
        rows = [
            (
                required(doc, "chat_id"),
                required(doc, "seq"),
                required(doc, "revision"),
                stored_time(doc.get("created_us")),
                stored_time(doc.get("updated_us")),
                stored_time(doc.get("deleted_us")),
                body,
            )
            for doc, body in pairs
        ]
        return self.messages_from_rows(rows)

    async def _with_bodies(
        self, docs: Sequence[Document], session: Session
    ) -> list[tuple[Document, str]]:
        chunked = [d for d in docs if "body" not in d and "body_id" in d]
        fresh = await self._read_chunked(chunked, session) if chunked else {}
        found = []
        for doc in docs:
            if "body" in doc or "body_id" not in doc:  # neither: damaged, reported on rebuild
                found.append((doc, required(doc, "body")))
            elif doc["_id"] in fresh:
                found.append(fresh[doc["_id"]])
        return found

    async def _read_chunked(
        self, docs: list[Document], session: Session
    ) -> dict[UUID, tuple[Document, str]]:
        """Return ``{message_id: (document, body)}`` for messages whose body is chunked.

        A reader outside a transaction may see a message document and then find its chunks
        gone (an update replaced the body in between); it reads that message again and uses
        the newer document. A message deleted meanwhile is left out.
        """
        found: dict[UUID, tuple[Document, str]] = {}
        pending = list(docs)
        for _ in range(_BODY_READ_ATTEMPTS):
            chunks = await self._chunks_by_body([d["body_id"] for d in pending], session)
            stale = []
            for doc in pending:
                body = join_chunks(doc, chunks.get(doc["body_id"], []))
                if body is None:
                    stale.append(doc["_id"])
                else:
                    found[doc["_id"]] = (doc, body)
            if not stale:
                return found
            pending = []
            async for doc in self._cols.messages.find({"_id": {"$in": stale}}, session=session):
                if "body" in doc:
                    found[doc["_id"]] = (doc, doc["body"])
                else:
                    pending.append(doc)
            if not pending:
                return found
        msg = "a large message body kept changing while it was read; try again"
        raise BackendUnavailable(msg)

    async def _chunks_by_body(
        self, body_ids: list[UUID], session: Session
    ) -> dict[UUID, list[Document]]:
        found: dict[UUID, list[Document]] = {}
        cursor = self._cols.chunks.find(
            {"body_id": {"$in": body_ids}}, sort=[("body_id", 1), ("n", 1)], session=session
        )
        async for chunk in cursor:
            found.setdefault(chunk["body_id"], []).append(chunk)
        return found

    async def _live_chat_ids(self, chat_ids: Sequence[UUID], session: Session = None) -> set[UUID]:
        """Return which of ``chat_ids`` are live (not deleted) chats."""
        cursor = self._cols.chats.find(
            {"_id": {"$in": list(set(chat_ids))}, "live": True}, {"_id": 1}, session=session
        )
        return {doc["_id"] async for doc in cursor}


_CHAT_ROW = ("seq", "revision", "created_at", "updated_at", "last_message_at", "deleted_at")
"""The columns of a chat document, in the order of :func:`_chat_columns`."""


def _chat_columns(doc: Document) -> tuple[object, ...]:
    """The store-assigned fields of a chat document (``_CHAT_ROW``), as the rebuild takes them."""
    return (
        required(doc, "seq"),
        required(doc, "revision"),
        stored_time(doc.get("created_us")),
        stored_time(doc.get("updated_us")),
        stored_time(doc.get("last_message_us")),
        stored_time(doc.get("deleted_us")),
    )
