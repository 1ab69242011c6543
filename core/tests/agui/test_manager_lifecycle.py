"""``RunManager`` edges: a cancel before the run's first step, a run again right after ``wait``."""

from __future__ import annotations

import asyncio

import pytest
from ag_ui.core import RunErrorEvent, RunFinishedEvent, RunStartedEvent

from threadkeep.agui import RunManager, StorageAgent


def manager_for(store, agent):
    return RunManager(lambda: StorageAgent(agent, store, user_id="u"))


@pytest.mark.parametrize("how", ["handle", "manager"])
async def test_a_cancel_before_the_first_step_ends_the_stream_with_the_cancel_outcome(
    store, kit, how
):
    async def script(inp):
        yield kit.started(inp)
        yield kit.finished(inp)

    manager = manager_for(store, kit.Agent(script))
    handle = await manager.run(kit.run_input())
    assert (handle.cancel() if how == "handle" else manager.cancel("thread-1", "run-1")) is True

    received = await asyncio.wait_for(_collect(handle), 120)
    (event,) = received
    assert isinstance(event, RunFinishedEvent)
    assert event.outcome is not None
    assert event.outcome.type == "cancelled"
    assert (event.thread_id, event.run_id) == ("thread-1", "run-1")
    await asyncio.wait_for(handle.wait(), 120)
    assert handle.done
    assert manager.get("thread-1", "run-1") is None
    assert handle.cancel() is False
    # The run never began: nothing is stored, and the same ids may run now.
    assert await store.find_chat("u", "thread-1") is None
    again = await manager.run(kit.run_input())
    assert [type(e) for e in await _collect(again)] == [RunStartedEvent, RunFinishedEvent]
    await again.wait()


@pytest.mark.parametrize("fails", [False, True], ids=["finishes", "raises"])
async def test_the_same_ids_run_again_as_soon_as_wait_returns(store, kit, fails):
    async def script(inp):
        yield kit.started(inp)
        if fails:
            raise RuntimeError("boom")
        yield kit.finished(inp)

    manager = manager_for(store, kit.Agent(script))
    handle = await manager.run(kit.run_input())
    await _collect(handle)
    await handle.wait()
    assert handle.done
    assert manager.get("thread-1", "run-1") is None
    # No "is executing" Conflict: the manager answers like for any finished run.
    second = await manager.run(kit.run_input())
    (event,) = await _collect(second)
    assert isinstance(event, RunErrorEvent)
    assert event.code == "RUN_CONFLICT"
    await second.wait()
    assert manager.get("thread-1", "run-1") is None


async def _collect(handle):
    return [e async for e in handle.events()]


async def test_a_cancel_after_the_terminal_event_changes_nothing(store, kit):
    linger = asyncio.Event()

    async def script(inp):
        yield kit.started(inp)
        for event in kit.text("a1", ["done"]):
            yield event
        yield kit.finished(inp)
        await linger.wait()  # an agent that lingers after its terminal event

    manager = manager_for(store, kit.Agent(script))
    handle = await manager.run(kit.run_input())
    received = await asyncio.wait_for(_collect(handle), 120)
    assert isinstance(received[-1], RunFinishedEvent)
    assert received[-1].outcome is None or received[-1].outcome.type != "cancelled"
    # The run ended as far as the client knows: the cancel reports so, stops the
    # lingering agent (wait() returns without it) and leaves the outcome as it was.
    assert handle.cancel() is False
    assert manager.cancel("thread-1", "run-1") is False
    await asyncio.wait_for(handle.wait(), 120)
    assert not linger.is_set()
    chat = await store.find_chat("u", "thread-1")
    run = await store.get_run(chat.chat_id, "run-1")
    assert run.status.value == "complete"
    (message,) = [m for m in await kit.history(store, "u", "thread-1") if m.agui_id == "a1"]
    assert (message.content, message.status.value) == ("done", "complete")
