"""Importing several chats at once: a task group that fails with the first typed error.

The importers write one chat's records in order, but different chats independently, so
while one chat's batch waits on the database another chat's is folded or encoded. An
:class:`asyncio.TaskGroup` cancels the other writes at the first failure, and raises a
group; :func:`chat_lanes` raises the first error itself instead, so callers see the same
``ThreadkeepError`` (``InvalidArgument``, ``IdempotencyConflict``...) as a sequential
import would raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["CHAT_LANES", "chat_lanes"]

CHAT_LANES = 8
"""Chats written at once (a count): enough to overlap the database's time with the
client's, few enough to stay within a store's connection pool (10 by default)."""


@asynccontextmanager
async def chat_lanes() -> AsyncIterator[asyncio.TaskGroup]:
    """Yield a task group; on a failure, cancel the other tasks and raise that failure.

    Raises:
        BaseException: The first exception a task raised (not an ``ExceptionGroup``).
    """
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
