"""Configuration, lifecycle and the chat <-> session mapping shared by the driver's mixins."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import weakref
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from threadkeep import Chat, ChatStatus, InvalidArgument, participant_id
from threadkeep.driver import DriverBase

from ._cache import LRUCache
from ._codec import decode_strings, encode_strings, parse_time
from ._errors import map_service_errors, mapped
from ._locators import ChatSessionRegistry, LocatorIndex, SpaceHandle
from .emulator import FaultRule, MemoryService, NotFoundError, Session, named_service

__all__ = ["ATTEMPTS", "DEFAULT_CACHE_SIZE", "MemServiceBase", "is_hot"]

DEFAULT_CACHE_SIZE = 10_000
"""Entries of each in-process cache (chats, locations, hot sessions)."""

_SECRET_KEY = "threadkeep:cursor-secret"  # noqa: S105 - a dedup key, not a secret
ATTEMPTS = 32
"""Bound on the If-Match retries of one operation."""


class MemServiceBase(DriverBase):
    """Options, lifecycle and helpers; see :class:`threadkeep_memservice.MemServiceDriver`."""

    def __init__(
        self,
        url: str,
        *,
        faults: Sequence[FaultRule] = (),
        fault_seed: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        space: str = "threadkeep",
        service: MemoryService | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        name = url.partition("://")[2].strip("/")
        if "?" in name or "/" in name:
            raise InvalidArgument(f"{url!r}: use memservice://NAME (a plain name) or memservice://")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1:
            raise InvalidArgument(f"cache_size must be a positive integer, not {cache_size!r}")
        self.service = service or (named_service(name) if name else MemoryService())
        self.cache_size = cache_size
        self._space_key = space
        self._fault_rules = tuple(faults)
        self._fault_seed = fault_seed
        self._handle: SpaceHandle | None = None
        self._locators_: LocatorIndex | None = None
        self._registry_: ChatSessionRegistry | None = None
        self._hot_sessions: LRUCache[str, Session] = LRUCache(cache_size)
        self._committed_batches: LRUCache[str, bool] = LRUCache(cache_size)  # see _staging
        self._locks: weakref.WeakValueDictionary[UUID, asyncio.Lock] = weakref.WeakValueDictionary()
        self._rng = random.Random()

    # -- lifecycle -----------------------------------------------------------------------

    async def _open(self) -> None:
        if self._fault_seed is not None:
            self.service.faults.reseed(self._fault_seed)
        self.service.faults.add(*self._fault_rules)
        try:
            with map_service_errors():
                space = await self.service.create_space(dedup_key=self._space_key)
        except BaseException:
            self.service.faults.remove(*self._fault_rules)
            raise
        if self._handle is None or self._handle.space_id != space.space_id:
            self._handle = SpaceHandle(self.service, space.space_id)
            self._locators_ = LocatorIndex(self._handle, self.cache_size)
            self._registry_ = ChatSessionRegistry(self._handle, self._locators_, self.cache_size)

    async def _close(self) -> None:
        self.service.faults.remove(*self._fault_rules)

    @mapped
    async def _load_secret(self, candidate: bytes) -> bytes:
        session, _ = await self.service.create_session(
            self.space_id,
            dedup_key=_SECRET_KEY,
            description="//meta/cursor-secret/",
            metadata={"secret": base64.b64encode(candidate).decode("ascii")},
        )
        return base64.b64decode(session.metadata["secret"])

    @property
    def space_id(self) -> str:
        """The id of the space this store keeps its sessions in (set by ``open``)."""
        assert self._handle is not None, "the store is not open"
        return self._handle.space_id

    @property
    def locators(self) -> LocatorIndex:
        """The locator index (message, tool-call, reasoning and chat locators)."""
        assert self._locators_ is not None, "the store is not open"
        return self._locators_

    @property
    def registry(self) -> ChatSessionRegistry:
        """The chat uuid -> session id registry (bounded LRU, then locator)."""
        assert self._registry_ is not None, "the store is not open"
        return self._registry_

    async def _backoff(self, attempt: int) -> None:
        # Full jitter, exponential, capped at 50 ms: writers in other replicas retrying
        # their If-Match writes spread out instead of colliding again.
        await asyncio.sleep(self._rng.random() * min(0.001 * 2**attempt, 0.05))

    def _chat_lock(self, chat_id: UUID) -> asyncio.Lock:
        """Return the in-process lock that queues this instance's appends to one chat."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    # -- chats as sessions ---------------------------------------------------------------

    def _chat_document(self, chat: Chat, last_message_at: datetime | None) -> dict[str, Any]:
        """Return a chat session's metadata: the chat record plus ``last_message_at``."""
        body = json.loads(self.record_body(chat))
        document: dict[str, Any] = {"chat": encode_strings(body)}
        if last_message_at is not None:
            document["last_message_at"] = last_message_at.isoformat()
        return document

    def _chat_of(self, session: Session) -> Chat:
        """Rebuild a chat from its session: body from metadata, columns from the service."""
        body = decode_strings(session.metadata["chat"])
        deleted_at = parse_time(body.get("deleted_at"))
        if deleted_at is None and session.deleted_at is not None:
            deleted_at = datetime.fromtimestamp(session.deleted_at, UTC)
        last_message_at = parse_time(session.metadata.get("last_message_at"))
        # An append is an update of the chat (SPI: _insert_messages sets updated_at).
        stamps = [t for t in (parse_time(body.get("updated_at")), last_message_at) if t]
        return self.record_from_body(
            self.chat_model,
            body,
            seq=session.sequence_id,
            revision=session.version,
            last_message_at=last_message_at,
            updated_at=max(stamps) if stamps else None,
            deleted_at=deleted_at,
        )

    async def _chat_session(
        self, chat_id: UUID, *, include_deleted: bool
    ) -> tuple[Session, Chat] | None:
        """Return the chat's session and chat, or ``None`` if no such (live) session."""
        session_id = await self.registry.resolve(chat_id)
        if session_id is None:
            return None
        try:
            session = await self.service.get_session(
                self.space_id, session_id, include_deleted=include_deleted
            )
        except NotFoundError:
            return None
        chat = self._chat_of(session)
        if chat.chat_id != chat_id:
            self.registry.unregister(chat_id)
            return None
        return session, chat

    async def _hot_session(self, chat_id: UUID) -> Session | None:
        """Return the session of a live, hot chat (not deleted, not archived), or ``None``."""
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None or not is_hot(found[1]):
            return None
        self._hot_sessions.put(found[0].session_id, found[0])
        return found[0]

    @staticmethod
    def _participant(chat: Chat) -> str:
        return participant_id(chat.user_id)


def is_hot(chat: Chat) -> bool:
    """Return whether appends and edits may go to the chat (live and not archived)."""
    return chat.deleted_at is None and chat.status is not ChatStatus.ARCHIVED
