"""The shared contract suite on ``memservice://``: without faults, and losing 20 % of the
locator writes.

Every call of ``store_factory`` builds a *new* store instance over the test's named
emulator, so the suite's ``reopen`` step (and every second instance it opens) is a cold
replica: empty chat registry, empty location cache, same service. With locator faults, a
cold replica may answer "not found" for a message, tool call or reasoning whose locator was
lost; the suite allows that where it uses its ``lookup`` helper (``strong_uuid_lookup`` is
declared false).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar
from uuid import UUID, uuid4

import pytest

from threadkeep import Store
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract
from threadkeep_memservice import MemServiceStore, locator_write_fault
from threadkeep_memservice.emulator import FaultRule, drop_named_service

from .backdoor import raw_chats, raw_messages

DIVERGENCES: dict[str, str] = {}


class _MemServiceContract(StoreContract):
    faults: ClassVar[tuple[FaultRule, ...]] = ()

    @pytest.fixture
    def store_factory(self) -> Iterator[Callable[..., Store]]:
        name = f"contract-{uuid4().hex}"
        rules = self.fresh_faults()

        def factory(**options: Any) -> Store:
            # Reseeding on open makes the lost locators a function of the calls made, so a
            # Hypothesis example replays with the same faults.
            return MemServiceStore(
                f"memservice://{name}", faults=rules, fault_seed=0 if rules else None, **options
            )

        yield factory
        drop_named_service(name)

    def fresh_faults(self) -> tuple[FaultRule, ...]:
        return ()

    async def raw_chats(self, store: Store) -> list[RawChat]:
        assert isinstance(store, MemServiceStore)
        return await raw_chats(store)

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        assert isinstance(store, MemServiceStore)
        return await raw_messages(store, chat_id)


class TestMemServiceContract(_MemServiceContract):
    """No faults: every rule of the contract."""

    known_divergences: ClassVar[dict[str, str]] = dict(DIVERGENCES)


class TestMemServiceContractLocatorFaults(_MemServiceContract):
    """20 % of locator writes fail (seeded): the contract still holds, uuid lookups may miss."""

    known_divergences: ClassVar[dict[str, str]] = dict(DIVERGENCES)

    def fresh_faults(self) -> tuple[FaultRule, ...]:
        return (locator_write_fault(0.2),)
