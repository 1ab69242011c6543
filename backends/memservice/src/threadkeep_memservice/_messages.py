"""Message primitives besides appends: reads by page, by id and by agui_id; edits; hiding.

Lookups by uuid (``get_message``, ``find_nested``) go through the locator index: the
cache, else one point read of the locator, then the chat's session and the message's head
event (two more point reads), checked to hold that very uuid. ``replace_message`` is given
the message itself, so it finds the head by the chat and the event key, not by a locator
that may have been lost. Every write to an event is conditional on the session version and
the event's version token.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from threadkeep import (
    Conflict,
    Message,
    MessageFilter,
    NestedKind,
    PreparedMessage,
    skip_damaged,
)
from threadkeep import message_matches as matches

from ._appends import AppendPrimitives
from ._base import ATTEMPTS, is_hot
from ._codec import (
    agui_event_key,
    columns,
    columns_of,
    encode_strings,
    event_key,
    message_events,
)
from ._errors import mapped
from ._locators import Location
from ._reads import Visible, batched, is_hidden
from .emulator import ConflictError, Event, EventPatch, NotFoundError, Session

__all__ = ["MessagePrimitives"]


def _types_for(message_filter: MessageFilter) -> tuple[str, ...]:
    if message_filter.kinds is None:
        return ("message", "boundary")
    return tuple(sorted(str(k) for k in message_filter.kinds))


class MessagePrimitives(AppendPrimitives):
    """Reads, compare-and-set edits and hiding of messages."""

    # -- pages -------------------------------------------------------------------------

    @mapped
    async def page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        session = await self._hot_session(chat_id)
        if session is None:
            return None
        found: list[Message] = []
        async for heads in self._heads(
            session.session_id,
            types=_types_for(message_filter),
            before=before_seq,
            descending=True,
            page=min(200, max(limit, 20)),
        ):
            visible = [h for h in heads if not is_hidden(h)]
            chunks = await self._chunks_of(session.session_id, visible)
            build = functools.partial(self._message_of, chat_id=chat_id, chunks=chunks)
            for head in visible:  # rebuilt one by one: a damaged row past the page is not read
                message = skip_damaged(build, head)
                if message is not None and matches(message_filter, message):
                    found.append(message)
                    if len(found) == limit:
                        return found
        return found

    @mapped
    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        found_session = await self._chat_session(chat_id, include_deleted=False)
        if found_session is None or found_session[1].deleted_at is not None:
            return []
        session_id = found_session[0].session_id
        found: list[Message] = []
        async for heads in self._heads(session_id, after=after_seq, page=min(200, limit)):
            visible = [h for h in heads if not is_hidden(h)]
            found += await self._materialize(session_id, chat_id, visible)
            if len(found) >= limit:
                return found[:limit]
        return found

    # -- by id ---------------------------------------------------------------------------

    async def _locate_visible(self, message_id: UUID) -> Visible | None:
        location = await self.locators.locate("message", message_id)
        if location is None:
            return None
        found = await self._visible_at(location, message_id)
        if found is None:
            self.locators.forget("message", message_id)
        return found

    async def _locate_own(self, message: Message) -> Visible | None:
        """Read the visible stored version of ``message`` without its ``message:`` locator.

        Its head event's key follows from the message (:func:`event_key`: ``agui_id`` or
        ``message_id``, both immutable) and its chat's session from the registry, which never
        loses it. A caller that reached the message another way (a tool call's or reasoning's
        locator) must not fail here because the message's own locator write was lost:
        ``None`` from ``replace_message`` means "changed", so ``Store`` would retry a write
        that could never land and report a ``Conflict``.
        """
        if message.chat_id is None:
            return await self._locate_visible(message.message_id)
        session_id = await self.registry.resolve(message.chat_id)
        if session_id is None:
            return None
        location = Location(session_id, message.chat_id, event_key(message))
        found = await self._visible_at(location, message.message_id)
        if found is not None:
            self.locators.remember("message", message.message_id, location)
        return found

    @mapped
    async def get_message(self, message_id: UUID) -> Message | None:
        found = await self._locate_visible(message_id)
        return None if found is None else found[2]

    @mapped
    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        session_id = await self.registry.resolve(chat_id)
        if session_id is None:
            return None
        location = Location(session_id, chat_id, agui_event_key(agui_id))
        found = await self._visible_at(location, None)
        if found is None or found[2].agui_id != agui_id:
            return None
        return found[2]

    @mapped
    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        location = await self.locators.locate(kind, item_id)
        if location is None:
            return None
        found = await self._visible_at(location, None)
        message = None if found is None else found[2]
        items = [] if message is None else _nested_ids(message, kind)
        if message is None or item_id not in items:
            self.locators.forget(kind, item_id)
            return None
        return message

    @mapped
    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        session = await self._hot_session(chat_id)
        if session is None:
            return None
        async for heads in self._heads(session.session_id, descending=True):
            visible = [h for h in heads if not is_hidden(h)]
            for message in await self._materialize(session.session_id, chat_id, visible):
                items = message.tool_calls if kind == "tool_call" else message.reasonings
                if any(item.agui_id == agui_id for item in items):
                    return message
        return None

    # -- edits ---------------------------------------------------------------------------

    @mapped
    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        message_id = prepared.message.message_id
        for attempt in range(ATTEMPTS):
            found = await self._locate_own(prepared.message)
            if found is None:
                return None
            session, head, current = found
            if current.revision != expected_revision or not is_hot(self._chat_of(session)):
                return None
            try:
                stored = await self._overwrite(session, head, current, prepared, now)
            except ConflictError:
                await self._backoff(attempt)
                continue
            except NotFoundError:
                return None
            participant = self._participant(self._chat_of(session))
            await self._write_locators(session.session_id, stored, participant, known=current)
            return stored
        raise Conflict(f"message {message_id} kept changing under concurrent writers")

    async def _overwrite(
        self,
        session: Session,
        head: Event,
        current: Message,
        prepared: PreparedMessage,
        now: datetime,
    ) -> Message:
        """Write ``prepared`` over the head event, swapping its chunks, in one atomic batch."""
        cols = columns(
            prepared.message,
            revision=current.revision + 1,
            created_at=current.created_at,
            updated_at=now,
            deleted_at=None,
            fingerprint=prepared.fingerprint,
        )
        new_head, *chunks = message_events(prepared, cols)
        old_chunks = await self._chunk_ids(session.session_id, head)
        await self.service.batch_events(
            self.space_id,
            session.session_id,
            creates=chunks,
            patches=[EventPatch(head.event_id, new_head.body, if_match=head.version)],
            deletes=old_chunks,
            if_match=session.version,
        )
        assert current.chat_id is not None
        return self.message_from_row(
            prepared.body,
            chat_id=current.chat_id,
            seq=head.sequence_id,
            revision=current.revision + 1,
            created_at=current.created_at,
            updated_at=now,
        )

    @mapped
    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        for attempt in range(ATTEMPTS):
            found = await self._chat_session(chat_id, include_deleted=False)
            if found is None or found[1].deleted_at is not None:
                return 0
            session = found[0]
            heads = await self._heads_of(session, chat_id, set(message_ids))
            patches = [_hide_patch(h, now) for h in heads if not is_hidden(h)]
            if not patches:
                return 0
            try:
                await self.service.patch_events(
                    self.space_id, session.session_id, patches, if_match=session.version
                )
            except ConflictError:
                await self._backoff(attempt)
                continue
            return len(patches)
        raise Conflict(f"chat {chat_id} kept changing under concurrent writers")

    async def _heads_of(self, session: Session, chat_id: UUID, wanted: set[UUID]) -> list[Event]:
        """Return the head events of these messages in the chat (locators, else a scan)."""
        keys: list[str] = []
        for message_id in wanted:
            location = await self.locators.locate("message", message_id)
            if location is not None and location.session_id == session.session_id:
                keys.append(str(location.event_key))
        found: dict[str, Event] = {}
        for batch in batched(keys):
            for head in await self.service.get_events(
                self.space_id, session.session_id, dedup_keys=batch
            ):
                found[str(columns_of(head)["message_id"])] = head
        missing = {str(m) for m in wanted} - set(found)
        if missing:
            # Lost locators: the chat's own session is scanned (never the space).
            async for heads in self._heads(session.session_id):
                for head in heads:
                    stored_id = str(columns_of(head)["message_id"])
                    if stored_id in missing:
                        found[stored_id] = head
        return [h for m, h in found.items() if UUID(m) in wanted]


def _nested_ids(message: Message, kind: NestedKind) -> list[UUID]:
    if kind == "tool_call":
        return [c.tool_call_id for c in message.tool_calls]
    return [r.reasoning_id for r in message.reasonings]


def _hide_patch(head: Event, now: datetime) -> EventPatch:
    cols = columns_of(head)
    cols.update(
        deleted_at=now.isoformat(), updated_at=now.isoformat(), revision=int(cols["revision"]) + 1
    )
    body = dict(head.body)
    body["cols"] = encode_strings(cols)
    return EventPatch(head.event_id, body, if_match=head.version)
