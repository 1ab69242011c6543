"""The unbounded hand-off from a run's event stream to its background fold.

``asyncio.Queue`` costs about a microsecond per ``put_nowait`` and more per ``get``
(task accounting, waiter lists), paid for every streamed delta; a run has one producer and
one consumer, so a deque and one waiter do the same. ``put_nowait`` never blocks and
never drops an item: the outgoing stream never waits for the store.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Channel"]

T = TypeVar("T")


class Channel(Generic[T]):
    """An unbounded single-consumer channel: ``put_nowait`` from anywhere, ``get`` to wait."""

    __slots__ = ("_items", "waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self.waiter: asyncio.Future[None] | None = None
        """The consumer's future while it waits in :meth:`get` (read-only for others)."""

    def put_nowait(self, item: T) -> None:
        """Add ``item`` (never blocks) and wake the consumer if it waits."""
        self._items.append(item)
        if self.waiter is not None:
            self.wake()

    def wake(self) -> None:
        """Wake the consumer waiting in :meth:`get`, if any.

        A producer may append to :attr:`pending` itself and call this when
        :attr:`waiter` is set (what :meth:`put_nowait` does, one call fewer per item).
        """
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> T:
        """Return the oldest item, waiting for one when there is none.

        Only one task may wait at a time (the run's fold).
        """
        while not self._items:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self._items.popleft()

    @property
    def pending(self) -> deque[T]:
        """The items not taken yet, oldest first (the consumer may pop them from the left)."""
        return self._items

    def get_nowait(self) -> T | None:
        """Return the oldest item, or ``None`` when there is none."""
        return self._items.popleft() if self._items else None
