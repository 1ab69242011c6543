"""The fixture convention of the archive contracts, the same as the store contract's.

A driver's test class provides factories, never opened objects; the suite opens and closes
what it builds:

- ``store_factory``: ``(**options) -> Store``, unopened, on fresh storage per test (as for
  :class:`~threadkeep_contract_tests.StoreContract`);
- ``archive_factory``: ``(**options) -> archive store``, unopened, on an empty root per
  test (the same root on every call within a test).

A fixture may be defined on the test class or in a ``conftest.py``; either may yield the
factory and clean up after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from threadkeep import Store

__all__ = ["ArchiveFactory", "ArchiveFixtures", "LifecycleFixtures"]

ArchiveFactory = Callable[..., Any]
"""``(**options) -> archive store`` (unopened): what an ``archive_factory`` fixture returns."""


class ArchiveFixtures:
    """Builds the ``archive`` fixture (open, on an empty root) from ``archive_factory``."""

    @pytest_asyncio.fixture
    async def archive(self, archive_factory: ArchiveFactory) -> AsyncIterator[Any]:
        """An open archive store from ``archive_factory``, closed after the test."""
        opened = archive_factory()
        await opened.open()
        try:
            yield opened
        finally:
            await opened.close()


class LifecycleFixtures(ArchiveFixtures):
    """Adds the ``store`` fixture (an open hot store) from ``store_factory``."""

    @pytest_asyncio.fixture
    async def store(self, store_factory: Callable[..., Store]) -> AsyncIterator[Store]:
        """An open hot store from ``store_factory``, closed after the test."""
        opened = store_factory()
        await opened.open()
        try:
            yield opened
        finally:
            await opened.close()
