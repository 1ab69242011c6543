"""``ThreadkeepSessionService``: ADK's ``BaseSessionService`` on any threadkeep store.

A session is the chat ``(user_id, json.dumps([app_name, session_id]))`` on channel
:data:`SESSION_CHANNEL` with agent id ``app_name``; its metadata holds the creation time and
the session-scoped state given to ``create_session``; its events are its messages
(:mod:`._convert`). Session state is that initial state with every stored event's
``state_delta`` applied in order, so it is never read-modify-written and concurrent appends
never lose a delta. ``app:`` and ``user:`` state live in delta logs of their own
(:mod:`._state`); ``temp:`` state is applied to the caller's session object and never
stored, as ``BaseSessionService.append_event`` prescribes.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any
from uuid import UUID

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from typing_extensions import override

from threadkeep import MAX_PAGE_LIMIT, Chat, ChatNotFound, Message, Store

from .._backend import StoreHandle, StoreSource
from ._convert import METADATA_KEY, event_timestamp, event_to_message, message_to_event
from ._state import all_messages, app_log, json_safe, user_log

__all__ = ["SESSION_CHANNEL", "ThreadkeepSessionService"]

_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)

SESSION_CHANNEL = "adk"
"""The channel of the chats that hold ADK sessions."""


def _thread_id(app_name: str, session_id: str) -> str:
    return json.dumps([app_name, session_id])


class ThreadkeepSessionService(BaseSessionService):
    """ADK sessions, events and state stored in a threadkeep store.

    Args:
        store: A store URL (``"postgresql+asyncpg://..."``; one shared sync store per URL),
            a ``threadkeep.sync`` store, or an async ``threadkeep.Store`` used on the
            caller's loop.
        **options: Driver options, with a URL only.

    Raises:
        InvalidArgument: If ``store`` is not a store or URL, or options come with a store.

    Every method raises the store's typed errors (``BackendUnavailable``, ``InvalidContent``
    for state or content JSON cannot hold, ...) besides the ADK errors it documents.
    """

    def __init__(self, store: StoreSource, **options: Any) -> None:
        self._handle = StoreHandle(store, **options)

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``app:``/``user:`` keys of ``state`` go to the app/user state.

        Args:
            app_name: The ADK app.
            user_id: The session's user (the chat's owner).
            state: Initial state; ``temp:`` keys are dropped.
            session_id: The id (stripped of surrounding space, as ADK's in-memory and
                SQLite services do); a new UUID when empty or ``None``.

        Returns:
            The session, its state merged with the app's and the user's.

        Raises:
            AlreadyExistsError: If the user already has a session of that id in the app.
        """
        session_id = (session_id.strip() if session_id else "") or str(uuid.uuid4())
        deltas = _session_util.extract_state_delta(state or {})
        created = time.time()
        nonce = uuid.uuid4().hex
        meta = {
            METADATA_KEY: {
                "nonce": nonce,
                "created": created,
                "state": json_safe(deltas["session"]),
            }
        }

        async def create(store: Store) -> Session:
            thread = _thread_id(app_name, session_id)
            if await store.find_chat(user_id, thread) is not None:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            chat = await store.create_chat(
                user_id, thread, agent_id=app_name, channel=SESSION_CHANNEL, metadata=meta
            )
            if chat.metadata.get(METADATA_KEY, {}).get("nonce") != nonce:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.")
            await app_log(app_name).append(store, deltas["app"])
            await user_log(app_name, user_id).append(store, deltas["user"])
            return await self._load(store, chat, None, with_events=True)

        return await self._handle.run(create)

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """Return a session with its events and merged state, or ``None`` if there is none.

        Args:
            app_name: The ADK app.
            user_id: The session's user.
            session_id: Its id (surrounding space stripped).
            config: ``num_recent_events`` keeps the newest N events (0: none);
                ``after_timestamp`` keeps events at or after that time (seconds since the
                epoch); both as ``InMemorySessionService`` applies them.

        Returns:
            The session, or ``None``.
        """
        thread = _thread_id(app_name, session_id.strip() if session_id else session_id)

        async def get(store: Store) -> Session | None:
            chat = await store.find_chat(user_id, thread)
            if chat is None:
                return None
            try:
                return await self._load(store, chat, config, with_events=True)
            except ChatNotFound:
                return None

        return await self._handle.run(get)

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """List an app's sessions (one user's, or every user's), without their events.

        Returns:
            The sessions with merged state, oldest ``last_update_time`` first (ties by
            user id, then session id), as ``BaseSessionService`` documents.
        """

        async def listed(store: Store) -> ListSessionsResponse:
            chats = await _session_chats(store, app_name, user_id)
            sessions = [await self._load(store, chat, None, with_events=False) for chat in chats]
            sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
            return ListSessionsResponse(sessions=sessions)

        return await self._handle.run(listed)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session (a soft delete of its chat); a missing session is no error."""
        thread = _thread_id(app_name, session_id.strip() if session_id else session_id)

        async def delete(store: Store) -> None:
            chat = await store.find_chat(user_id, thread)
            if chat is not None:
                with contextlib.suppress(ChatNotFound):
                    await store.delete_chat(chat.chat_id)

        await self._handle.run(delete)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """Return ``user_id``'s state in ``app_name``, keys without ``user:``; ``{}`` if none."""
        return await self._handle.run(lambda store: user_log(app_name, user_id).read(store))

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` in ``session`` and apply its state delta.

        A partial event is returned untouched. ``temp:`` keys reach ``session.state`` only;
        ``app:``/``user:`` keys go to their delta logs; an equal re-delivery of a stored
        event changes nothing.

        Returns:
            The event (its ``state_delta`` without ``temp:`` keys).

        Raises:
            SessionNotFoundError: If the session is not stored (or was deleted).
            StaleSessionError: If the store's session was updated after ``session`` was
                read (its ``last_update_time`` is older than the stored one).
        """
        if event.partial:
            return event
        delta = event.actions.state_delta if event.actions else {}
        # An event with temp: keys never equals its stored (trimmed) copy, so it is never a
        # re-delivery (as in InMemorySessionService, which compares before trimming).
        again = not any(key.startswith(State.TEMP_PREFIX) for key in delta)
        before = dict(session.state)
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        try:
            marker = await self._handle.run(
                lambda store: self._store_event(store, session, event, again=again)
            )
        except BaseException:  # a refused event leaves the caller's session as it was
            session.state.clear()
            session.state.update(before)
            raise
        if marker is not None:
            self._commit_event_to_session(session, event)
            session.last_update_time = event.timestamp
            session._storage_update_marker = marker
        return event

    async def _store_event(
        self, store: Store, session: Session, event: Event, *, again: bool
    ) -> str | None:
        """Write ``event``, then its app/user deltas; return its marker (``None``: re-delivery).

        ``again`` is whether ``event`` may be a re-delivery of a stored event.

        Stale writers are refused twice: before writing (the session's marker, its chat and
        the seq of the chat's newest message when it was read (:func:`_marker`), must still
        be the newest; without a marker its ``last_update_time`` must not be older than the
        stored one), and after (of writers that passed together, the one whose event got the
        lowest seq wins; the others take their event back and raise).
        """
        chat = await store.find_chat(session.user_id, _thread_id(session.app_name, session.id))
        if chat is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        old = await store.get_message_by_agui_id(chat.chat_id, event.id) if event.id else None
        if again and old is not None and await _redelivered(store, chat.chat_id, old, event):
            return None
        newest = await _newest(store, chat.chat_id)
        seen = 0 if newest is None else newest.seq or 0
        marker = session._storage_update_marker
        if marker is not None and marker != _marker(chat.chat_id, seen):
            raise StaleSessionError(_STALE)
        stale_by_time = marker is None and _update_time(chat, newest) > session.last_update_time
        if stale_by_time and not _matches_storage(session, newest):
            raise StaleSessionError(_STALE)
        message = event_to_message(event, keep_id=old is None)
        stored = (await store.append_messages(chat.chat_id, [message]))[0]
        if stored.deleted_at is not None:  # the id of an event taken back before: the store
            # returns that deleted message for its agui_id, so store this one without it
            message = event_to_message(event, keep_id=False)
            stored = (await store.append_messages(chat.chat_id, [message]))[0]
        written = [stored]
        try:
            if await _overtaken(store, chat.chat_id, seen, stored.seq or 0):
                raise StaleSessionError(_STALE)
            deltas = _session_util.extract_state_delta(event.actions.state_delta)
            for log, delta in (
                (app_log(session.app_name), deltas["app"]),
                (user_log(session.app_name, session.user_id), deltas["user"]),
            ):
                note = await log.append(store, delta)
                if note is not None:
                    written.append(note)
        except BaseException:
            for message in written:  # take back what this refused event wrote
                assert message.chat_id is not None
                await store.delete_messages(message.chat_id, [message.message_id])
            raise
        return _marker(chat.chat_id, stored.seq or 0)

    async def _load(
        self, store: Store, chat: Chat, config: GetSessionConfig | None, *, with_events: bool
    ) -> Session:
        """Build the ADK session of ``chat``: events (filtered by ``config``), merged state."""
        app_name = chat.agent_id or ""
        meta: dict[str, Any] = chat.metadata.get(METADATA_KEY, {})
        state: dict[str, Any] = dict(meta.get("state", {}))
        messages = await all_messages(store, chat.chat_id)
        events = [e for m in messages if (e := message_to_event(m)) is not None]
        for event in events:
            delta = _session_util.extract_state_delta(event.actions.state_delta)["session"]
            state.update(delta)
        for key, value in (await app_log(app_name).read(store)).items():
            state[State.APP_PREFIX + key] = value
        for key, value in (await user_log(app_name, chat.user_id).read(store)).items():
            state[State.USER_PREFIX + key] = value
        updated = events[-1].timestamp if events else float(meta.get("created", 0.0))
        session = Session(
            id=json.loads(chat.thread_id)[1],
            app_name=app_name,
            user_id=chat.user_id,
            state=state,
            events=_filtered(events, config) if with_events else [],
            last_update_time=updated,
        )
        session._storage_update_marker = _marker(
            chat.chat_id, (messages[-1].seq or 0) if messages else 0
        )
        return session


def _marker(chat_id: UUID, seq: int) -> str:
    """A session object's storage revision: its chat and the seq of the newest message read.

    The chat is part of it because seqs count per chat: an object of a deleted session must
    not match the session re-created under its id (whose seqs start again), as
    ``DatabaseSessionService``'s marker (the stored update time) never matches it.
    """
    return f"{chat_id}:{seq}"


def _filtered(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    """Apply ``num_recent_events`` then ``after_timestamp`` (``InMemorySessionService``)."""
    if config is None:
        return events
    if config.num_recent_events is not None:
        events = events[-config.num_recent_events :] if config.num_recent_events else []
    if config.after_timestamp is not None:
        cut = config.after_timestamp
        keep = len(events)
        while keep > 0 and events[keep - 1].timestamp >= cut:
            keep -= 1
        events = events[keep:]
    return events


def _same_event(stored: Message, event: Event) -> bool:
    """Whether ``event`` re-delivers the stored one (equal, as ``InMemorySessionService``)."""
    again = message_to_event(stored)
    if again is None:
        return False
    fresh = event.model_dump(mode="json", exclude_none=True, fallback=str)
    return again.model_dump(mode="json", exclude_none=True) == fresh


def _matches_storage(session: Session, newest: Message | None) -> bool:
    """Whether a marker-less session still holds the stored newest event.

    ``DatabaseSessionService._session_matches_storage_revision``'s fallback: a session
    without events matches a chat without events; else its last event must be the newest.
    """
    stored = message_to_event(newest) if newest is not None else None
    if not session.events:
        return stored is None
    return stored is not None and stored.id == session.events[-1].id


async def _newest(store: Store, chat_id: UUID) -> Message | None:
    """The chat's newest message, or ``None`` when it has none."""
    page = await store.list_messages(chat_id, limit=1)
    return page.items[-1] if page.items else None


def _update_time(chat: Chat, newest: Message | None) -> float:
    """The stored session's ``last_update_time``: its newest event's timestamp, or creation.

    As in ADK's services, the last appended event sets it, even if it is older.
    """
    stamp = event_timestamp(newest) if newest is not None else None
    if stamp is not None:
        return stamp
    return float(chat.metadata.get(METADATA_KEY, {}).get("created", 0.0))


async def _redelivered(store: Store, chat_id: UUID, first: Message, event: Event) -> bool:
    """Whether ``event`` equals a stored event of its id (``InMemorySessionService``'s rule).

    ``first`` holds the id as its ``agui_id``; later events that reused the id were stored
    without it, so when ``first`` differs the chat's other events are compared too (rare:
    only an event id that was reused with other content gets here).
    """
    if _same_event(first, event):
        return True
    cursor: str | None = None
    while True:
        page = await store.list_messages(chat_id, limit=MAX_PAGE_LIMIT, cursor=cursor)
        for message in page.items:
            if message.seq != first.seq and _same_event(message, event):
                return True
        if not page.has_more:
            return False
        cursor = page.next_cursor


async def _overtaken(store: Store, chat_id: UUID, seen: int, mine: int) -> bool:
    """Whether a message landed between seq ``seen`` and ``mine`` (a concurrent writer)."""
    cursor: str | None = None
    while True:
        page = await store.list_messages(chat_id, limit=MAX_PAGE_LIMIT, cursor=cursor)
        for message in reversed(page.items):
            seq = message.seq or 0
            if seq <= seen:
                return False
            if seq < mine:
                return True
        if not page.has_more:
            return False
        cursor = page.next_cursor


async def _session_chats(store: Store, app_name: str, user_id: str | None) -> list[Chat]:
    """Every live session chat of ``app_name`` (of ``user_id`` when given)."""
    chats: list[Chat] = []
    cursor: str | None = None
    chat_filter = {"agent_id": app_name, "channel": SESSION_CHANNEL, "user_id": user_id}
    while True:
        page = await store.list_chats(chat_filter, limit=MAX_PAGE_LIMIT, cursor=cursor)
        chats.extend(page.items)
        if not page.has_more:
            return chats
        cursor = page.next_cursor
