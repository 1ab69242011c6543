"""Reads on a streaming-replication standby, with read-your-writes (``read_url=``).

A store opened with ``read_url`` sends its reads (``Database.read`` and
``Database.runner()``) to the standby and everything else (writes, transactions, migrations)
to the primary. The standby replays the primary's WAL a little later, so a read could miss a
write that has already returned; each read is therefore fenced on a WAL position of the
primary, in one of two modes (``read_consistency=``):

- ``"strong"`` (the default): **every read sees every write that committed before it
  started**, from any process. The read first asks the primary for its current WAL position
  (``pg_current_wal_lsn()``, a trivial query: the primary does no other work for the read),
  then runs on the standby once its ``pg_last_wal_replay_lsn()`` has reached it. This is what
  ``concurrent_processes`` promises: another instance's write is visible as soon as it
  returned.
- ``"session"``: **a caller reads its own writes**. Every write operation of the store (a
  write statement or a transaction, committed or not: a failure can still have committed)
  bumps a counter when it ends; only a read that finds writes it has not yet seen replayed
  fences on the primary's position, and later reads skip the fence until the next write.
  Other processes' writes show up once replayed (PostgreSQL's hot-standby guarantee, manual
  section 27.4), usually within milliseconds, but not at once.

Either way the standby is polled (1 ms backing off to 50 ms) for at most ``read_wait``
seconds; if it has not caught up (lagging, replay paused, promoted, unreachable) that read
runs on the primary instead, and the next one checks again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import sqlalchemy as sa

from threadkeep import BackendUnavailable

if TYPE_CHECKING:
    from ._engine import Database

__all__ = ["ReadRouter"]

T = TypeVar("T")

_CURRENT_LSN = sa.text("SELECT CAST(pg_current_wal_lsn() AS text)")
_REPLAYED = sa.text(
    "SELECT coalesce(pg_last_wal_replay_lsn() >= CAST(CAST(:lsn AS text) AS pg_lsn), false)"
)
_FIRST_DELAY = 0.001
_MAX_DELAY = 0.05


class ReadRouter:
    """Chooses the standby or the primary for each read (see the module docstring).

    Args:
        primary: The primary's database (its own read path is used for fallbacks).
        standby: The standby's database.
        wait: Seconds a fenced read waits for the standby before using the primary.
        strong: Fence every read (``"strong"``), not only reads after this store's writes
            (``"session"``); see the module docstring.

    Attributes:
        standby_reads: Reads served by the standby so far.
        primary_reads: Reads that fell back to the primary so far.
    """

    def __init__(
        self, primary: Database, standby: Database, wait: float, *, strong: bool = True
    ) -> None:
        self._primary = primary
        self._standby = standby
        self._wait = wait
        self._strong = strong
        self._written = 0
        self._seen = 0
        self.standby_reads = 0
        self.primary_reads = 0

    @property
    def standby(self) -> Database:
        """The standby's database."""
        return self._standby

    def note_write(self) -> None:
        """Record that a write operation of this store has ended."""
        self._written += 1

    @asynccontextmanager
    async def noting(self, operation: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
        """Run a write ``operation`` and record its end (also when it fails)."""
        try:
            async with operation as value:
                yield value
        finally:
            self.note_write()

    @asynccontextmanager
    async def route(
        self, open_read: Callable[[Database], AbstractAsyncContextManager[T]]
    ) -> AsyncIterator[T]:
        """Open a read with ``open_read`` on the standby, or on the primary (see module doc)."""
        if await self._caught_up():
            self.standby_reads += 1
            target = self._standby
        else:
            self.primary_reads += 1
            target = self._primary
        async with open_read(target) as value:
            yield value

    async def _caught_up(self) -> bool:
        """Return whether the standby has replayed what this read must see (module doc)."""
        if not self._strong and self._seen >= self._written:
            return True
        written = self._written
        async with self._primary.read_here() as conn:
            lsn = (await conn.execute(_CURRENT_LSN)).scalar()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait
        delay = _FIRST_DELAY
        while True:
            try:
                async with self._standby.read() as conn:
                    replayed = bool((await conn.execute(_REPLAYED, {"lsn": lsn})).scalar())
            except BackendUnavailable:
                return False  # the standby is unreachable: this read goes to the primary
            if replayed:
                self._seen = max(self._seen, written)
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, _MAX_DELAY)
