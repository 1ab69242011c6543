"""Reads on a streaming-replication standby, with read-your-writes (``read_url=``).

A store opened with ``read_url`` sends its reads (``Database.read`` and
``Database.runner()``) to the standby and everything else (writes, transactions, migrations)
to the primary. The standby replays the primary's WAL a little later, so a read right after
a write could miss it; the rule here is that **a caller always reads its own writes**:

- every write operation of the store (a write statement or a transaction, committed or not:
  a failure can still have committed) bumps a counter when it ends;
- a read that finds writes it has not yet seen replayed asks the primary for its current
  WAL position (``pg_current_wal_lsn()``, which is at or past the commit of every write that
  has ended), then polls the standby until ``pg_last_wal_replay_lsn()`` reaches it, backing
  off from 1 ms to 50 ms, for at most ``read_wait`` seconds;
- if the standby gets there, the read runs on it and later reads skip the check until the
  next write; if it does not (lagging, replay paused, promoted, unreachable), this read runs
  on the primary and the next one checks again.

Reads with no write of this store before them go straight to the standby: another process's
writes show up there as soon as they are replayed (PostgreSQL's own guarantee for a hot
standby; see "Hot Standby" in the PostgreSQL manual, section 27.4).
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
        wait: Seconds a read after a write waits for the standby before using the primary.

    Attributes:
        standby_reads: Reads served by the standby so far.
        primary_reads: Reads that fell back to the primary so far.
    """

    def __init__(self, primary: Database, standby: Database, wait: float) -> None:
        self._primary = primary
        self._standby = standby
        self._wait = wait
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
        """Return whether the standby has replayed every write of this store that has ended."""
        if self._seen >= self._written:
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
