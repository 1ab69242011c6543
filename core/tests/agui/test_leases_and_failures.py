"""A run's lease, and a store that is slow or failing (SPEC section 3; AG-UI seed).

Runs are recorded with a lease, so a sweeper finds a run whose process died; a slow store
never stalls the outgoing stream; a failing store loses no folded event once it recovers.
"""

from __future__ import annotations

import asyncio

import pytest

from threadkeep import BackendUnavailable, MessageStatus, RunStatus, open_store
from threadkeep.agui import RunManager, StorageAgent
from threadkeep.testing import ManualClock


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_sweeper_finds_a_run_whose_worker_died(kit, tmp_path, backend):
    clock = ManualClock()
    url = "memory://" if backend == "memory" else f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
    async with open_store(url, clock=clock) as store:
        delivered = asyncio.Event()
        never = asyncio.Event()

        async def script(inp):
            yield kit.started(inp)
            for event in kit.text("a1", ["half an answer"])[:-1]:
                yield event
            delivered.set()
            await never.wait()  # the worker "dies" here: no more events, no end

        agent = StorageAgent(kit.Agent(script), store, user_id="u", lease_seconds=30)
        handle = await RunManager(lambda: agent).run(kit.run_input())
        await delivered.wait()
        chat = None
        while chat is None or not await kit.history(store, "u", "thread-1", run_id="run-1"):
            await asyncio.sleep(0.01)  # the incremental writer stores the open message
            chat = await store.find_chat("u", "thread-1")

        assert await store.sweep_expired_runs() == []  # the lease is live
        clock.advance(seconds=31)
        (swept,) = await store.sweep_expired_runs()
        assert (swept.run_id, swept.status) == ("run-1", RunStatus.INTERRUPTED)
        message = (await kit.history(store, "u", "thread-1"))[-1]
        assert (message.agui_id, message.status, message.in_progress) == (
            "a1",
            MessageStatus.INTERRUPTED,
            False,
        )
        # The stuck worker is stopped; it has lost its lease and changes nothing.
        handle.cancel()
        await handle.wait()
        run = await store.get_run(chat.chat_id, "run-1")
        assert run.status is RunStatus.INTERRUPTED


class GatedWrites:
    """Holds every message write of a store until ``open()`` (a very slow store)."""

    def __init__(self, store) -> None:
        self.gate = asyncio.Event()
        self.blocked = asyncio.Event()
        self.waiting = self.completed = 0
        for name in ("insert_messages", "replace_message"):
            original = getattr(store.primitives, name)

            async def gated(*args, __original=original, **kwargs):
                self.waiting += 1
                self.blocked.set()
                await self.gate.wait()
                result = await __original(*args, **kwargs)
                self.completed += 1
                return result

            setattr(store.primitives, name, gated)

    def open(self) -> None:
        self.gate.set()


async def test_a_slow_store_never_stalls_the_stream(store, kit):
    deltas = [f"token {i} " for i in range(300)]

    # Message writes wait until the gate opens (the run's entry write is not gated).
    slow = GatedWrites(store)

    async def script(inp):
        start, *rest = kit.text("a1", deltas)
        yield kit.started(inp)
        yield start
        await slow.blocked.wait()  # the fold is now stuck writing the new message
        for event in rest:
            yield event
        yield kit.finished(inp)

    handle = await RunManager(
        lambda: StorageAgent(kit.Agent(script), store, user_id="u", flush_bytes=64)
    ).run(kit.run_input())
    received = [e async for e in handle.events()]

    # The client got the whole stream while the store has not finished one write.
    assert len(received) == len(deltas) + 4
    assert (slow.waiting, slow.completed) == (1, 0)
    assert not handle.done
    slow.open()
    await handle.wait()
    message = (await kit.history(store, "u", "thread-1"))[-1]
    assert (message.content, message.status) == ("".join(deltas), MessageStatus.COMPLETE)


async def test_a_store_that_fails_for_a_while_loses_nothing(store, kit, caplog):
    failures = {"left": 6}
    for name in ("insert_messages", "replace_message"):
        original = getattr(store.primitives, name)

        async def flaky(*args, __original=original, **kwargs):
            if failures["left"] > 0:
                failures["left"] -= 1
                raise BackendUnavailable("the database is restarting")
            return await __original(*args, **kwargs)

        setattr(store.primitives, name, flaky)

    async def script(inp):
        yield kit.started(inp)
        for index in range(3):
            for event in kit.text(f"a{index}", [f"part {index}"]):
                yield event
        yield kit.finished(inp)

    handle = await RunManager(lambda: StorageAgent(kit.Agent(script), store, user_id="u")).run(
        kit.run_input()
    )
    received = [e async for e in handle.events()]
    await handle.wait()
    assert len(received) == 11
    assert failures["left"] == 0
    history = await kit.history(store, "u", "thread-1")
    assert [(m.agui_id, m.content, m.status) for m in history[1:]] == [
        (f"a{i}", f"part {i}", MessageStatus.COMPLETE) for i in range(3)
    ]
    assert any("retried" in r.getMessage() for r in caplog.records)


async def test_heartbeats_renew_the_lease_while_the_agent_works(store, kit):
    beats: list[object] = []
    beat = asyncio.Event()
    original = store.heartbeat_run

    async def heartbeat_run(*args, **kwargs):
        run = await original(*args, **kwargs)
        beats.append(run.lease_expires_at)
        beat.set()
        return run

    store.heartbeat_run = heartbeat_run

    async def script(inp):
        yield kit.started(inp)
        await beat.wait()  # the agent works until the wrapper has renewed its lease once
        yield kit.finished(inp)

    agent = StorageAgent(kit.Agent(script), store, user_id="u", lease_seconds=0.3)
    await (await RunManager(lambda: agent).run(kit.run_input())).wait()
    chat = await store.find_chat("u", "thread-1")
    run = await store.get_run(chat.chat_id, "run-1")
    assert beats
    assert beats[0] is not None
    assert (run.status, run.lease_expires_at) == (RunStatus.COMPLETE, None)
