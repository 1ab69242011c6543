"""The locator index and the chat registry (AG-UI seed, "Secondary index and consistency").

The service cannot query across sessions, so finding an entity by its uuid would mean
scanning the space. Instead each locatable entity gets a **locator**: a session whose dedup
key is ``"<kind>:<uuid>"`` (``chat``, ``message``, ``tool_call``, ``reasoning``) and whose
metadata holds the entity's location. A lookup is one indexed point read
(``find_session`` by dedup key), never a scan. Locator descriptions start with
``//loc/<chat_id>/``, so they never appear in chat listings (``//chat/``) and a chat's
locators can be listed (and purged) with it.

Locators are written **entity first, locator second, best effort**: a failed locator write
is logged and swallowed. The writer's own process keeps the location in a bounded LRU cache,
so it is unaffected; another replica may answer "not found" for that entity. A stale
locator (its entity deleted, archived away or never written) resolves to "not found"
because every reader checks that the entity it reaches has the uuid it asked for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from ._cache import LRUCache
from .emulator import MemoryService, MemServiceError, NotFoundError, Session

__all__ = [
    "CHAT_PREFIX",
    "LOCATOR_PREFIX",
    "ChatSessionRegistry",
    "Location",
    "LocatorIndex",
    "LocatorKind",
    "SpaceHandle",
    "chat_description",
]

LocatorKind = Literal["chat", "message", "tool_call", "reasoning", "archived", "step"]
"""What a locator points at; ``archived`` records the chat of an archived message id and
``step`` the chat of a step (both written for real, not best effort)."""

CHAT_PREFIX = "//chat/"
"""Description prefix of chat sessions (``//chat/<chat_id>/``)."""

LOCATOR_PREFIX = "//loc/"
"""Description prefix of locator sessions (``//loc/<chat_id>/<kind>/``)."""

_log = logging.getLogger("threadkeep_memservice.locators")


def chat_description(chat_id: UUID) -> str:
    """Return the description of a chat's session: an index the chat carries itself."""
    return f"{CHAT_PREFIX}{chat_id}/"


@dataclass(frozen=True)
class SpaceHandle:
    """The emulator and the space a store works in."""

    service: MemoryService
    space_id: str


@dataclass(frozen=True)
class Location:
    """Where an entity lives.

    Attributes:
        session_id: The chat's session.
        chat_id: The chat.
        event_key: The dedup key of the message event (``None`` for a chat).
    """

    session_id: str
    chat_id: UUID
    event_key: str | None = None

    def document(self, kind: LocatorKind) -> dict[str, Any]:
        """Return the locator session's metadata."""
        data: dict[str, Any] = {"kind": kind, "session_id": self.session_id}
        data["chat_id"] = str(self.chat_id)
        if self.event_key is not None:
            data["event_key"] = self.event_key
        return data

    @classmethod
    def from_session(cls, session: Session) -> Location:
        """Read a location from a locator session's metadata."""
        data = session.metadata
        return cls(
            session_id=str(data["session_id"]),
            chat_id=UUID(str(data["chat_id"])),
            event_key=data.get("event_key"),
        )


class LocatorIndex:
    """``"<kind>:<uuid>"`` -> :class:`Location`, as locator sessions plus an LRU cache.

    Args:
        space: The emulator and space.
        cache_size: Most locations cached in this process.
    """

    def __init__(self, space: SpaceHandle, cache_size: int) -> None:
        self._space = space
        self._cache: LRUCache[tuple[str, UUID], Location] = LRUCache(cache_size)

    @staticmethod
    def key(kind: LocatorKind, item_id: UUID) -> str:
        """Return the locator's dedup key (at most 46 characters)."""
        return f"{kind}:{item_id}"

    def remember(self, kind: LocatorKind, item_id: UUID, location: Location) -> None:
        """Cache a location this process knows (it wrote or read the entity)."""
        self._cache.put((kind, item_id), location)

    def forget(self, kind: LocatorKind, item_id: UUID) -> None:
        """Drop a cached location (it turned out stale)."""
        self._cache.pop((kind, item_id))

    async def write(
        self, kind: LocatorKind, item_id: UUID, location: Location, participant: str
    ) -> bool:
        """Write (or repoint) a locator, best effort; the location is cached either way.

        Returns:
            Whether the locator is stored. A failure is logged and swallowed: a
            locator is an index, and never fails the operation that created the entity.
        """
        self.remember(kind, item_id, location)
        service, space_id = self._space.service, self._space.space_id
        document = location.document(kind)
        try:
            session, created = await service.create_session(
                space_id,
                dedup_key=self.key(kind, item_id),
                description=f"{LOCATOR_PREFIX}{location.chat_id}/{kind}/",
                participants=[participant],
                metadata=document,
            )
            if not created and session.metadata != document:
                await service.update_session(
                    space_id, session.session_id, if_match=session.version, metadata=document
                )
        except MemServiceError as exc:
            _log.warning(
                "locator %s not written (%s); the entity is stored, but other replicas may "
                "not find it by id",
                self.key(kind, item_id),
                exc,
            )
            return False
        return True

    async def read(self, kind: LocatorKind, item_id: UUID) -> Location | None:
        """Return the stored locator's location (one point read, no cache), or ``None``."""
        try:
            session = await self._space.service.find_session(
                self._space.space_id, dedup_key=self.key(kind, item_id)
            )
        except NotFoundError:
            return None
        return Location.from_session(session)

    async def locate(self, kind: LocatorKind, item_id: UUID) -> Location | None:
        """Return the cached location, else the stored locator's (then cached), or ``None``."""
        cached = self._cache.get((kind, item_id))
        if cached is not None:
            return cached
        location = await self.read(kind, item_id)
        if location is not None:
            self.remember(kind, item_id, location)
        return location

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        """Remove every locator of a chat for good; return how many of each kind."""
        service, space_id = self._space.service, self._space.space_id
        prefix = f"{LOCATOR_PREFIX}{chat_id}/"
        counts: dict[str, int] = {}
        while batch := await service.list_sessions(
            space_id, description_prefix=prefix, limit=200, include_deleted=True
        ):
            for session in batch:
                kind = str(session.metadata.get("kind", "locator"))
                await service.purge_session(space_id, session.session_id)
                counts[kind] = counts.get(kind, 0) + 1
        self._cache.clear()
        return counts


class ChatSessionRegistry:
    """Chat uuid -> session id: an LRU cache, then the ``chat:`` locator, then the chat itself.

    A cold resolve is a constant number of indexed reads and never a scan: the locator's
    point read, and only if that locator was lost, the one listing of the chat's own
    description ``//chat/<chat_id>/`` (written atomically with the chat, so it cannot be
    lost), after which the locator is rewritten (best effort).

    Args:
        space: The emulator and space.
        locators: The locator index.
        cache_size: Most chats cached.
    """

    def __init__(self, space: SpaceHandle, locators: LocatorIndex, cache_size: int) -> None:
        self._space = space
        self.locators = locators
        self._cache: LRUCache[UUID, str] = LRUCache(cache_size)

    def register(self, chat_id: UUID, session_id: str) -> None:
        """Cache ``chat_id -> session_id``."""
        self._cache.put(chat_id, session_id)

    def unregister(self, chat_id: UUID) -> None:
        """Drop a cached mapping (the chat was purged)."""
        self._cache.pop(chat_id)

    def get_session_id(self, chat_id: UUID) -> str | None:
        """Return the cached session id, without calling the service."""
        return self._cache.get(chat_id)

    async def resolve(self, chat_id: UUID) -> str | None:
        """Return the chat's session id, or ``None`` when no session carries the chat."""
        cached = self._cache.get(chat_id)
        if cached is not None:
            return cached
        location = await self.locators.read("chat", chat_id)
        if location is not None:
            self.register(chat_id, location.session_id)
            return location.session_id
        found = await self._space.service.list_sessions(
            self._space.space_id,
            description_prefix=chat_description(chat_id),
            limit=1,
            include_deleted=True,
        )
        if not found:
            return None
        session = found[0]
        self.register(chat_id, session.session_id)
        participant = session.participants[0] if session.participants else "unknown"
        await self.locators.write(
            "chat", chat_id, Location(session.session_id, chat_id), participant
        )
        return session.session_id
