"""Session operations: create (adopting by dedup key), read, list, update, delete, restore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._base import ServiceBase
from ._errors import ConflictError, DedupKeyTaken, NotFoundError, ValidationError
from ._records import (
    MAX_DEDUP_KEY,
    MAX_DESCRIPTION,
    MAX_PAGE,
    MAX_PARTICIPANTS,
    Session,
    check_string,
    encode_document,
)
from ._state import SessionRow, SpaceState

__all__ = ["SessionOps"]


def _check_session_fields(
    dedup_key: str | None,
    description: str | None,
    participants: Sequence[str] | None,
) -> None:
    if dedup_key is not None:
        check_string(dedup_key, "dedup_key", max_length=MAX_DEDUP_KEY)
    if description is not None:
        check_string(description, "description", max_length=MAX_DESCRIPTION)
    if participants is not None:
        if isinstance(participants, str) or len(participants) > MAX_PARTICIPANTS:
            raise ValidationError(f"participants: a list of at most {MAX_PARTICIPANTS} ids")
        for index, participant in enumerate(participants):
            check_string(participant, f"participants[{index}]", max_length=64)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be an integer within [1, {MAX_PAGE}], not {limit!r}")


def _check_if_match(row: SessionRow, if_match: int | None) -> None:
    if if_match is not None and row.version != if_match:
        msg = f"session {row.session_id} is at version {row.version}, not {if_match} (If-Match)"
        raise ConflictError(msg)


class SessionOps(ServiceBase):
    """Sessions of a space; see :class:`threadkeep_memservice.emulator.MemoryService`."""

    def _session_row(
        self, space_id: str, session_id: str, *, include_deleted: bool = False
    ) -> tuple[SpaceState, SessionRow]:
        state = self._space(space_id)
        row = state.sessions.get(session_id)
        if row is None or (row.deleted_at is not None and not include_deleted):
            raise NotFoundError(f"no session {session_id!r} in space {space_id!r}")
        return state, row

    async def create_session(
        self,
        space_id: str,
        *,
        dedup_key: str | None = None,
        description: str | None = None,
        participants: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> tuple[Session, bool]:
        """Create a session, or adopt the live session that holds ``dedup_key``.

        Args:
            space_id: The space.
            dedup_key: Idempotent-create key (at most 72 characters). When a live session
                holds it, that session is returned unchanged and the other arguments are
                ignored (soft-deleted sessions do not hold their key).
            description: Free text of at most 1,024 characters, filterable by prefix.
            participants: At most 32 participant ids.
            metadata: A JSON object of at most 1 MiB (default ``{}``).

        Returns:
            ``(session, created)``; ``created`` is false when an existing one was adopted.

        Raises:
            NotFoundError: If the space does not exist.
            ValidationError: If a field breaks a rule (an empty string anywhere, a limit).
            DocumentTooLarge: If the metadata is over 1 MiB.
        """
        args = {
            "space_id": space_id,
            "dedup_key": dedup_key,
            "description": description,
            "participants": tuple(participants),
            "metadata": metadata,
        }

        def apply() -> tuple[Session, bool]:
            state = self._space(space_id)
            _check_session_fields(dedup_key, description, participants)
            text = encode_document(metadata or {}, "metadata")
            if dedup_key is not None and dedup_key in state.live_keys:
                return state.sessions[state.live_keys[dedup_key]].record(), False
            now = self._now()
            row = SessionRow(
                session_id=self._new_id(),
                space_id=space_id,
                sequence_id=state.next_session_seq,
                dedup_key=dedup_key,
                description=description,
                participants=tuple(participants),
                metadata_text=text,
                created_at=now,
                updated_at=now,
            )
            state.next_session_seq += 1
            state.sessions[row.session_id] = row
            state.index(row)
            if dedup_key is not None:
                state.live_keys[dedup_key] = row.session_id
            return row.record(), True

        return await self._call("create_session", args, apply)

    async def get_session(
        self, space_id: str, session_id: str, *, include_deleted: bool = False
    ) -> Session:
        """Return a session by id (a point read).

        Raises:
            NotFoundError: If it does not exist, has expired, or is soft-deleted and
                ``include_deleted`` is false.
        """
        args = {"space_id": space_id, "session_id": session_id, "include_deleted": include_deleted}

        def apply() -> Session:
            return self._session_row(space_id, session_id, include_deleted=include_deleted)[
                1
            ].record()

        return await self._call("get_session", args, apply)

    async def find_session(self, space_id: str, *, dedup_key: str) -> Session:
        """Return the live session holding ``dedup_key`` (an indexed point read).

        Raises:
            NotFoundError: If no live session holds the key.
            ValidationError: If the key is empty or too long.
        """

        def apply() -> Session:
            state = self._space(space_id)
            check_string(dedup_key, "dedup_key", max_length=MAX_DEDUP_KEY)
            session_id = state.live_keys.get(dedup_key)
            if session_id is None:
                raise NotFoundError(f"no live session holds dedup key {dedup_key!r}")
            return state.sessions[session_id].record()

        return await self._call(
            "find_session", {"space_id": space_id, "dedup_key": dedup_key}, apply
        )

    async def list_sessions(
        self,
        space_id: str,
        *,
        description_prefix: str | None = None,
        participant: str | None = None,
        before: int | None = None,
        limit: int = 100,
        include_deleted: bool = False,
    ) -> list[Session]:
        """List sessions by description prefix and/or participant, newest first.

        There is no unfiltered listing: the service answers only indexed queries.

        Args:
            space_id: The space.
            description_prefix: Keep sessions whose description starts with it.
            participant: Keep sessions listing this participant.
            before: Keep sessions with ``sequence_id < before`` (keyset paging).
            limit: At most this many (1 to 200).
            include_deleted: Also return soft-deleted (not yet expired) sessions.

        Returns:
            Sessions in descending ``sequence_id`` order.

        Raises:
            ValidationError: If neither filter is given, or ``limit`` is out of range.
        """
        args = {
            "space_id": space_id,
            "description_prefix": description_prefix,
            "participant": participant,
            "before": before,
            "limit": limit,
            "include_deleted": include_deleted,
        }

        def apply() -> list[Session]:
            state = self._space(space_id)
            _check_limit(limit)
            if description_prefix is None and participant is None:
                raise ValidationError("list_sessions needs description_prefix or participant")
            seqs: set[int] | None = None
            if description_prefix is not None:
                check_string(description_prefix, "description_prefix")
                seqs = state.with_prefix(description_prefix)
            if participant is not None:
                members = state.with_participant(participant)
                seqs = members if seqs is None else seqs & members
            found: list[Session] = []
            for seq in sorted(seqs or (), reverse=True):
                row = state.sessions[state.by_seq[seq]]
                if (before is not None and seq >= before) or (
                    row.deleted_at is not None and not include_deleted
                ):
                    continue
                found.append(row.record())
                if len(found) == limit:
                    break
            return found

        return await self._call("list_sessions", args, apply)

    async def update_session(
        self,
        space_id: str,
        session_id: str,
        *,
        if_match: int | None = None,
        description: str | None = None,
        participants: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """Replace the given fields of a live session (``None`` leaves a field as it is).

        Args:
            space_id: The space.
            session_id: The session.
            if_match: The version the caller read; a different stored version raises
                ``ConflictError`` and writes nothing. ``None`` skips the check.
            description: The new description.
            participants: The new participant list.
            metadata: The new metadata document (replaces the old one whole).

        Returns:
            The session after the write (its version grew by one).

        Raises:
            NotFoundError: If the session is missing or soft-deleted.
            ConflictError: If ``if_match`` is stale.
            ValidationError / DocumentTooLarge: As for :meth:`create_session`.
        """
        args = {
            "space_id": space_id,
            "session_id": session_id,
            "if_match": if_match,
            "description": description,
            "participants": None if participants is None else tuple(participants),
            "metadata": metadata,
        }

        def apply() -> Session:
            state, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            _check_session_fields(None, description, participants)
            text = None if metadata is None else encode_document(metadata, "metadata")
            state.unindex(row)
            if description is not None:
                row.description = description
            if participants is not None:
                row.participants = tuple(participants)
            state.index(row)
            if text is not None:
                row.metadata_text = text
            row.touch(self._now())
            return row.record()

        return await self._call("update_session", args, apply)

    async def delete_session(
        self, space_id: str, session_id: str, *, if_match: int | None = None
    ) -> Session:
        """Soft-delete a live session and, with it, its events.

        The session frees its dedup key, is hidden from reads and listings (unless asked
        for), and disappears for good after the service's soft-delete TTL.

        Raises:
            NotFoundError: If it is missing or already soft-deleted.
            ConflictError: If ``if_match`` is stale.
        """
        args = {"space_id": space_id, "session_id": session_id, "if_match": if_match}

        def apply() -> Session:
            state, row = self._session_row(space_id, session_id)
            _check_if_match(row, if_match)
            now = self._now()
            row.deleted_at = now
            row.touch(now)
            if row.dedup_key is not None and state.live_keys.get(row.dedup_key) == session_id:
                del state.live_keys[row.dedup_key]
            self._schedule_expiry(space_id, session_id, None, now)
            return row.record()

        return await self._call("delete_session", args, apply)

    async def undelete_session(
        self, space_id: str, session_id: str, *, if_match: int | None = None
    ) -> Session:
        """Bring back a soft-deleted session (and its events) before it expires.

        Raises:
            NotFoundError: If it is missing, expired, or not deleted.
            ConflictError: If ``if_match`` is stale.
            DedupKeyTaken: If a live session now holds its dedup key.
        """
        args = {"space_id": space_id, "session_id": session_id, "if_match": if_match}

        def apply() -> Session:
            state, row = self._session_row(space_id, session_id, include_deleted=True)
            if row.deleted_at is None:
                raise NotFoundError(f"session {session_id!r} is not deleted")
            _check_if_match(row, if_match)
            key = row.dedup_key
            if key is not None and key in state.live_keys:
                msg = f"dedup key {key!r} is held by live session {state.live_keys[key]!r}"
                raise DedupKeyTaken(msg)
            row.deleted_at = None
            row.touch(self._now())
            if key is not None:
                state.live_keys[key] = session_id
            return row.record()

        return await self._call("undelete_session", args, apply)

    async def purge_session(self, space_id: str, session_id: str) -> dict[str, int]:
        """Remove a session (live or soft-deleted) and its events for good.

        Returns:
            How many stored events of each ``event_type`` went with it.

        Raises:
            NotFoundError: If there is no such session (or it expired).
        """

        def apply() -> dict[str, int]:
            state, row = self._session_row(space_id, session_id, include_deleted=True)
            counts: dict[str, int] = {}
            for event in row.events.values():
                counts[event.event_type] = counts.get(event.event_type, 0) + 1
            self._drop_session(state, row)
            return counts

        return await self._call(
            "purge_session", {"space_id": space_id, "session_id": session_id}, apply
        )
