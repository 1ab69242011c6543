"""Damaged step and run rows (issue 12, item 1; capability ``steps``).

A step or run row changed outside threadkeep raises :class:`threadkeep.CorruptRecord`
naming its chat (the row's own chat key, not the damaged body's) from every read that
meets it, and one damaged run never stops ``sweep_expired_runs`` from interrupting the
other expired runs of the store.

The damage is written through the driver's back door ``damage_row`` with ``kind`` "step"
(``seq`` the step's seq) or "run" (``seq`` ``None``: the chat's one run); a back door that
cannot damage those rows returns ``None`` and the tests skip, saying so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import ClassVar
from uuid import UUID

import pytest

from threadkeep import CorruptRecord, RunStatus, Step, Store

from ._base import ContractBase, StoreFactory
from ._corrupt_rows import DAMAGES, write_damage
from ._helpers import SteppingClock, opened
from ._steps import steps_capability

__all__ = ["DamagedRecordTests"]

BODY_DAMAGES = [name for name in DAMAGES if name.startswith("body_")]
"""The damage kinds a step or run body can take (they have no timestamp column of their own)."""

Reads = dict[str, tuple[Callable[[], Awaitable[object]], str]]


class DamagedRecordTests(ContractBase):
    """Damaged step and run rows raise ``CorruptRecord`` naming their chat."""

    contract_area: ClassVar[str] = "Corrupt rows"

    async def _damage(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        return await write_damage(self, store, kind, chat_id, seq=seq, damage=damage)

    async def _damaged_reads(self, store: Store, damage: str) -> tuple[UUID, Step, Reads]:
        """A chat with three steps and a run, step 2 and the run damaged: the reads to try."""
        chat = await store.create_chat("u-damaged", f"t-records-{damage}")
        chat_id = chat.chat_id
        steps = await store.save_steps(
            [Step(chat_id=chat_id, stack_id="s1", type="tool", run_id="r1") for _ in range(3)]
        )
        await store.start_run(chat_id, "r1", owner="w")
        reads: Reads = {}
        column = await self._damage(store, "step", chat_id, steps[1].seq, damage)
        if column is not None:
            reads["get_step"] = (lambda: store.get_step(steps[1].step_id), column)
            reads["get_steps"] = (lambda: store.get_steps(chat_id, "r1"), column)
            reads["scan_steps"] = (lambda: store.scan_steps(chat_id), column)
        column = await self._damage(store, "run", chat_id, None, damage)
        if column is not None:
            reads["get_run"] = (lambda: store.get_run(chat_id, "r1"), column)
        return chat_id, steps[1], reads

    @steps_capability
    @pytest.mark.asyncio
    async def test_damaged_step_and_run_name_their_chat(self, store: Store) -> None:
        tried = 0
        for damage in BODY_DAMAGES:
            chat_id, step, reads = await self._damaged_reads(store, damage)
            for name, (read, column) in reads.items():
                with pytest.raises(CorruptRecord) as caught:
                    await read()
                error = caught.value
                assert error.chat_id == chat_id, (damage, name, error.chat_id)
                assert str(chat_id) in str(error), (damage, name)
                assert error.column == column, (damage, name, error.column)
                if name == "get_step":
                    assert error.seq == step.seq, (damage, error.seq)
            tried += len(reads)
        if not tried:
            pytest.skip("the back door damages no step or run rows (`damage_row`)")

    @steps_capability
    @pytest.mark.asyncio
    async def test_a_damaged_run_does_not_stop_the_sweeper(
        self, store_factory: StoreFactory
    ) -> None:
        # The store's own clock, moved by hand: the leases expire in the order the test says,
        # however slowly it runs (a real clock and short leases raced a loaded machine).
        clock = SteppingClock(step=timedelta(milliseconds=1))
        async with opened(store_factory, clock=clock) as store:
            await self._damaged_run_is_passed_over(store, clock)

    async def _damaged_run_is_passed_over(self, store: Store, clock: SteppingClock) -> None:
        damaged = await store.create_chat("u-damaged", "t-bad-run")
        healthy = await store.create_chat("u-damaged", "t-good-run")
        await store.start_run(damaged.chat_id, "r-bad", owner="w", lease_seconds=30)
        clock.advance(timedelta(seconds=1))  # the damaged run expires first: it heads the sweep
        await store.start_run(healthy.chat_id, "r-good", owner="w", lease_seconds=30)
        for damage in BODY_DAMAGES:
            if await self._damage(store, "run", damaged.chat_id, None, damage) is not None:
                break
        else:
            pytest.skip("the back door cannot damage a run row (`damage_row`)")
        clock.advance(timedelta(seconds=60))  # both leases have expired
        swept = await store.sweep_expired_runs()
        assert [(r.chat_id, r.run_id) for r in swept] == [(healthy.chat_id, "r-good")]
        good = await store.get_run(healthy.chat_id, "r-good")
        assert good is not None
        assert good.status is RunStatus.INTERRUPTED
        with pytest.raises(CorruptRecord):  # still reported to whoever reads it
            await store.get_run(damaged.chat_id, "r-bad")
