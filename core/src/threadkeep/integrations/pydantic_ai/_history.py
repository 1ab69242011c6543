"""``ThreadkeepMessageHistory``: a Pydantic AI conversation's messages in a threadkeep chat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage

from threadkeep import InvalidArgument, Store

from .._backend import StoreHandle, StoreSource
from .._chat import ChatBinding, ClearMode
from ._convert import from_threadkeep, to_threadkeep

__all__ = ["ThreadkeepMessageHistory"]

DEFAULT_USER_ID = "pydantic-ai"
"""The chat owner when none is given."""


class ThreadkeepMessageHistory:
    """Load a conversation for ``message_history=`` and store each run's ``new_messages()``.

    ::

        history = ThreadkeepMessageHistory("conv-1", store="sqlite+aiosqlite:///./chats.db")
        result = await agent.run(prompt, message_history=await history.load())
        await history.save(result.new_messages())

    Pydantic AI keeps no history itself: the application passes ``message_history`` and
    stores ``new_messages()``; these two calls are that, on any threadkeep store.

    Args:
        session_id: The conversation id; the chat's ``thread_id``.
        store: A store URL or a ``threadkeep.sync`` store (async and ``*_sync`` methods), or
            an async ``threadkeep.Store`` (async methods only, on the caller's loop).
        user_id: The chat's owner (default ``"pydantic-ai"``).
        clear: What :meth:`clear` does: ``"start_over"`` (default) or ``"delete"``.
        **options: Driver options, with a URL only.

    Raises:
        InvalidArgument: If ``session_id`` or ``user_id`` is empty, ``clear`` is not one of
            the two modes, or ``store`` is not a store or URL.
    """

    def __init__(
        self,
        session_id: str,
        store: StoreSource,
        *,
        user_id: str = DEFAULT_USER_ID,
        clear: ClearMode = "start_over",
        **options: Any,
    ) -> None:
        for name, value in (("session_id", session_id), ("user_id", user_id)):
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"{name} must be a non-empty string")
        if clear not in ("start_over", "delete"):
            raise InvalidArgument(f"clear must be 'start_over' or 'delete', not {clear!r}")
        self.session_id = session_id
        self.user_id = user_id
        self._handle = StoreHandle(store, **options)
        self._chat = ChatBinding(user_id, session_id, clear)

    async def _load(self, store: Store) -> list[ModelMessage]:
        return from_threadkeep(await self._chat.window(store, None))

    async def load(self) -> list[ModelMessage]:
        """Return the conversation after its last "start over" boundary, oldest first.

        Returns:
            ``list[ModelMessage]``, equal (through ``ModelMessagesTypeAdapter``) to what was
            saved; pass it as ``message_history=``.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        return await self._handle.run(self._load)

    def load_sync(self) -> list[ModelMessage]:
        """:meth:`load`, blocking (for ``agent.run_sync``).

        Raises:
            InvalidArgument: If the history was given an async ``threadkeep.Store``.
            BackendUnavailable: If the backend fails.
        """
        return self._handle.run_sync(self._load)

    def _prepare(self, messages: Sequence[ModelMessage]) -> list[Any]:
        given: object = messages
        if not isinstance(given, Sequence) or isinstance(given, str):
            raise InvalidArgument("messages must be a list of ModelMessage (new_messages())")
        return to_threadkeep(messages)

    async def save(self, messages: Sequence[ModelMessage]) -> None:
        """Append ``messages`` (a run's ``new_messages()``), all or nothing, in order.

        Raises:
            InvalidArgument: If ``messages`` is not a list of ``ModelMessage``.
            InvalidContent, PayloadTooLarge: If a message cannot be stored (nothing is).
            BackendUnavailable: If the backend fails (nothing is written).
        """
        prepared = self._prepare(messages)
        if prepared:
            await self._handle.run(lambda store: self._chat.append(store, prepared))

    def save_sync(self, messages: Sequence[ModelMessage]) -> None:
        """:meth:`save`, blocking.

        Raises:
            InvalidArgument: As :meth:`save`, or if the history was given an async store.
            InvalidContent, PayloadTooLarge, BackendUnavailable: As :meth:`save`.
        """
        prepared = self._prepare(messages)
        if prepared:
            self._handle.run_sync(lambda store: self._chat.append(store, prepared))

    async def clear(self) -> None:
        """Start over (the next :meth:`load` is empty, the chat keeps its history) or delete.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        await self._handle.run(self._chat.clear)
