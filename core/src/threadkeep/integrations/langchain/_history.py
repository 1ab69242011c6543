"""``ThreadkeepChatMessageHistory``: LangChain's ``BaseChatMessageHistory`` on threadkeep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from threadkeep import InvalidArgument, Store

from .._backend import StoreHandle, StoreSource
from .._chat import ChatBinding, ClearMode
from ._convert import from_threadkeep, to_threadkeep

__all__ = ["ThreadkeepChatMessageHistory"]

DEFAULT_USER_ID = "langchain"
"""The chat owner when none is given: LangChain keys a history by ``session_id`` alone."""


class ThreadkeepChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored as a threadkeep chat, with sync and async methods.

    The one-line change: ``InMemoryChatMessageHistory()`` (or another backend) in
    ``get_session_history`` becomes ``ThreadkeepChatMessageHistory(session_id,
    store="postgresql+asyncpg://...")``; ``RunnableWithMessageHistory`` is unchanged. Each
    message is one threadkeep message (see ``_convert`` for what maps to what).

    Args:
        session_id: LangChain's session id; the chat's ``thread_id``.
        store: A store URL or a ``threadkeep.sync`` store (sync and async methods, from any
            thread or loop), or an async ``threadkeep.Store`` (async methods only, on the
            caller's loop).
        user_id: The chat's owner (default ``"langchain"``).
        clear: What :meth:`clear` does: ``"start_over"`` (default) draws a "start over"
            boundary (the model sees nothing before it, the history stays readable);
            ``"delete"`` deletes the chat.
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
        super().__init__()
        for name, value in (("session_id", session_id), ("user_id", user_id)):
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"{name} must be a non-empty string")
        if clear not in ("start_over", "delete"):
            raise InvalidArgument(f"clear must be 'start_over' or 'delete', not {clear!r}")
        self.session_id = session_id
        self.user_id = user_id
        self._handle = StoreHandle(store, **options)
        self._chat = ChatBinding(user_id, session_id, clear)

    # -- reading ---------------------------------------------------------------------------

    async def _read(self, store: Store) -> list[BaseMessage]:
        window = await self._chat.window(store, None)
        return [converted for message in window for converted in from_threadkeep(message)]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a plain attribute there
        """The history after the last "start over" boundary, oldest first (blocking).

        Raises:
            InvalidArgument: If the history was given an async ``threadkeep.Store``.
            BackendUnavailable: If the backend fails.
        """
        return self._handle.run_sync(self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        """The history after the last "start over" boundary, oldest first.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        return await self._handle.run(self._read)

    # -- writing ---------------------------------------------------------------------------

    def _prepare(self, messages: Sequence[BaseMessage]) -> list[Any]:
        given: object = messages  # callers are untyped: check what really came
        if isinstance(given, BaseMessage | str) or not isinstance(given, Sequence):
            raise InvalidArgument("messages must be a list of LangChain messages")
        return [to_threadkeep(message) for message in messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages in order, all or nothing (blocking).

        Raises:
            InvalidArgument: If ``messages`` is not a list of ``BaseMessage``, or the history
                was given an async ``threadkeep.Store``.
            InvalidContent, PayloadTooLarge: If a message cannot be stored (nothing is).
            BackendUnavailable: If the backend fails (nothing is written).
        """
        prepared = self._prepare(messages)
        if prepared:
            self._handle.run_sync(lambda store: self._chat.append(store, prepared))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages in order, all or nothing.

        Raises:
            InvalidArgument: If ``messages`` is not a list of ``BaseMessage``.
            InvalidContent, PayloadTooLarge: If a message cannot be stored (nothing is).
            BackendUnavailable: If the backend fails (nothing is written).
        """
        prepared = self._prepare(messages)
        if prepared:
            await self._handle.run(lambda store: self._chat.append(store, prepared))

    def add_message(self, message: BaseMessage) -> None:
        """Append one message (blocking); see :meth:`add_messages`."""
        self.add_messages([message])

    def clear(self) -> None:
        """Clear the history for the model (blocking): start over, or delete the chat.

        Raises:
            InvalidArgument: If the history was given an async ``threadkeep.Store``.
            BackendUnavailable: If the backend fails.
        """
        self._handle.run_sync(self._chat.clear)

    async def aclear(self) -> None:
        """Clear the history for the model: start over, or delete the chat.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        await self._handle.run(self._chat.clear)
