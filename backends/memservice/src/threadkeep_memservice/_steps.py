"""Steps (capability ``steps``): events of the chat's session, with a strong id index.

A step is an event of type ``step`` in its chat's session, keyed ``s:<step_id>``; its
``seq`` is the event's ``sequence_id`` (increasing within the chat, kept by updates).
``save_steps`` of one chat is one ``batch_events`` call (creates and patches together,
conditional on the session version): atomic. Steps of several chats are one call per
chat, so atomic per chat only.

Lookups without a chat (``get_step``, ``steps_for_stack``) need an index across sessions.
Unlike message locators it is written **before** the steps and not best effort: a failed
index write fails the save before any step is stored, so every stored step is findable,
and an index entry whose step never got written just finds nothing. ``step:<id>`` points at
the chat's session; ``stack:<sha256>`` lists the sessions of chats holding that stack.
Both live under the chat's ``//loc/`` prefix and go with ``purge_chat``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from threadkeep import Conflict, Step, StepStatus

from ._archive import ArchivePrimitives
from ._base import ATTEMPTS
from ._codec import decode_strings, encode_strings
from ._errors import mapped
from ._locators import LOCATOR_PREFIX
from ._reads import batched
from .emulator import (
    MAX_PAGE,
    ConflictError,
    DuplicateEventKey,
    Event,
    EventPatch,
    NewEvent,
    NotFoundError,
    Session,
)

__all__ = ["STEP_TYPE", "StepPrimitives", "chat_in"]

STEP_TYPE = "step"
"""Event type of a step."""


def _step_key(step_id: UUID) -> str:
    return f"s:{step_id}"


def chat_in(description: str | None) -> UUID | None:
    """Return the chat id a session description holds, or ``None`` if it holds none.

    Chat sessions are ``//chat/<id>/``, locators ``//loc/<id>/<kind>/``, runs
    ``//run/active/<id>/`` or ``//run/ended/<id>/``.
    """
    for part in (description or "").split("/"):
        try:
            return UUID(part)
        except ValueError:
            continue
    return None


def _stack_key(stack_id: str) -> str:
    return f"stack:{hashlib.sha256(stack_id.encode('utf-8')).hexdigest()}"


class StepPrimitives(ArchivePrimitives):
    """The step primitives of the driver SPI (runs are in :mod:`._runs`)."""

    def _step_of(self, event: Event, chat_id: UUID | None = None) -> Step:
        # The chat from where the event lives, when known: a damaged body names no chat.
        columns: dict[str, Any] = {"seq": event.sequence_id}
        if chat_id is not None:
            columns["chat_id"] = chat_id
        return self.record_from_body(Step, decode_strings(event.body.get("step")), **columns)

    def _step_body(self, step: Step) -> dict[str, Any]:
        return {"step": encode_strings(json.loads(self.record_body(step)))}

    async def _step_events(self, session_id: str) -> list[Event]:
        """Return every step event of a session (deleted chats too), in seq order."""
        found: list[Event] = []
        after: int | None = None
        while True:
            page = await self.service.list_events(
                self.space_id,
                session_id,
                event_types=[STEP_TYPE],
                after=after,
                limit=MAX_PAGE,
                include_deleted=True,
            )
            found += page
            if len(page) < MAX_PAGE:
                return found
            after = page[-1].sequence_id

    async def _steps_of_chat(self, chat_id: UUID) -> tuple[Session, list[Step]] | None:
        found = await self._chat_session(chat_id, include_deleted=True)
        if found is None:
            return None
        session = found[0]
        try:
            events = await self._step_events(session.session_id)
        except NotFoundError:
            return None
        return session, [self._step_of(e, chat_id) for e in events]

    # -- writes --------------------------------------------------------------------------

    @mapped
    async def save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        by_chat: dict[UUID, list[Step]] = {}
        for step in steps:
            by_chat.setdefault(step.chat_id, []).append(step)
        stored: dict[UUID, Step] = {}
        for chat_id, group in by_chat.items():
            async with self._chat_lock(chat_id):
                for step in await self._save_chat_steps(chat_id, group, now):
                    stored[step.step_id] = step
        return [stored[s.step_id] for s in steps if s.step_id in stored]

    async def _save_chat_steps(self, chat_id: UUID, steps: list[Step], now: datetime) -> list[Step]:
        for attempt in range(ATTEMPTS):
            found = await self._chat_session(chat_id, include_deleted=False)
            if found is None:
                return []
            session, chat = found
            existing: dict[str, Event] = {}
            for batch in batched([_step_key(s.step_id) for s in steps]):
                for event in await self.service.get_events(
                    self.space_id, session.session_id, dedup_keys=batch
                ):
                    existing[str(event.dedup_key)] = event
            fresh = [s for s in steps if _step_key(s.step_id) not in existing]
            await self._index_steps(chat_id, session.session_id, self._participant(chat), fresh)
            try:
                return await self._write_steps(session, steps, existing, now)
            except (ConflictError, DuplicateEventKey):
                await self._backoff(attempt)
        raise Conflict(f"steps of chat {chat_id} kept changing under concurrent writers")

    async def _write_steps(
        self, session: Session, steps: list[Step], existing: dict[str, Event], now: datetime
    ) -> list[Step]:
        creates: list[NewEvent] = []
        patches: list[EventPatch] = []
        for step in steps:
            old = existing.get(_step_key(step.step_id))
            if old is None:
                record = step.model_copy(
                    update={"created_at": step.created_at or now, "updated_at": now}
                )
                creates.append(
                    NewEvent(STEP_TYPE, self._step_body(record), _step_key(step.step_id))
                )
            else:
                before = self._step_of(old)
                record = step.model_copy(
                    update={
                        "seq": old.sequence_id,
                        "created_at": before.created_at,
                        "updated_at": now,
                    }
                )
                patches.append(
                    EventPatch(old.event_id, self._step_body(record), if_match=old.version)
                )
        created, patched, _ = await self.service.batch_events(
            self.space_id,
            session.session_id,
            creates=creates,
            patches=patches,
            if_match=session.version,
        )
        chat_id = chat_in(session.description)
        return [self._step_of(e, chat_id) for e in [*created, *patched]]

    async def _index_steps(
        self, chat_id: UUID, session_id: str, participant: str, steps: Sequence[Step]
    ) -> None:
        """Write the ``step:`` and ``stack:`` index entries of new steps (not best effort)."""
        document = {"kind": "step", "session_id": session_id, "chat_id": str(chat_id)}
        for step in steps:
            await self.service.create_session(
                self.space_id,
                dedup_key=self.locators.key("step", step.step_id),
                description=f"{LOCATOR_PREFIX}{chat_id}/step/",
                participants=[participant],
                metadata=document,
            )
        for stack_id in dict.fromkeys(s.stack_id for s in steps):
            await self._index_stack(chat_id, session_id, participant, stack_id)

    async def _index_stack(
        self, chat_id: UUID, session_id: str, participant: str, stack_id: str
    ) -> None:
        for attempt in range(ATTEMPTS):
            entry, created = await self.service.create_session(
                self.space_id,
                dedup_key=_stack_key(stack_id),
                description=f"{LOCATOR_PREFIX}{chat_id}/stack/",
                participants=[participant],
                metadata={"kind": "stack", "sessions": {str(chat_id): session_id}},
            )
            sessions = dict(entry.metadata.get("sessions", {}))
            if created or sessions.get(str(chat_id)) == session_id:
                return
            sessions[str(chat_id)] = session_id
            try:
                await self.service.update_session(
                    self.space_id,
                    entry.session_id,
                    if_match=entry.version,
                    metadata={"kind": "stack", "sessions": sessions},
                )
            except ConflictError:
                await self._backoff(attempt)
                continue
            return
        raise Conflict(f"the index of stack {stack_id!r} kept changing; try again")

    # -- reads ---------------------------------------------------------------------------

    @mapped
    async def get_step(self, step_id: UUID) -> Step | None:
        try:
            entry = await self.service.find_session(
                self.space_id,
                dedup_key=self.locators.key("step", step_id),
            )
            events = await self.service.get_events(
                self.space_id,
                str(entry.metadata["session_id"]),
                dedup_keys=[_step_key(step_id)],
                include_deleted=True,
            )
        except NotFoundError:
            return None
        return self._step_of(events[0], chat_in(entry.description)) if events else None

    @mapped
    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        found = await self._steps_of_chat(chat_id)
        return [] if found is None else [s for s in found[1] if s.run_id == run_id]

    @mapped
    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        try:
            entry = await self.service.find_session(self.space_id, dedup_key=_stack_key(stack_id))
        except NotFoundError:
            return []
        steps: list[Step] = []
        for session_id in dict(entry.metadata.get("sessions", {})).values():
            try:
                events = await self._step_events(str(session_id))
            except NotFoundError:
                continue
            steps += [s for s in map(self._step_of, events) if s.stack_id == stack_id]
        return sorted(steps, key=lambda s: s.seq or 0)

    @mapped
    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        found = await self._steps_of_chat(chat_id)
        if found is None:
            return None
        open_steps = [s for s in found[1] if s.status is not StepStatus.COMPLETED]
        return open_steps[-1] if open_steps else None

    @mapped
    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        found = await self._steps_of_chat(chat_id)
        if found is None:
            return []
        return [s for s in found[1] if (s.seq or 0) > after_seq][:limit]

    # -- archive -------------------------------------------------------------------------

    @mapped
    async def delete_hot_steps(self, chat_id: UUID) -> int:
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None:
            return 0
        return await self._delete_typed(found[0], [STEP_TYPE])

    @mapped
    async def restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is None:
            return 0
        session, chat = found
        todo = [s for s in steps if s.seq is not None]
        await self._index_steps(chat_id, session.session_id, self._participant(chat), todo)
        inserted = 0
        for group in [todo[i : i + MAX_PAGE] for i in range(0, len(todo), MAX_PAGE)]:
            keys = [_step_key(s.step_id) for s in group]
            stored = await self.service.get_events(
                self.space_id, session.session_id, dedup_keys=keys
            )
            present = {e.dedup_key for e in stored}
            events = [
                NewEvent(STEP_TYPE, self._step_body(s), _step_key(s.step_id), sequence_id=s.seq)
                for s in group
                if _step_key(s.step_id) not in present
            ]
            if events:
                await self.service.create_events(self.space_id, session.session_id, events)
                inserted += len(events)
        self._hot_sessions.pop(session.session_id)
        return inserted
