"""Helpers for testing code that uses threadkeep (shipped, like ``structlog.testing``).

- :class:`ManualClock`: a clock you set, freeze or step backwards, for ``open_store(clock=...)``.
- :func:`count_store_writes`: counts the write primitives a store executes, to check a policy
  such as "buffered writes make exactly two store writes per run".

The contract suite for driver authors is the separate ``threadkeep-contract-tests`` package.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from ._driver import STORE_WRITE_PRIMITIVES
from ._store import Store

__all__ = ["WRITE_PRIMITIVES", "ManualClock", "WriteCount", "count_store_writes"]

WRITE_PRIMITIVES = STORE_WRITE_PRIMITIVES
"""The driver primitives that write; each call is one store write (one atomic step)."""


class ManualClock:
    """A clock that returns what you set; every call returns the same instant until moved.

    Args:
        start: The first instant (tz-aware); default 2026-01-01T00:00:00Z.

    Example:
        ``clock = ManualClock(); store = open_store("memory://", clock=clock);
        clock.advance(seconds=-5)`` makes later writes look older than earlier ones.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        """Return the current instant."""
        return self.now

    def advance(self, *, seconds: float) -> datetime:
        """Move the clock by ``seconds`` (negative steps backwards) and return the new instant."""
        self.now += timedelta(seconds=seconds)
        return self.now


class WriteCount(Counter[str]):
    """Calls per write primitive; ``total()`` is the number of store writes."""


@contextmanager
def count_store_writes(store: Store) -> Iterator[WriteCount]:
    """Count the write primitives ``store`` executes inside the ``with`` block.

    Patches the store's :attr:`~threadkeep.Store.primitives` (not the driver's class), so
    other stores are unaffected; the patches are removed on exit. Counts are keyed by the
    primitive's name (``"insert_messages"``, ``"commit_run"``...).

    Yields:
        A :class:`WriteCount`, updated live.
    """
    counts = WriteCount()
    primitives = store.primitives
    own = dict(vars(primitives))
    patched: list[str] = []
    for name in WRITE_PRIMITIVES:
        original = getattr(primitives, name)

        @functools.wraps(original)
        async def counted(*args: Any, __name: str = name, __fn: Any = original, **kw: Any) -> Any:
            counts[__name] += 1
            return await __fn(*args, **kw)

        setattr(primitives, name, counted)
        patched.append(name)
    try:
        yield counts
    finally:
        for name in patched:
            if name in own:
                setattr(primitives, name, own[name])
            else:
                delattr(primitives, name)
