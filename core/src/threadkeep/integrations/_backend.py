"""``StoreHandle``: one way for every integration to reach a store, from any loop or thread.

Frameworks call their history hooks from whatever runs them: the application's event loop,
a fresh loop per ``run_sync`` call, or a plain thread. An async driver's connections belong
to the loop that opened them, so an integration given a URL (or a ``threadkeep.sync``
store) runs every call on the sync store's private loop and awaits the result from the
caller's loop; an integration given an async ``threadkeep.Store`` uses it on the caller's
loop, as the application does.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeAlias, TypeVar, cast

from threadkeep import BackendUnavailable, InvalidArgument, Store
from threadkeep.sync import SyncStore

__all__ = ["StoreHandle", "StoreSource", "shared_sync_store"]

_T = TypeVar("_T")

StoreSource: TypeAlias = Store | SyncStore | str
"""What an integration accepts as its store: an async store, a sync store, or a store URL."""

_shared: dict[tuple[str, tuple[tuple[str, Any], ...]], SyncStore] = {}
_shared_lock = threading.Lock()


def shared_sync_store(url: str, **options: Any) -> SyncStore:
    """Return the process-wide sync store for ``url`` and ``options``, opening it once.

    Integrations built from a URL (one session object per conversation is the frameworks'
    pattern) share one store, with one loop thread and one connection pool, per URL; the
    stores are closed when the interpreter exits.

    Raises:
        UnknownDriver: If no installed driver serves the URL's scheme.
        InvalidArgument: If the URL or an option is invalid.
        BackendUnavailable: If the backend cannot be reached.
    """
    key = (url, tuple(sorted(options.items(), key=lambda kv: kv[0])))
    with _shared_lock:
        store = _shared.get(key)
        if store is None or not store.is_open:
            from threadkeep.sync import open_store

            store = open_store(url, **options).open()
            _shared[key] = store
        return store


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        stores = list(_shared.values())
        _shared.clear()
    for store in stores:
        store.close()


class StoreHandle:
    """Runs store calls for an integration, on the right loop.

    Args:
        store: An async ``threadkeep.Store`` (opened on first use on the caller's loop if it
            is not open), a ``threadkeep.sync.SyncStore`` (opened on first use if needed),
            or a store URL (a shared sync store, see :func:`shared_sync_store`).
        **options: Driver options, with a URL only.

    Raises:
        InvalidArgument: If ``store`` is none of these, or options come with a store object.
    """

    def __init__(self, store: StoreSource, **options: Any) -> None:
        if options and not isinstance(store, str):
            raise InvalidArgument("driver options go with a store URL, not a store object")
        if not isinstance(cast(object, store), Store | SyncStore | str):  # callers are untyped
            msg = (
                f"store must be a threadkeep Store, a threadkeep.sync store or a URL, not {store!r}"
            )
            raise InvalidArgument(msg)
        self._source = store
        self._options = options
        self._sync: SyncStore | None = store if isinstance(store, SyncStore) else None
        self._open_lock = threading.Lock()

    def _sync_store(self) -> SyncStore | None:
        """Return the sync store to run on (opening it), or ``None`` for an async store."""
        if isinstance(self._source, Store):
            return None
        with self._open_lock:
            if isinstance(self._source, str):
                self._sync = shared_sync_store(self._source, **self._options)
            assert self._sync is not None
            if not self._sync.is_open:
                self._sync.open()
            return self._sync

    async def run(self, call: Callable[[Store], Coroutine[Any, Any, _T]]) -> _T:
        """Await ``call(store)`` on the store's loop, from any loop.

        Args:
            call: Builds the coroutine from the async store, e.g. ``lambda s: s.get_chat(i)``.

        Returns:
            What the coroutine returns; its exceptions are raised unchanged.

        Raises:
            BackendUnavailable: If a sync store is closed by another thread before the call
                ends (a cancellation of the caller's own task stays a cancellation).
        """
        if isinstance(self._source, Store):
            if not self._source.is_open:
                await self._source.open()
            return await call(self._source)
        sync = self._sync if self._sync is not None and self._sync.is_open else None
        if sync is None:
            sync = await asyncio.to_thread(self._sync_store)
            assert sync is not None
        future = sync.submit(call(sync.async_store))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if future.cancelled() and (task is None or not task.cancelling()):
                # The sync store's loop stopped under the call (closed by another thread).
                msg = "the store was closed while this call was running"
                raise BackendUnavailable(msg) from None
            raise

    def run_sync(self, call: Callable[[Store], Awaitable[_T]]) -> _T:
        """Run ``call(store)`` to its end and return its result, blocking the caller.

        Raises:
            InvalidArgument: If the handle holds an async store (its loop is the caller's to
                drive: give a URL or a ``threadkeep.sync`` store for blocking use).
            BackendUnavailable: If the sync store is closed before the call ends.
            BlockingCallOnLoopThread: If called on the sync store's own loop thread.
        """
        sync = self._sync_store()
        if sync is None:
            msg = (
                "blocking calls need a store URL or a threadkeep.sync store; this integration "
                "was given an async threadkeep.Store: use its async methods"
            )
            raise InvalidArgument(msg)
        store = sync.async_store

        async def whole() -> _T:
            return await call(store)

        # The sync store's own blocking call: refuses its loop thread (which would wait for
        # itself) and turns a close under the call into BackendUnavailable.
        return sync._run(whole())
