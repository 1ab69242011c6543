"""``insert_messages``: a batch append as one conditional batch call (or staged parts).

The batch's head and chunk events go to the service in one ``create_events`` call, which is
atomic (all or nothing) and gives the heads consecutive ``sequence_id``s after every id the
session has used: that id is the message's ``seq``, strictly increasing in commit order.
The call is conditional on the session version the driver last saw the chat live and hot
at (``If-Match``), so an append can never land in a chat that was deleted or archived in
between; on a stale version the driver re-reads the session and retries (bounded). A batch
of more than 200 events is written in staged parts behind one commit marker, all or nothing
for every reader (:mod:`._staging`).

Idempotency needs no read in the common case: each head's dedup key is derived from its
``agui_id``, so a repeated ``agui_id`` makes the service refuse the whole batch
(``DuplicateEventKey``); the driver then reads those stored messages, raises
``IdempotencyConflict`` if one differs (nothing was written), and retries without them.

After the commit come two best-effort writes that never fail the append: the chat's
``last_message_at`` (a conditional session update), then the locators of the new messages,
tool calls and reasonings (AG-UI seed, "Best-effort writes").

Appends to one chat from one store instance queue on an in-process lock (FIFO), so local
writers never race each other's ``If-Match``; writers in other replicas still can, and
retry with jittered exponential backoff, a bounded number of times.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from threadkeep import Conflict, IdempotencyConflict, Message, PreparedMessage
from threadkeep.driver import same_payload

from ._base import ATTEMPTS, is_hot
from ._codec import columns, event_key, message_events
from ._errors import mapped
from ._locators import Location
from ._reads import ReadHelpers, batched
from .emulator import (
    MAX_BATCH,
    ConflictError,
    DuplicateEventKey,
    Event,
    MemServiceError,
    NewEvent,
    NotFoundError,
    Session,
)

__all__ = ["AppendPrimitives"]

_log = logging.getLogger("threadkeep_memservice")


class AppendPrimitives(ReadHelpers):
    """Appends, and the best-effort writes that follow them."""

    @mapped
    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        async with self._chat_lock(chat_id):
            committed = await self._commit(chat_id, messages, now)
        if committed is None:
            return None
        results, session = committed
        participant = self._participant(self._chat_of(session))
        for message, created in results:
            if created:
                await self._write_locators(session.session_id, message, participant)
        return results

    async def _commit(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> tuple[list[tuple[Message, bool]], Session] | None:
        """Write the batch (one conditional call, or staged parts) and touch the chat."""
        session = await self._append_session(chat_id)
        if session is None:
            return None
        keys = [event_key(p.message) for p in messages]
        stored: dict[str, Message] = {}
        unsettled: Sequence[str] = ()  # keys the service said are taken: look at them first
        for attempt in range(ATTEMPTS):
            try:
                if unsettled:
                    session, _ = await self._settle(session, chat_id, unsettled, stored)
                    self._check_same(messages, keys, stored)
                    unsettled = ()
                fresh = [(p, k) for p, k in zip(messages, keys, strict=True) if k not in stored]
                if not fresh:
                    return [(stored[k], False) for k in keys], session
                events = self._new_events([p for p, _ in fresh], now)
                if len(events) <= MAX_BATCH:
                    heads, version = await self._create(session, events)
                else:
                    # Staged parts cannot meet a taken key halfway: settle every key first.
                    session, changed = await self._settle(
                        session, chat_id, [k for _, k in fresh], stored
                    )
                    self._check_same(messages, keys, stored)
                    if changed:
                        continue
                    heads, version = await self._create_staged(session, events)
            except DuplicateEventKey as exc:
                unsettled = exc.keys
                continue
            except (ConflictError, NotFoundError):
                # A stale version, or a session deleted since it was cached: read it again.
                await self._backoff(attempt)
                refreshed = await self._hot_session(chat_id)
                if refreshed is None:
                    return None
                session = refreshed
                continue
            built = self._built(chat_id, fresh, heads, now)
            created = dict(zip((k for _, k in fresh), built, strict=True))
            session = await self._touch(dataclasses.replace(session, version=version), now)
            results = [(created[k], True) if k in created else (stored[k], False) for k in keys]
            return results, session
        raise Conflict(f"chat {chat_id} kept changing under concurrent writers; try again")

    async def _append_session(self, chat_id: UUID) -> Session | None:
        """Return the session last seen hot (its version guards the write), or read it."""
        session_id = self.registry.get_session_id(chat_id)
        cached = None if session_id is None else self._hot_sessions.get(session_id)
        return cached if cached is not None else await self._hot_session(chat_id)

    def _new_events(self, prepared: Sequence[PreparedMessage], now: datetime) -> list[NewEvent]:
        events: list[NewEvent] = []
        for item in prepared:
            cols = columns(
                item.message,
                revision=0,
                created_at=item.message.created_at or now,
                updated_at=now,
                deleted_at=None,
                fingerprint=item.fingerprint,
            )
            events += message_events(item, cols)
        return events

    async def _create(self, session: Session, events: list[NewEvent]) -> tuple[list[Event], int]:
        created, version = await self.service.create_events(
            self.space_id, session.session_id, events, if_match=session.version
        )
        heads = [e for e in created if e.event_type != "chunk"]
        return heads, version

    def _built(
        self,
        chat_id: UUID,
        fresh: Sequence[tuple[PreparedMessage, str]],
        heads: Sequence[Event],
        now: datetime,
    ) -> list[Message]:
        return [
            self.message_from_row(
                item.body,
                chat_id=chat_id,
                seq=head.sequence_id,
                revision=0,
                created_at=item.message.created_at or now,
                updated_at=now,
            )
            for (item, _), head in zip(fresh, heads, strict=True)
        ]

    def _check_same(
        self,
        messages: Sequence[PreparedMessage],
        keys: Sequence[str],
        stored: dict[str, Message],
    ) -> None:
        """Raise ``IdempotencyConflict`` if a stored message differs from the one sent again."""
        for item, key in zip(messages, keys, strict=True):
            existing = stored.get(key)
            if existing is not None and not same_payload(existing, item):
                msg = (
                    f"agui_id {existing.agui_id!r} is already stored in chat {existing.chat_id} "
                    f"(message {existing.message_id}, seq {existing.seq}) with a different "
                    "payload; nothing of the batch was written"
                )
                raise IdempotencyConflict(msg)

    async def _settle(
        self, session: Session, chat_id: UUID, keys: Sequence[str], stored: dict[str, Message]
    ) -> tuple[Session, bool]:
        """Look at the heads holding these keys: committed ones go into ``stored``.

        Heads of a batch that never committed (a writer that crashed between parts) are in
        the way of the same messages sent again: they are deleted (:mod:`._staging`).

        Returns:
            ``(the session, at its new version if anything was deleted; whether any head
            was found)``.

        Raises:
            ConflictError / NotFoundError: If the session changed or went meanwhile.
        """
        wanted = [k for k in keys if k.startswith(("a:", "m:"))]
        heads: list[Event] = []
        for part in batched(wanted):
            heads += await self.service.get_events(
                self.space_id, session.session_id, dedup_keys=part
            )
        committed = await self._committed_heads(session.session_id, heads)
        messages = await self._materialize(session.session_id, chat_id, committed)
        stored.update({str(h.dedup_key): m for h, m in zip(committed, messages, strict=True)})
        done = {h.event_id for h in committed}
        abandoned = [h for h in heads if h.event_id not in done]
        if abandoned:
            session = await self._discard_staged(session, abandoned)
        return session, bool(heads)

    async def _touch(self, session: Session, now: datetime) -> Session:
        """Set the chat's ``last_message_at`` (best effort); return the session seen last."""
        self._hot_sessions.put(session.session_id, session)
        for attempt in range(ATTEMPTS):
            metadata = {**session.metadata, "last_message_at": now.isoformat()}
            try:
                written = await self.service.update_session(
                    self.space_id, session.session_id, if_match=session.version, metadata=metadata
                )
            except ConflictError:
                await self._backoff(attempt)
                try:
                    session = await self.service.get_session(self.space_id, session.session_id)
                except MemServiceError:
                    return session
                if not is_hot(self._chat_of(session)):
                    return session
                continue
            except MemServiceError as exc:
                _log.warning(
                    "last_message_at of session %s not written (%s)", session.session_id, exc
                )
                return session
            self._hot_sessions.put(written.session_id, written)
            return written
        return session

    async def _write_locators(
        self,
        session_id: str,
        message: Message,
        participant: str,
        known: Message | None = None,
    ) -> None:
        """Write the locators of a message and of its nested records not in ``known``."""
        assert message.chat_id is not None
        location = Location(session_id, message.chat_id, event_key(message))
        if known is None:
            await self.locators.write("message", message.message_id, location, participant)
        old_calls = set() if known is None else {c.tool_call_id for c in known.tool_calls}
        old_reasonings = set() if known is None else {r.reasoning_id for r in known.reasonings}
        for call in message.tool_calls:
            if call.tool_call_id not in old_calls:
                await self.locators.write("tool_call", call.tool_call_id, location, participant)
        for reasoning in message.reasonings:
            if reasoning.reasoning_id not in old_reasonings:
                await self.locators.write(
                    "reasoning", reasoning.reasoning_id, location, participant
                )
