"""``LoopThread``: a private event loop on its own thread, for blocking callers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import CancelledError, Future, InvalidStateError
from typing import Any, TypeVar

from threadkeep import BackendUnavailable, ThreadkeepError

__all__ = ["BlockingCallOnLoopThread", "LoopThread", "OpenTimeout"]

_T = TypeVar("_T")

_CLOSED = "the store was closed while this call was running"


class BlockingCallOnLoopThread(ThreadkeepError, RuntimeError):
    """A blocking (``threadkeep.sync``) call was made on the sync store's own loop thread.

    The call would wait for the loop it blocks, forever, so it is refused at once: code
    running on that loop (a coroutine given to ``submit``) awaits ``async_store`` instead.
    A ``RuntimeError`` too, as it was before it joined the ``ThreadkeepError`` tree.
    """


class OpenTimeout(BackendUnavailable, TimeoutError):
    """A sync store's :meth:`~threadkeep.sync.SyncStore.open` did not finish in time.

    Raised when the backend accepts the connection but does not answer (a hung server, a
    stalled proxy or load balancer) for ``open_timeout`` seconds. The open is cancelled and
    the store's loop thread stopped: nothing is left running, and ``open()`` may be called
    again. A ``BackendUnavailable`` (the operation may be retried) and a ``TimeoutError``.
    """


class LoopThread:
    """An event loop running on a daemon thread of its own until :meth:`stop`.

    Blocking code hands it coroutines with :meth:`run`; it works the same from the main
    thread, from worker threads, and from code that runs inside another event loop (the
    caller's loop is blocked for the call, as any blocking call blocks it, but nothing is
    shared with it). One loop per sync store, started once: not ``asyncio.run`` per call,
    which would tear down the driver's connections with every call.

    Args:
        name: The thread's name (shown in debuggers and thread dumps).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        # Futures of calls not finished yet: failed by stop(), so no caller waits forever.
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether the loop thread has been started and not stopped."""
        return self._thread is not None

    def start(self) -> None:
        """Start the thread and wait until its loop runs. Idempotent."""
        if self._thread is not None:
            return
        ready = threading.Event()
        thread = threading.Thread(target=self._main, args=(ready,), name=self._name, daemon=True)
        thread.start()
        ready.wait()
        self._thread = thread

    def _main(self, ready: threading.Event) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            ready.set()
            await self._stopped.wait()

        # asyncio.run cancels what is left, closes async generators and the executor.
        asyncio.run(serve())

    def submit(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        """Schedule ``coroutine`` on the loop and return its (thread-safe) future at once.

        Raises:
            BackendUnavailable: If the loop is not running (the store is not open).
        """
        with self._lock:
            loop = self._loop
            if self._thread is None or loop is None:
                coroutine.close()
                msg = "store is not open; use `with threadkeep.sync.open_store(url) as store:`"
                raise BackendUnavailable(msg)
            future = asyncio.run_coroutine_threadsafe(coroutine, loop)
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run ``coroutine`` on the loop, block until it ends, and return its result.

        Exceptions the coroutine raises are raised here unchanged. If the waiting thread is
        interrupted (``KeyboardInterrupt``), or ``timeout`` passes, the coroutine is
        cancelled.

        Args:
            coroutine: The coroutine to run on the loop.
            timeout: Seconds to wait at most (``None``: no bound).

        Raises:
            TimeoutError: If ``timeout`` seconds passed first (the coroutine is cancelled;
                the caller decides what that means).
            BackendUnavailable: If the loop is not running (the store is not open), or is
                stopped (the store closed by another thread) before the call ends.
            BlockingCallOnLoopThread: If called from the loop's own thread (it would wait
                for itself).
        """
        if self._thread is not None and threading.current_thread() is self._thread:
            coroutine.close()
            msg = "a sync store was called from its own loop thread; await the async store"
            raise BlockingCallOnLoopThread(msg)
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except CancelledError:
            # Only stop() cancels a call (it cancels what is left on the loop).
            raise BackendUnavailable(_CLOSED) from None
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop (cancelling what still runs on it) and join the thread. Idempotent.

        A call still running is cancelled: its waiting caller gets ``BackendUnavailable``.
        """
        with self._lock:
            thread, loop, stopped = self._thread, self._loop, self._stopped
            if thread is None or loop is None or stopped is None:
                return
            self._thread = self._loop = self._stopped = None
        loop.call_soon_threadsafe(stopped.set)
        thread.join()
        with self._lock:
            left, self._pending = self._pending, set()
        for future in left:  # scheduled too late to run: fail it rather than leave it waiting
            with contextlib.suppress(InvalidStateError):  # it finished meanwhile
                future.set_exception(BackendUnavailable(_CLOSED))
