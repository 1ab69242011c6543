"""Steps and runs on the memory service: a strong index for steps, If-Match claims for runs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from threadkeep import BackendUnavailable, Conflict, RunStatus, Step, StepStatus
from threadkeep_memservice import MemServiceStore, locator_write_fault
from threadkeep_memservice.emulator import FaultRule, MemoryService


def _steps(chat_id: object, run_id: str, count: int, stack: str = "root") -> list[Step]:
    return [
        Step(chat_id=chat_id, run_id=run_id, stack_id=stack, type="llm", input={"i": i})  # type: ignore[arg-type]
        for i in range(count)
    ]


async def test_steps_are_found_by_id_and_stack_from_a_cold_replica() -> None:
    service = MemoryService(seed=3)
    async with MemServiceStore(
        "memservice://", service=service, faults=[locator_write_fault(0.5)]
    ) as store:
        chat = await store.create_chat("u", "t")
        saved = await store.save_steps(_steps(chat.chat_id, "r1", 12, stack="s-1"))
        saved += await store.save_steps(_steps(chat.chat_id, "r2", 3, stack="s-2"))
    assert [s.seq for s in saved] == sorted(s.seq or 0 for s in saved)
    async with MemServiceStore("memservice://", service=service) as cold:
        for step in saved:
            assert await cold.get_step(step.step_id) == step
        assert [s.step_id for s in await cold.get_stack_steps("s-1")] == [
            s.step_id for s in saved[:12]
        ]
        assert [s.step_id for s in await cold.get_steps(chat.chat_id, "r2")] == [
            s.step_id for s in saved[12:]
        ]
        updated = await cold.update_step(saved[0].step_id, status=StepStatus.COMPLETED)
        assert (updated.seq, updated.created_at) == (saved[0].seq, saved[0].created_at)
        last = await cold.get_last_incomplete_step(chat.chat_id)
        assert last is not None
        assert last.step_id == saved[-1].step_id


async def test_a_failed_step_index_write_fails_the_save_before_any_step_is_stored() -> None:
    service = MemoryService()
    lose_step_index = FaultRule(
        "create_session", when=lambda a: str(a.get("description")).endswith("/step/"), times=1
    )
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        service.faults.add(lose_step_index)
        with pytest.raises(BackendUnavailable):
            await store.save_steps(_steps(chat.chat_id, "r", 3))
        assert await store.get_steps(chat.chat_id, "r") == []
        saved = await store.save_steps(_steps(chat.chat_id, "r", 3))
        assert len(await store.get_steps(chat.chat_id, "r")) == 3
        assert await store.get_step(saved[0].step_id) == saved[0]


async def test_one_of_two_replicas_claims_an_interrupted_run() -> None:
    service = MemoryService()
    async with (
        MemServiceStore("memservice://", service=service) as one,
        MemServiceStore("memservice://", service=service) as two,
    ):
        chat = await one.create_chat("u", "t")
        await one.start_run(chat.chat_id, "run-1", owner="w0")
        await one.finish_run(chat.chat_id, "run-1", owner="w0", status=RunStatus.INTERRUPTED)
        results = await asyncio.gather(
            one.claim_run(chat.chat_id, "run-1", owner="w1"),
            two.claim_run(chat.chat_id, "run-1", owner="w2"),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        assert len(winners) == 1
        assert [type(r) for r in results if isinstance(r, BaseException)] == [Conflict]
        assert (await two.get_run(chat.chat_id, "run-1")).owner == winners[0].owner


async def test_the_sweeper_lists_only_active_runs() -> None:
    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    service = MemoryService()
    async with MemServiceStore("memservice://", service=service, clock=lambda: now[0]) as store:
        chat = await store.create_chat("u", "t")
        await store.start_run(chat.chat_id, "dead", owner="w", lease_seconds=10)
        await store.start_run(chat.chat_id, "done", owner="w", lease_seconds=10)
        await store.finish_run(chat.chat_id, "done", owner="w", status=RunStatus.COMPLETE)
        now[0] += timedelta(seconds=11)
        service.reset_counts()
        swept = await store.sweep_expired_runs()
        assert [r.run_id for r in swept] == ["dead"]
        listings = [c for c in service.call_log if c.operation == "list_sessions"]
        assert listings
        assert all(c.args["description_prefix"] == "//run/active/" for c in listings)
        receipt = await store.erase_user("u")
        assert receipt.stores["hot"]["runs"] == 2
