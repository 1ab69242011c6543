"""The hot-row primitives cold archiving needs: scan, delete while archived, restore.

``delete_archived_rows`` deletes only while the chat is archived at the expected revision,
checked by ``If-Match`` on the session version read at that moment: each batch of up to
200 deletes is conditional on the version the previous one produced, so a rehydration (or
any write) in between stops the delete there, and whatever it removed is restored from
the bundle. Restores write events with
their original ``seq`` as explicit sequence ids (the service's import mode) and skip
messages already stored, so a rerun after a crash is harmless. Archived ids are recorded
as ``archived:<uuid>`` sessions under the chat's ``//loc/`` prefix (written for real, not
best effort, since an archiver can rerun its step) and go with ``purge_chat``.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from threadkeep import ChatStatus, Conflict, Message, PreparedMessage

from ._base import ATTEMPTS
from ._codec import CHUNK_TYPE, MESSAGE_TYPES, columns, message_events
from ._errors import mapped
from ._locators import LOCATOR_PREFIX
from ._messages import MessagePrimitives
from ._staging import COMMIT_TYPE, count_committed_heads
from .emulator import (
    MAX_BATCH,
    ConflictError,
    DuplicateEventKey,
    Event,
    NewEvent,
    NotFoundError,
    Session,
)

__all__ = ["ArchivePrimitives"]


class ArchivePrimitives(MessagePrimitives):
    """``scan_messages``, ``delete_hot_messages``, ``delete_archived_rows``, restore, ids."""

    @mapped
    async def scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        # A soft-deleted chat's session (and events) are read too (``include_deleted``).
        found_session = await self._chat_session(chat_id, include_deleted=True)
        if found_session is None:
            return []
        session_id = found_session[0].session_id
        found: list[Message] = []
        pages = self._heads(session_id, after=after_seq, page=min(200, limit), include_deleted=True)
        async for heads in pages:
            found += await self._materialize(session_id, chat_id, heads, include_deleted=True)
            if len(found) >= limit:
                return found[:limit]
        return found

    @mapped
    async def delete_hot_messages(self, chat_id: UUID) -> int:
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None:
            return 0
        return await self._delete_typed(found[0], [*MESSAGE_TYPES, CHUNK_TYPE, COMMIT_TYPE])

    @mapped
    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None:
            return None
        session, chat = found
        if chat.status is not ChatStatus.ARCHIVED or session.version != expected_revision:
            return None
        return await self._delete_events_while(session)

    async def _delete_events_while(self, session: Session) -> dict[str, int]:
        """Delete every event of the session, each batch conditional on the last version.

        The first batch is conditional on ``session.version``: a write by anyone else
        stops the delete there. Returns how many message heads and steps went.
        """
        version = session.version
        deleted: list[Event] = []
        while events := await self.service.list_events(
            self.space_id, session.session_id, limit=MAX_BATCH
        ):
            ids = [e.event_id for e in events]
            try:
                version = await self.service.delete_events(
                    self.space_id, session.session_id, ids, hard=True, if_match=version
                )
            except ConflictError:
                break
            deleted += events
        self._hot_sessions.pop(session.session_id)
        steps = sum(e.event_type == "step" for e in deleted)
        return {"messages": count_committed_heads(deleted), "steps": steps}

    async def _delete_typed(self, session: Session, types: list[str]) -> int:
        """Hard-delete every event of these types; return how many were heads or steps.

        Heads of batches that never committed (staged parts left by a crash) go too,
        uncounted: they were never messages.
        """
        deleted: list[Event] = []
        while events := await self.service.list_events(
            self.space_id, session.session_id, event_types=types, limit=MAX_BATCH
        ):
            ids = [e.event_id for e in events]
            await self.service.delete_events(self.space_id, session.session_id, ids, hard=True)
            deleted += events
        self._hot_sessions.pop(session.session_id)
        plain = sum(e.event_type not in (*MESSAGE_TYPES, CHUNK_TYPE, COMMIT_TYPE) for e in deleted)
        return count_committed_heads(deleted) + plain

    @mapped
    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        found = await self._chat_session(chat_id, include_deleted=True)
        if found is None:
            return 0
        participant = self._participant(found[1])
        added = 0
        for item_id in item_ids:
            _, created = await self.service.create_session(
                self.space_id,
                dedup_key=self.locators.key("archived", item_id),
                description=f"{LOCATOR_PREFIX}{chat_id}/archived/",
                participants=[participant],
                metadata={"kind": "archived", "chat_id": str(chat_id)},
            )
            added += int(created)
        return added

    @mapped
    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        try:
            session = await self.service.find_session(
                self.space_id, dedup_key=self.locators.key("archived", item_id)
            )
        except NotFoundError:
            return None
        return UUID(str(session.metadata["chat_id"]))

    @mapped
    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None:
            return 0
        session_id = found[0].session_id
        inserted = 0
        for group in self._restore_groups([m for m in messages if m.seq is not None]):
            inserted += await self._restore_group(session_id, group)
        self._hot_sessions.pop(session_id)
        return inserted

    def _restore_groups(self, messages: Sequence[Message]) -> list[list[list[NewEvent]]]:
        """Group each message's events so that one group fits one batch call."""
        groups: list[list[list[NewEvent]]] = [[]]
        size = 0
        for message in messages:
            events = self._restored_events(message)
            if size + len(events) > MAX_BATCH and groups[-1]:
                groups.append([])
                size = 0
            groups[-1].append(events)
            size += len(events)
        return [g for g in groups if g]

    def _restored_events(self, message: Message) -> list[NewEvent]:
        prepared = PreparedMessage(
            message=message, body=self.message_body(message), fingerprint=self.fingerprint(message)
        )
        cols = columns(
            message,
            revision=message.revision,
            created_at=message.created_at,
            updated_at=message.updated_at,
            deleted_at=message.deleted_at,
            fingerprint=prepared.fingerprint,
        )
        head, *chunks = message_events(prepared, cols)
        explicit = NewEvent(head.event_type, head.body, head.dedup_key, sequence_id=message.seq)
        return [explicit, *chunks]

    async def _restore_group(self, session_id: str, group: list[list[NewEvent]]) -> int:
        for _ in range(ATTEMPTS):
            keys = [str(events[0].dedup_key) for events in group]
            stored = await self.service.get_events(self.space_id, session_id, dedup_keys=keys)
            present = {e.dedup_key for e in stored}
            todo = [events for events in group if events[0].dedup_key not in present]
            if not todo:
                return 0
            try:
                await self.service.create_events(
                    self.space_id, session_id, [e for events in todo for e in events]
                )
            except (DuplicateEventKey, ConflictError):
                continue
            return len(todo)
        raise Conflict("restoring messages kept colliding with concurrent writers; try again")
