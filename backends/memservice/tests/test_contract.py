"""The shared contract suite on ``memservice://``: without faults, and losing 20 % of the
locator writes.

Every call of ``store_factory`` builds a *new* store instance over the test's named
emulator, so the suite's ``reopen`` step (and every second instance it opens) is a cold
replica: empty chat registry, empty location cache, same service. With locator faults, a
cold replica may answer "not found" for a message, tool call or reasoning whose locator was
lost; the suite allows that where it uses its ``lookup`` helper (``strong_uuid_lookup`` is
declared false), and only when ``lookup_may_miss`` confirms the locator is really absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar
from uuid import UUID, uuid4

import pytest
from hypothesis import note

from threadkeep import Store
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract
from threadkeep_memservice import MemServiceDriver, MemServiceStore, locator_write_fault
from threadkeep_memservice.emulator import FaultRule, NotFoundError, drop_named_service

from .backdoor import damage_message, damage_record, move_message, raw_chats, raw_messages

FAULT_SEED = 2
"""Seed the fault table restarts from at every open: the n-th locator write after an open
is lost or not the same way on every replay (seed 2 loses 6 of the first 30 at 20 %)."""


_DIVERGENCES: dict[str, str] = {
    "test_a_chat_id_another_chat_has_is_a_conflict": (
        "insert_chat does not refuse a chat_id another chat has (sessions are keyed by "
        "dedup_key; a check would cost a locator read per create_chat)"
    ),
}


class _MemServiceContract(StoreContract):
    known_divergences: ClassVar[dict[str, str]] = _DIVERGENCES

    @pytest.fixture
    def store_factory(self) -> Iterator[Callable[..., Store]]:
        name = f"contract-{uuid4().hex}"
        rules = self.fresh_faults()

        def factory(**options: Any) -> Store:
            seed = FAULT_SEED if rules else None
            return MemServiceStore(f"memservice://{name}", faults=rules, fault_seed=seed, **options)

        yield factory
        drop_named_service(name)

    def fresh_faults(self) -> tuple[FaultRule, ...]:
        return ()

    async def lookup_may_miss(self, store: Store, kind: str, item_id: UUID) -> bool:
        """True when the ``kind:uuid`` locator is really absent from the service."""
        assert isinstance(store.driver, MemServiceDriver)
        try:
            await store.driver.service.find_session(
                store.driver.space_id, dedup_key=f"{kind}:{item_id}"
            )
        except NotFoundError:
            note(f"  -> the locator {kind}:{item_id} was lost (a miss is allowed)")
            return True
        return False

    async def raw_chats(self, store: Store) -> list[RawChat]:
        assert isinstance(store.driver, MemServiceDriver)
        return await raw_chats(store)

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        assert isinstance(store.driver, MemServiceDriver)
        return await raw_messages(store, chat_id)

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        assert isinstance(store.driver, MemServiceDriver)
        if kind in ("step", "run"):
            return await damage_record(store, kind, chat_id, seq, damage)
        if kind == "chat" or seq is None:  # chats live in session metadata: not written here
            return None
        return await damage_message(store, chat_id, seq, damage)

    async def move_message(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        assert isinstance(store.driver, MemServiceDriver)
        return await move_message(store, chat_id, seq, new_seq)


class TestMemServiceContract(_MemServiceContract):
    """No faults: every rule of the contract."""


class TestMemServiceContractLocatorFaults(_MemServiceContract):
    """20 % of locator writes fail: the contract still holds, uuid lookups may miss."""

    known_divergences: ClassVar[dict[str, str]] = _DIVERGENCES

    def fresh_faults(self) -> tuple[FaultRule, ...]:
        return (locator_write_fault(0.2),)
