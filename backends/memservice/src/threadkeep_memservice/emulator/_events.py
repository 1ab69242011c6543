"""Event operations, all within one live session: batch create, read, list, patch, delete.

There is no query across sessions. Every write to a session's events grows the session's
version by one, so a write conditional on that version (``if_match``) fails if anything
in the session changed since the caller read it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import ValidationError
from ._records import Event, EventPatch, NewEvent, check_batch
from ._sessions import SessionOps, _check_if_match, _check_limit
from ._state import EventRow, SessionRow
from ._writes import apply_creates, apply_patches, check_creates, check_deletes, check_patches

__all__ = ["EventOps"]


class EventOps(SessionOps):
    """Events of a session; see :class:`threadkeep_memservice.emulator.MemoryService`."""

    def _apply_deletes(
        self, space_id: str, row: SessionRow, doomed: Sequence[EventRow], *, hard: bool, now: float
    ) -> None:
        for event in doomed:
            if hard:
                row.remove_event(event)
            else:
                event.deleted_at = now
                row.release_key(event)
                self._schedule_expiry(space_id, row.session_id, event.event_id, now)

    async def create_events(
        self,
        space_id: str,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        if_match: int | None = None,
    ) -> tuple[list[Event], int]:
        """Create up to 200 events in one live session, all or nothing.

        Events without an explicit ``sequence_id`` get consecutive ones after every id
        the session has used, so ids grow in commit order. An explicit id (import) must not
        be in use; the session's next id moves past it.

        Args:
            space_id: The space.
            session_id: The session.
            events: The events to create, in order.
            if_match: The session version the caller read; a different one raises
                ``ConflictError`` and writes nothing.

        Returns:
            ``(created events in request order, the session's new version)``.

        Raises:
            NotFoundError: If the session is missing or soft-deleted.
            ConflictError: If ``if_match`` is stale or an explicit sequence id is in use.
            DuplicateEventKey: If a dedup key is stored already or repeats in the batch.
            ValidationError / DocumentTooLarge: If an event breaks a rule, or the batch is
                empty or over 200.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "events": events,
            "if_match": if_match,
        }

        def apply() -> tuple[list[Event], int]:
            _, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            check_batch(events, "create_events")
            texts = check_creates(row, events)
            now = self._now()
            created = apply_creates(row, events, texts, now)
            row.touch(now)
            return [e.record(session_id) for e in created], row.version

        return await self._call("create_events", args, apply)

    async def get_events(
        self,
        space_id: str,
        session_id: str,
        *,
        event_ids: Sequence[str] = (),
        dedup_keys: Sequence[str] = (),
        include_deleted: bool = False,
    ) -> list[Event]:
        """Read events of one live session by id and/or dedup key (point reads, up to 200).

        Returns:
            The events found, ids first then keys, in request order; missing ones are
            left out. ``include_deleted`` also returns soft-deleted events, and reads a
            soft-deleted (not yet expired) session.

        Raises:
            NotFoundError: If the session is missing, or soft-deleted without
                ``include_deleted``.
            ValidationError: If nothing or more than 200 is asked for.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "event_ids": tuple(event_ids),
            "dedup_keys": tuple(dedup_keys),
            "include_deleted": include_deleted,
        }

        def apply() -> list[Event]:
            _, row = self._session_row(space_id, session_id, include_deleted=include_deleted)
            check_batch([*event_ids, *dedup_keys], "get_events")
            wanted = [*event_ids, *(row.event_keys.get(k) for k in dedup_keys)]
            found: list[Event] = []
            for event_id in wanted:
                event = None if event_id is None else row.events.get(event_id)
                if event is not None and (include_deleted or event.deleted_at is None):
                    found.append(event.record(session_id))
            return found

        return await self._call("get_events", args, apply)

    async def list_events(
        self,
        space_id: str,
        session_id: str,
        *,
        event_types: Sequence[str] | None = None,
        after: int | None = None,
        before: int | None = None,
        limit: int = 100,
        descending: bool = False,
        include_deleted: bool = False,
    ) -> list[Event]:
        """List one live session's events in ``sequence_id`` order (keyset paging).

        Args:
            space_id: The space.
            session_id: The session.
            event_types: Keep only these types.
            after: Keep ``sequence_id > after``.
            before: Keep ``sequence_id < before``.
            limit: At most this many (1 to 200).
            descending: Newest first.
            include_deleted: Also return soft-deleted (not yet expired) events, and read a
                soft-deleted (not yet expired) session.

        Raises:
            NotFoundError: If the session is missing, or soft-deleted without
                ``include_deleted``.
            ValidationError: If ``limit`` is out of range.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "event_types": None if event_types is None else tuple(event_types),
            "after": after,
            "before": before,
            "limit": limit,
            "descending": descending,
            "include_deleted": include_deleted,
        }

        def apply() -> list[Event]:
            _, row = self._session_row(space_id, session_id, include_deleted=include_deleted)
            _check_limit(limit)
            types = None if event_types is None else frozenset(event_types)
            found: list[Event] = []
            for event in row.scan(after, before, descending):
                if (types is not None and event.event_type not in types) or (
                    event.deleted_at is not None and not include_deleted
                ):
                    continue
                found.append(event.record(session_id))
                if len(found) == limit:
                    break
            return found

        return await self._call("list_events", args, apply)

    async def patch_events(
        self,
        space_id: str,
        session_id: str,
        patches: Sequence[EventPatch],
        *,
        if_match: int | None = None,
    ) -> tuple[list[Event], int]:
        """Replace the bodies of up to 200 live events of one session, all or nothing.

        Returns:
            ``(patched events in request order, the session's new version)``.

        Raises:
            NotFoundError: If the session or an event is missing or soft-deleted.
            ConflictError: If ``if_match`` (session) or a patch's ``if_match`` (event) is
                stale.
            ValidationError / DocumentTooLarge: If a body breaks a rule, an event repeats,
                or the batch is empty or over 200.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "patches": patches,
            "if_match": if_match,
        }

        def apply() -> tuple[list[Event], int]:
            _, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            check_batch(patches, "patch_events")
            targets = check_patches(row, patches)
            now = self._now()
            apply_patches(targets, now)
            row.touch(now)
            return [event.record(session_id) for event, _ in targets], row.version

        return await self._call("patch_events", args, apply)

    async def delete_events(
        self,
        space_id: str,
        session_id: str,
        event_ids: Sequence[str],
        *,
        hard: bool = False,
        if_match: int | None = None,
    ) -> int:
        """Delete up to 200 events of one live session, all or nothing.

        A soft delete hides an event and frees its dedup key; it disappears for good
        after the soft-delete TTL. A hard delete removes it now (soft-deleted ones too).

        Returns:
            The session's new version.

        Raises:
            NotFoundError: If the session or an event is missing (or, for a soft delete,
                already soft-deleted).
            ConflictError: If ``if_match`` is stale.
            ValidationError: If the batch is empty, over 200, or repeats an event.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "event_ids": tuple(event_ids),
            "hard": hard,
            "if_match": if_match,
        }

        def apply() -> int:
            _, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            check_batch(event_ids, "delete_events")
            doomed = check_deletes(row, event_ids, hard=hard)
            now = self._now()
            self._apply_deletes(space_id, row, doomed, hard=hard, now=now)
            row.touch(now)
            return row.version

        return await self._call("delete_events", args, apply)

    async def batch_events(
        self,
        space_id: str,
        session_id: str,
        *,
        creates: Sequence[NewEvent] = (),
        patches: Sequence[EventPatch] = (),
        deletes: Sequence[str] = (),
        if_match: int | None = None,
    ) -> tuple[list[Event], list[Event], int]:
        """Create, patch and hard-delete events of one live session in one atomic call.

        At most 200 items in all; the whole batch is checked before anything is written,
        so it is all or nothing. An event may not be both patched and deleted.

        Args:
            space_id: The space.
            session_id: The session.
            creates: New events (as for :meth:`create_events`).
            patches: Body replacements (as for :meth:`patch_events`).
            deletes: Ids of events to remove for good.
            if_match: The session version the caller read.

        Returns:
            ``(created events, patched events, the session's new version)``.

        Raises:
            NotFoundError / ConflictError / DuplicateEventKey / ValidationError /
                DocumentTooLarge: As for the single-kind calls; nothing is written.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "creates": creates,
            "patches": patches,
            "deletes": tuple(deletes),
            "if_match": if_match,
        }

        def apply() -> tuple[list[Event], list[Event], int]:
            _, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            check_batch([*creates, *patches, *deletes], "batch_events")
            if {p.event_id for p in patches} & set(deletes):
                raise ValidationError("batch_events: an event is both patched and deleted")
            texts = check_creates(row, creates)
            targets = check_patches(row, patches)
            doomed = check_deletes(row, deletes, hard=True)
            now = self._now()
            created = apply_creates(row, creates, texts, now)
            apply_patches(targets, now)
            self._apply_deletes(space_id, row, doomed, hard=True, now=now)
            row.touch(now)
            patched = [event.record(session_id) for event, _ in targets]
            return [e.record(session_id) for e in created], patched, row.version

        return await self._call("batch_events", args, apply)
