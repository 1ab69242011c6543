"""Chat primitives: one session per chat, found by dedup key, registry or description.

A chat is a session with ``dedup_key = chat.dedup_key`` (``chat_deduplication_key(user_id,
thread_id, tenant_id)``, so N concurrent creates adopt one session), description
``//chat/<chat_id>/``, the owner's participant id, and the chat record in its metadata.
Its ``seq`` is the session's space-wide ``sequence_id`` and its ``revision`` is the
session's version, which the service grows on every write to the session or its events.

Soft delete writes ``deleted_at`` into the metadata first (the source of truth for every
reader), then soft-deletes the session, which frees the dedup key. If that second call is
lost the next ``create_chat`` of the key adopts the half-deleted session, finishes the
delete and creates afresh. Restore runs the other way: undelete the session (the service
refuses if another live chat holds the key), then clear ``deleted_at``.

Tenant keys and older sessions (issue 12). A session's dedup key cannot change, and a chat
with a tenant created before the key included the tenant holds the tenant-less key. The
rule: a call naming a tenant first asks for the tenant-aware key and then, if no live
session holds it, for the tenant-less one, whose chat it takes only when that chat is of
the same tenant (the tenant's older chat). A call naming no tenant takes the chat of the
tenant-less key only when it has no tenant; if an older chat of a tenant holds that key,
``create_chat`` without a tenant raises ``Conflict`` (never hands that chat out) until the
older chat is deleted. Chats created since keep their tenant in the key.
"""

from __future__ import annotations

import logging
from uuid import UUID

from threadkeep import Chat, ChatFilter, Conflict, chat_matches, participant_id

from ._base import ATTEMPTS, MemServiceBase
from ._errors import map_service_errors, mapped
from ._locators import CHAT_PREFIX, LOCATOR_PREFIX, Location, chat_description
from .emulator import ConflictError, DedupKeyTaken, MemServiceError, NotFoundError, Session

__all__ = ["ChatPrimitives"]

_log = logging.getLogger("threadkeep_memservice")


class ChatPrimitives(MemServiceBase):
    """The chat primitives of the driver SPI over chat sessions."""

    @mapped
    async def insert_chat(self, chat: Chat) -> Chat:
        if chat.tenant_id is not None:
            older = await self._older_tenant_chat(chat.user_id, chat.thread_id, chat.tenant_id)
            if older is not None:
                return older
        document = self._chat_document(chat, chat.last_message_at)
        for _ in range(ATTEMPTS):
            session, created = await self.service.create_session(
                self.space_id,
                dedup_key=chat.dedup_key,
                description=chat_description(chat.chat_id),
                participants=[self._participant(chat)],
                metadata=document,
            )
            stored = self._chat_of(session)
            if not created and stored.deleted_at is None and stored.tenant_id != chat.tenant_id:
                msg = (
                    f"an older chat of tenant {stored.tenant_id!r} holds the key of user "
                    f"{chat.user_id!r} and thread {chat.thread_id!r} without a tenant; "
                    "delete it to create a chat without a tenant there"
                )
                raise Conflict(msg)
            if created or stored.deleted_at is None:
                self.registry.register(stored.chat_id, session.session_id)
                if created:
                    location = Location(session.session_id, chat.chat_id)
                    await self.locators.write(
                        "chat", chat.chat_id, location, self._participant(chat)
                    )
                return stored
            await self._finish_delete(session)
        raise Conflict(f"chat ({chat.user_id!r}, {chat.thread_id!r}) kept changing; try again")

    async def _finish_delete(self, session: Session) -> None:
        """Soft-delete a session whose chat already says deleted (frees its dedup key)."""
        try:
            await self.service.delete_session(
                self.space_id, session.session_id, if_match=session.version
            )
        except (ConflictError, NotFoundError):
            return

    @mapped
    async def get_chat(self, chat_id: UUID) -> Chat | None:
        found = await self._chat_session(chat_id, include_deleted=True)
        return None if found is None else found[1]

    @mapped
    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        found = await self._live_chat_of_key(
            Chat(user_id=user_id, thread_id=thread_id, tenant_id=tenant_id).dedup_key,
            (tenant_id, user_id, thread_id),
        )
        if found is None and tenant_id is not None:
            return await self._older_tenant_chat(user_id, thread_id, tenant_id)
        return found

    async def _older_tenant_chat(self, user_id: str, thread_id: str, tenant_id: str) -> Chat | None:
        """The tenant's live chat created under the tenant-less key (module docstring)."""
        key = Chat(user_id=user_id, thread_id=thread_id).dedup_key
        return await self._live_chat_of_key(key, (tenant_id, user_id, thread_id))

    async def _live_chat_of_key(
        self, key: str, identity: tuple[str | None, str, str]
    ) -> Chat | None:
        """The live chat of the session holding ``key``, if its identity is ``identity``."""
        try:
            session = await self.service.find_session(self.space_id, dedup_key=key)
        except NotFoundError:
            return None
        chat = self._chat_of(session)
        if (
            chat.deleted_at is not None
            or (chat.tenant_id, chat.user_id, chat.thread_id) != identity
        ):
            return None
        self.registry.register(chat.chat_id, session.session_id)
        return chat

    @mapped
    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        for attempt in range(ATTEMPTS):
            found = await self._chat_session(chat.chat_id, include_deleted=True)
            if found is None:
                return None
            session, stored = found
            if expected_revision is not None and session.version != expected_revision:
                return None
            try:
                return await self._write_chat(session, stored, chat)
            except ConflictError:
                if expected_revision is not None:
                    return None
                await self._backoff(attempt)
        raise Conflict(f"chat {chat.chat_id} kept changing; try again")

    async def _write_chat(self, session: Session, stored: Chat, chat: Chat) -> Chat:
        """Write ``chat`` over ``stored`` at ``session.version``; see the module docstring."""
        chat = chat.model_copy(update={"created_at": stored.created_at})
        last = stored.last_message_at
        document = self._chat_document(chat, last)
        deleting = stored.deleted_at is None and chat.deleted_at is not None
        restoring = stored.deleted_at is not None and chat.deleted_at is None
        version = session.version
        if restoring and session.deleted_at is not None:
            try:
                version = (
                    await self.service.undelete_session(
                        self.space_id, session.session_id, if_match=version
                    )
                ).version
            except DedupKeyTaken as exc:
                msg = (
                    f"another live chat holds ({stored.user_id!r}, {stored.thread_id!r}); "
                    "delete it before restoring this one"
                )
                raise Conflict(msg) from exc
        if session.deleted_at is not None and not restoring:
            msg = f"chat {chat.chat_id} is deleted; restore it before changing it"
            raise Conflict(msg)
        written = await self.service.update_session(
            self.space_id, session.session_id, if_match=version, metadata=document
        )
        if deleting:
            try:
                written = await self.service.delete_session(
                    self.space_id, session.session_id, if_match=written.version
                )
            except MemServiceError as exc:
                _log.warning(
                    "chat %s reads as deleted but its session is live (%s)", chat.chat_id, exc
                )
        return self._chat_of(written)

    @mapped
    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        participant = None
        if chat_filter.user_id is not None:
            participant = participant_id(chat_filter.user_id)
        found: list[Chat] = []
        before = before_seq
        while True:
            sessions = await self.service.list_sessions(
                self.space_id,
                description_prefix=CHAT_PREFIX,
                participant=participant,
                before=before,
                limit=200,
                include_deleted=chat_filter.deleted != "exclude",
            )
            for session in sessions:
                chat = self._chat_of(session)
                if chat_matches(chat_filter, chat):
                    found.append(chat)
                    if len(found) == limit:
                        return found
            if len(sessions) < 200:
                return found
            before = sessions[-1].sequence_id

    @mapped
    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        counts: dict[str, int] = {"chats": 0, "messages": 0, "locators": 0}
        found = await self._chat_session(chat_id, include_deleted=True)
        if found is None:
            return counts
        session = found[0]
        removed = await self.locators.purge_chat(chat_id)
        counts["archived_ids"] = removed.pop("archived", 0)
        counts["locators"] = sum(removed.values())
        try:
            events = await self.service.purge_session(self.space_id, session.session_id)
        except NotFoundError:
            return counts
        self.registry.unregister(chat_id)
        self._hot_sessions.pop(session.session_id)
        counts["chats"] = 1
        counts["messages"] = events.get("message", 0) + events.get("boundary", 0)
        if events.get("step"):
            counts["steps"] = events["step"]
        counts.update(await self._purge_chat_records(chat_id))
        return counts

    async def erase_user_records(self, user_id: str) -> dict[str, int]:
        """Remove the person's index records that outlived their chat (``Store.erase_user``).

        Locators of a chat whose session expired after its soft-delete TTL, found by the
        person's participant id under ``//loc/``: an indexed listing, never the space.
        Called after every chat of the person is purged.

        Returns:
            ``{"locators": n}``: the leftover index records removed (the receipt's
            ``"hot"`` entry counts them).
        """
        with map_service_errors():
            leftovers = 0
            while batch := await self.service.list_sessions(
                self.space_id,
                description_prefix=LOCATOR_PREFIX,
                participant=participant_id(user_id),
                limit=200,
                include_deleted=True,
            ):
                for session in batch:
                    await self.service.purge_session(self.space_id, session.session_id)
                    leftovers += 1
        return {"locators": leftovers}

    async def _purge_chat_records(self, chat_id: UUID) -> dict[str, int]:
        """Remove records kept outside the chat's session (runs); overridden by the runs mixin."""
        del chat_id
        return {}
