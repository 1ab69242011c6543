"""Damaged step and run rows (issue 12, item 1), on SQLite and PostgreSQL.

A step or run row changed outside threadkeep raises ``CorruptRecord`` naming its chat (the
row's ``chat_id`` column, not the damaged body's), and one damaged run never stops the
sweeper from interrupting the other expired runs of the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import sqlalchemy as sa

from threadkeep import CorruptRecord, RunStatus, Step
from threadkeep_sql import SqlStore

DAMAGED_BODIES = ["not json {", "[1, 2]", '{"status": 5}']


async def _damage(store: SqlStore, table: str, where: str, body: str, **params: object) -> None:
    """Overwrite a row's body through SQL, as an outside tool would."""
    async with store.driver.db.transaction() as conn:
        stmt = sa.text(f"UPDATE {table} SET body = :body WHERE {where}")
        typed = [sa.bindparam(name, type_=sa.Uuid()) for name in params]
        await conn.execute(stmt.bindparams(*typed), {"body": body, **params})


@pytest.mark.parametrize("body", DAMAGED_BODIES)
async def test_damaged_step_and_run_name_their_chat(store: SqlStore, body: str) -> None:
    chat = await store.create_chat("u-damaged", "t-runs")
    steps = await store.save_steps(
        [Step(chat_id=chat.chat_id, stack_id="s1", type="tool", run_id="r1") for _ in range(3)]
    )
    await store.start_run(chat.chat_id, "r1", owner="w")
    await _damage(store, "steps", "step_id = :id", body, id=steps[1].step_id)
    await _damage(store, "runs", "run_id = 'r1'", body)
    reads: dict[str, Callable[[], Awaitable[object]]] = {
        "get_step": lambda: store.get_step(steps[1].step_id),
        "get_steps": lambda: store.get_steps(chat.chat_id, "r1"),
        "scan_steps": lambda: store.scan_steps(chat.chat_id),
        "get_run": lambda: store.get_run(chat.chat_id, "r1"),
    }
    for name, read in reads.items():
        with pytest.raises(CorruptRecord) as caught:
            await read()
        assert caught.value.chat_id == chat.chat_id, name
        assert str(chat.chat_id) in str(caught.value), name
        assert caught.value.column == "body", name
    with pytest.raises(CorruptRecord) as step_error:
        await store.get_step(steps[1].step_id)
    assert step_error.value.seq == steps[1].seq


async def test_a_damaged_run_does_not_stop_the_sweeper(store: SqlStore) -> None:
    damaged = await store.create_chat("u-damaged", "t-bad-run")
    healthy = await store.create_chat("u-damaged", "t-good-run")
    await store.start_run(damaged.chat_id, "r-bad", owner="w", lease_seconds=0.01)
    await asyncio.sleep(0.02)  # the damaged run expires first: it heads the sweep's order
    await store.start_run(healthy.chat_id, "r-good", owner="w", lease_seconds=0.01)
    await _damage(store, "runs", "run_id = 'r-bad'", "not json {")
    await asyncio.sleep(0.05)
    swept = await store.sweep_expired_runs()
    assert [(r.chat_id, r.run_id) for r in swept] == [(healthy.chat_id, "r-good")]
    good = await store.get_run(healthy.chat_id, "r-good")
    assert good is not None
    assert good.status is RunStatus.INTERRUPTED
    with pytest.raises(CorruptRecord):  # still reported to whoever reads it
        await store.get_run(damaged.chat_id, "r-bad")
