"""``SyncStore`` and ``open_store``: the blocking twin of ``threadkeep.Store``."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterable, AsyncIterator, Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import Future
from itertools import islice
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

import threadkeep
from threadkeep import Capabilities, InvalidArgument, LoadReport, Store
from threadkeep._store_load import DEFAULT_LOAD_BATCH, LoadInput

from ._methods import SyncMethods
from ._portal import LoopThread, OpenTimeout

__all__ = ["DEFAULT_OPEN_TIMEOUT", "SyncStore", "open_store"]

DEFAULT_OPEN_TIMEOUT = 60.0
"""Seconds :meth:`SyncStore.open` waits for the backend by default.

Longer than the drivers' own connect and server-selection timeouts (10 to 30 s), so those
report an unreachable server first, with their own message; this bound catches a server
that accepts connections and never answers, which would otherwise block ``open()``
forever."""

_T = TypeVar("_T")


class SyncStore(SyncMethods):
    """Blocking access to a :class:`threadkeep.Store`, for scripts and frameworks' sync hooks.

    Every public coroutine method of ``Store`` is here as a plain method of the same name,
    parameters and result (generated from the async API, so the two cannot drift)::

        from threadkeep.sync import open_store

        with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
            chat = store.create_chat("user-1", "thread-1")
            store.append_message(chat.chat_id, {"role": "user", "content": "hi"})
            page = store.list_messages(chat.chat_id)

    The store runs on a private event loop on its own thread, started by :meth:`open` and
    stopped by :meth:`close`; calls from any thread, and from code running inside another
    event loop, go to that loop and block until they finish. One sync store may be shared
    by threads (their calls run concurrently on its loop, as ``asyncio.gather`` would).

    Args:
        store: An async store that is not open (it is opened on the private loop: a store
            opened on another loop holds connections bound to that loop).
        open_timeout: Seconds :meth:`open` waits for the backend at most (default
            :data:`DEFAULT_OPEN_TIMEOUT`, 60); ``None`` waits as long as the driver does.

    Raises:
        InvalidArgument: If ``open_timeout`` is not a positive number of seconds.
    """

    def __init__(self, store: Store, *, open_timeout: float | None = DEFAULT_OPEN_TIMEOUT) -> None:
        self._open_timeout = _checked_timeout(open_timeout)
        self._store = store
        self._loop_thread = LoopThread(f"threadkeep-sync:{type(store.driver).__name__}")

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self._loop_thread.run(coroutine)

    @property
    def async_store(self) -> Store:
        """The async store this one drives; await its methods only through :meth:`submit`.

        Its connections belong to the private loop: awaiting it on another loop fails.
        """
        return self._store

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Schedule a coroutine (of :attr:`async_store`) on the private loop; do not block.

        For async code on another loop: ``await asyncio.wrap_future(sync.submit(
        sync.async_store.get_chat(chat_id)))`` runs the call on the store's own loop.

        Args:
            coroutine: A coroutine object, typically a method call on :attr:`async_store`.

        Returns:
            A ``concurrent.futures.Future`` with the coroutine's result or exception.

        Raises:
            BackendUnavailable: If the store is not open.
        """
        return self._loop_thread.submit(coroutine)

    @property
    def url(self) -> str:
        """The store URL (as given, password included: mask it before printing)."""
        return self._store.url

    @property
    def capabilities(self) -> Capabilities:
        """What the driver supports (see :class:`threadkeep.Capabilities`)."""
        return self._store.capabilities

    @property
    def is_open(self) -> bool:
        """Whether :meth:`open` has succeeded and :meth:`close` not been called since."""
        return self._store.is_open

    def open(self) -> Self:
        """Start the private loop and open the store on it (connect, create the schema).

        Returns:
            The sync store itself, so ``store = open_store(url).open()`` works.

        Raises:
            OpenTimeout: If the backend has not answered within ``open_timeout`` seconds
                (a server that accepts connections and never answers): the open is
                cancelled and the loop thread stopped, so nothing is left running.
            BackendUnavailable: If the backend cannot be reached (the loop is stopped
                again).
        """
        self._loop_thread.start()
        try:
            self._loop_thread.run(self._store.open(), self._open_timeout)
        except TimeoutError:
            self._loop_thread.stop()  # cancels what the open left on the loop, joins it
            msg = (
                f"the backend did not answer within {self._open_timeout:g} s while the "
                "store opened (a hung or overloaded server?); raise open_timeout to wait longer"
            )
            raise OpenTimeout(msg) from None
        except BaseException:
            self._loop_thread.stop()
            raise
        return self

    def close(self) -> None:
        """Close the store and stop its loop thread. Idempotent; :meth:`open` works again.

        Raises:
            BackendUnavailable: If the backend fails while closing (the store is closed
                and the loop stopped all the same).
        """
        if not self._loop_thread.running:
            return
        try:
            self._run(self._store.close())
        finally:
            self._loop_thread.stop()

    def load_messages(
        self,
        chat_id: UUID | str,
        messages: Iterable[LoadInput] | AsyncIterable[LoadInput],
        *,
        batch_size: int = DEFAULT_LOAD_BATCH,
    ) -> LoadReport:
        """Append a large history in batches on the driver's bulk path (blocking).

        :meth:`threadkeep.Store.load_messages`, with one difference: an iterator or
        generator is advanced on a worker thread, ``batch_size`` items at a time, never on
        the store's loop thread, so a generator may block and may itself call this sync
        store (a generator paging another chat with :meth:`list_messages`, for a copy).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            messages: ``Message`` instances, mappings of their fields, or what
                ``prepare`` returned (``PreparedMessage``, written as it is), as a list,
                any iterable or an async iterable; consumed once, in order.
            batch_size: Messages per batch (count, 1 to ``MAX_LOAD_BATCH``).

        Returns:
            A ``LoadReport``: messages created and already present, and batches written.

        Raises:
            ChatNotFound, IdempotencyConflict, InvalidContent, PayloadTooLarge,
            InvalidArgument, Conflict, BackendUnavailable: As the async method raises them.
            Whatever the generator raises, unchanged (batches before it stay written).
        """
        given: object = messages
        if isinstance(given, Iterable) and not isinstance(given, Sequence | AsyncIterable):
            messages = _off_loop(iter(given), max(batch_size, 1))
        return self._run(self._store.load_messages(chat_id, messages, batch_size=batch_size))

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<SyncStore {type(self._store).__name__} {state}>"


async def _off_loop(items: Iterator[_T], size: int) -> AsyncIterator[_T]:
    """Yield ``items``, advancing the iterator ``size`` at a time on a worker thread."""
    while chunk := await asyncio.to_thread(lambda: list(islice(items, size))):
        for item in chunk:
            yield item


def open_store(
    url: str | None = None,
    *,
    open_timeout: float | None = DEFAULT_OPEN_TIMEOUT,
    **options: Any,
) -> SyncStore:
    """Return an unopened blocking store for ``url`` (use it with ``with``).

    The sync twin of :func:`threadkeep.open_store`, with the same arguments, and one more.

    Args:
        url: The store URL; default ``THREADKEEP_URL``, then the settings file, then the
            embedded SQLite file ``./threadkeep.db``.
        open_timeout: Seconds ``open()`` waits for the backend at most (default
            :data:`DEFAULT_OPEN_TIMEOUT`, 60; ``None``: as long as the driver waits);
            past it ``open()`` raises :class:`OpenTimeout`.
        **options: Driver options, as for :func:`threadkeep.open_store`.

    Returns:
        A :class:`SyncStore`; ``with open_store(url) as store:`` opens and closes it.

    Raises:
        UnknownDriver: If no installed driver serves the URL's scheme.
        InvalidArgument: If the URL, ``open_timeout`` or an option is invalid.
    """
    timeout = _checked_timeout(open_timeout)  # before the driver is built
    return SyncStore(threadkeep.open_store(url, **options), open_timeout=timeout)


def _checked_timeout(value: object) -> float | None:
    """Return ``value`` as seconds, or ``None``; refuse anything but a positive number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"open_timeout must be a number of seconds or None, not {type(value).__name__}"
        raise InvalidArgument(msg)
    if not math.isfinite(value) or value <= 0:
        msg = f"open_timeout must be a positive, finite number of seconds, not {value!r}"
        raise InvalidArgument(msg)
    return float(value)
