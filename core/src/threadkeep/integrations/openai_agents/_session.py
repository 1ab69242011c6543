"""``ThreadkeepSession``: the Agents SDK ``Session`` protocol on any threadkeep store."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from threadkeep import (
    BackendUnavailable,
    InvalidArgument,
    Message,
    Store,
)

from .._backend import StoreHandle, StoreSource
from .._chat import ChatBinding
from ._items import item_to_message, message_to_items

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["ThreadkeepSession"]

DEFAULT_USER_ID = "openai-agents"
"""The chat owner when none is given: the SDK's sessions are keyed by ``session_id`` alone."""

_POP_ATTEMPTS = 16
_T = TypeVar("_T")


class ThreadkeepSession:
    """Conversation history of one Agents SDK session, stored as a threadkeep chat.

    The one-line change: ``session = SQLiteSession("conv-1")`` becomes
    ``session = ThreadkeepSession("conv-1", store="postgresql+asyncpg://...")`` and
    ``Runner.run(agent, text, session=session)`` is unchanged. The chat is
    ``(user_id, session_id)``; each input item is one message (see
    :mod:`threadkeep.integrations.openai_agents._items` for what maps to what), so the plain
    threadkeep API, the CLI and every other integration read the same chat.

    Args:
        session_id: The SDK's session id; the chat's ``thread_id``.
        store: A store URL (a process-wide sync store per URL: safe from any loop, also
            ``Runner.run_sync``), a ``threadkeep.sync`` store (same), or an async
            ``threadkeep.Store`` (used on the caller's loop only).
        user_id: The chat's owner (default ``"openai-agents"``); set it per end user when
            sessions belong to people.
        session_settings: The SDK's settings (``limit``: the default for
            :meth:`get_items`); a ``SessionSettings`` or a mapping of its fields; default
            ``SessionSettings()`` (no limit), as the SDK's own sessions.
        clear: What :meth:`clear_session` does: ``"start_over"`` (default) draws a "start
            over" boundary, so the model sees nothing before it while people keep the
            history; ``"delete"`` deletes the chat (soft delete; ``purge`` erases it).
        **options: Driver options, with a URL only (``cursor_secret``, ``schema``...).

    Raises:
        InvalidArgument: If ``session_id`` or ``user_id`` is empty, ``clear`` is not one
            of the two modes, or ``store`` is not a store or URL.
        TypeError: If ``session_settings`` is a mapping with unknown fields (the SDK's
            own check).
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: StoreSource,
        *,
        user_id: str = DEFAULT_USER_ID,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        clear: Literal["start_over", "delete"] = "start_over",
        **options: Any,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidArgument("session_id must be a non-empty string")
        if not isinstance(user_id, str) or not user_id:
            raise InvalidArgument("user_id must be a non-empty string")
        if clear not in ("start_over", "delete"):
            raise InvalidArgument(f"clear must be 'start_over' or 'delete', not {clear!r}")
        self.session_id = session_id
        self.user_id = user_id
        if session_settings is None:
            session_settings = SessionSettings()
        elif isinstance(session_settings, Mapping):
            session_settings = coerce_session_settings(dict(session_settings))
        self.session_settings = session_settings
        self._closed = False
        self.clear_mode = clear
        self._handle = StoreHandle(store, **options)
        self._chat = ChatBinding(user_id, session_id, clear)

    @classmethod
    def from_url(cls, session_id: str, url: str, **kwargs: Any) -> ThreadkeepSession:
        """Return a session on the store at ``url`` (``ThreadkeepSession(session_id, url)``).

        Args:
            session_id: The SDK's session id.
            url: A threadkeep store URL (``sqlite+aiosqlite:///./chats.db``...).
            **kwargs: The other constructor arguments and driver options.
        """
        return cls(session_id, url, **kwargs)

    def close(self) -> None:
        """Close the session: its methods raise ``BackendUnavailable`` from now on.

        The store is not closed: a store URL's store is shared by the process (closed at
        exit), a store object belongs to whoever made it.
        """
        self._closed = True

    async def _run(self, call: Callable[[Store], Coroutine[Any, Any, _T]]) -> _T:
        if self._closed:
            raise BackendUnavailable(f"session {self.session_id!r} is closed")
        return await self._handle.run(call)

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the session's history for the model, oldest first.

        Only what follows the last "start over" boundary counts (:meth:`clear_session`);
        after a threadkeep compaction, its summary comes first as a system message.

        Args:
            limit: The newest this many items (a count); ``None`` uses
                ``session_settings.limit``, then everything; ``0`` (or less) gives ``[]``.

        Returns:
            The items, each equal to the one given to :meth:`add_items`.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []

        async def read(store: Store) -> list[Message]:
            return await self._chat.window(store, limit)

        items = [item for m in await self._run(read) for item in message_to_items(m)]
        if limit is not None:
            items = items[-limit:]
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items to the session, all or nothing, in order (one message each).

        Args:
            items: Input items (``TResponseInputItem`` dicts) of any kind.

        Raises:
            InvalidArgument: If ``items`` is not a list of mappings.
            InvalidContent, PayloadTooLarge: If an item cannot be stored (nothing is).
            BackendUnavailable: If the backend fails (nothing is written).
        """
        if not isinstance(items, Sequence) or not all(isinstance(i, Mapping) for i in items):
            raise InvalidArgument("items must be a list of input item dicts")
        if self._closed:
            raise BackendUnavailable(f"session {self.session_id!r} is closed")
        if not items:
            return
        messages = [item_to_message(cast("Mapping[str, Any]", item)) for item in items]

        async def write(store: Store) -> None:
            await self._chat.append(store, messages)

        await self._run(write)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item of the session's history and return it.

        The message is hidden with ``delete_messages`` (every backend supports it); when
        two callers pop at once each gets a different item. A "start over" boundary is
        never popped: after :meth:`clear_session` there is nothing to pop.

        Returns:
            The item, or ``None`` when the history (after the last boundary) is empty.

        Raises:
            BackendUnavailable: If the backend fails.
        """

        async def pop(store: Store) -> dict[str, Any] | None:
            for _ in range(_POP_ATTEMPTS):
                window = await self._chat.window(store, 1)
                if not window or self._chat.chat_id is None:
                    return None
                newest = window[-1]
                if newest.seq is None:  # only a compaction summary is left: nothing to pop
                    return None
                if await store.delete_messages(self._chat.chat_id, [newest.message_id]):
                    items = message_to_items(newest)
                    if len(items) > 1:  # another client's message held several items
                        await self._chat.append(store, [item_to_message(i) for i in items[:-1]])
                    return items[-1] if items else None
            msg = f"session {self.session_id!r}: concurrent pops kept taking the newest item"
            raise InvalidArgument(msg)

        return cast("TResponseInputItem | None", await self._run(pop))

    async def clear_session(self) -> None:
        """Clear the session's history for the model.

        With ``clear="start_over"`` (the default) a "start over" boundary is drawn: the
        model gets nothing from before it, people and the threadkeep API keep every
        message. With ``clear="delete"`` the chat is deleted (soft delete; ``purge``
        erases it) and the next :meth:`add_items` starts a new chat.

        Raises:
            BackendUnavailable: If the backend fails.
        """

        async def clear(store: Store) -> None:
            await self._chat.clear(store)

        await self._run(clear)
