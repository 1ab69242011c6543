"""Cancellation-safe resource handling for drivers (issue 12, item 2).

A task cancelled while it awaits a connection checkout, a ``BEGIN`` or a ``COMMIT``
interrupts only the *await*: the driver's thread (aiosqlite) or the server goes on, and
the context manager that would have rolled back and checked the connection in was never
entered, or is torn down half-way. On SQLite that leaves ``BEGIN IMMEDIATE`` held by a
connection nobody owns, and every later write waits for the busy timeout and fails
``database is locked``.

The helpers here run such steps to completion whatever happens to the caller, then
deliver the cancellation: a resource is either fully acquired and registered for release,
or released before the ``CancelledError`` propagates. The caller still sees its
cancellation (``asyncio.wait_for`` still times out); only the bookkeeping is shielded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["complete", "enter_whole", "finish"]

T = TypeVar("T")


async def complete(step: Coroutine[Any, Any, T]) -> tuple[T, bool]:
    """Run ``step`` to its end even if the calling task is cancelled meanwhile.

    Args:
        step: A coroutine (a checkout, a ``BEGIN``, a ``COMMIT``, a close).

    Returns:
        ``(result, cancelled)``: the step's result, and whether the caller was cancelled
        while waiting (it must then deliver the cancellation itself).

    Raises:
        BaseException: Whatever ``step`` raised.
    """
    task = asyncio.ensure_future(step)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                break
            cancelled = True
    return task.result(), cancelled


async def finish(step: Coroutine[Any, Any, T]) -> T:
    """Run ``step`` to its end, then re-raise a cancellation that came meanwhile.

    Raises:
        asyncio.CancelledError: If the caller was cancelled while ``step`` ran.
        BaseException: Whatever ``step`` raised.
    """
    result, cancelled = await complete(step)
    if cancelled:
        raise asyncio.CancelledError
    return result


def _exit_whole(
    manager: AbstractAsyncContextManager[Any],
) -> Callable[
    [type[BaseException] | None, BaseException | None, TracebackType | None], Awaitable[bool]
]:
    async def leave(
        kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        return bool(await finish(manager.__aexit__(kind, exc, tb)))

    return leave


async def enter_whole(stack: AsyncExitStack, manager: AbstractAsyncContextManager[T]) -> T:
    """Enter ``manager`` on ``stack`` so that cancellation never leaves it half-entered.

    Entering runs to completion; if the caller was cancelled meanwhile, the manager is
    exited at once (its rollback and release run to completion too) and the cancellation
    raised. Exiting later (through ``stack``) is shielded the same way.

    Args:
        stack: The exit stack that will exit ``manager``.
        manager: An async context manager (``engine.begin()``, ``engine.connect()``...).

    Returns:
        What ``manager.__aenter__`` returned.

    Raises:
        asyncio.CancelledError: If the caller was cancelled while entering (the manager
            has been exited by then).
    """
    value, cancelled = await complete(manager.__aenter__())
    if cancelled:
        error = asyncio.CancelledError()
        await complete(manager.__aexit__(asyncio.CancelledError, error, None))
        raise error
    stack.push_async_exit(_exit_whole(manager))
    return value
