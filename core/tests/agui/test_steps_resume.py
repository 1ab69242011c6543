"""Steps (Yao seed) recorded from inside an agent; resume after a cancel never re-runs a tool.

A completed tool step is stored when it completes, under either write policy; claiming a
run for resume is a compare-and-set (a second claimer gets ``Conflict``); nested agent calls
get child stack ids that ``get_stack_path`` walks back to the root.
"""

from __future__ import annotations

import asyncio

import pytest
from ag_ui.core import ToolCallResultEvent

from threadkeep import Conflict, MessageStatus, RunStatus, StepStatus
from threadkeep.agui import NoActiveRun, RunManager, StorageAgent, current_run

POLICIES = ["incremental", "buffered"]


def factory(store, agent, owner, policy):
    return lambda: StorageAgent(agent, store, user_id="u", owner=owner, write_policy=policy)


@pytest.mark.parametrize("policy", POLICIES)
async def test_cancel_after_a_completed_tool_step_then_resume_skips_it(store, kit, policy):
    tool_runs: list[str] = []
    durable_when_completed: list[StepStatus] = []
    never = asyncio.Event()

    async def script(inp):
        ctx = current_run()
        yield kit.started(inp)
        ctx.space["currency"] = "EUR"
        async with ctx.step("tool", input={"city": "Oslo"}, key="call-weather") as step:
            if not step.done:
                tool_runs.append(inp.run_id)
                step.output = {"forecast": "-3°C"}
        if not step.done:
            stored = await store.get_step(step.step.step_id)
            durable_when_completed.append(stored.status)
        yield ToolCallResultEvent(
            message_id=f"result-{inp.run_id}-{len(tool_runs)}",
            tool_call_id="call-weather",
            content=step.output["forecast"],
        )
        async with ctx.step("llm", input={"after": "tool"}) as llm:
            if not ctx.resuming:
                for event in kit.text("a1", ["It is "])[:-1]:
                    yield event
                await never.wait()
            for event in kit.text("a2", [f"cold ({ctx.space['currency']})"]):
                yield event
            llm.output = {"content": "cold"}
        yield kit.finished(inp)

    agent = kit.Agent(script)
    first = RunManager(factory(store, agent, "worker-1", policy))
    handle = await first.run(kit.run_input())
    async for event in handle.events():
        if getattr(event, "delta", None) == "It is ":
            handle.cancel()
    await handle.wait()

    chat = await store.find_chat("u", "thread-1")
    steps = {s.type: s for s in await store.get_steps(chat.chat_id, "run-1")}
    assert steps["tool"].status is StepStatus.COMPLETED
    assert steps["tool"].output == {"forecast": "-3°C"}
    assert steps["llm"].status is StepStatus.INTERRUPTED
    assert steps["llm"].space_snapshot == {"currency": "EUR"}
    assert durable_when_completed == [StepStatus.COMPLETED]
    last = await store.get_last_incomplete_step(chat.chat_id)
    assert (last.type, last.status) == ("llm", StepStatus.INTERRUPTED)
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.INTERRUPTED

    resumer = RunManager(factory(store, agent, "worker-2", policy))
    rival = StorageAgent(agent, store, user_id="u", owner="worker-3")
    resumed = await resumer.resume(kit.run_input())
    with pytest.raises(Conflict):
        await rival.claim(kit.run_input())
    received = [e async for e in resumed.events()]
    await resumed.wait()

    assert len(tool_runs) == 1  # the finished tool did not run again
    assert received[-1] == kit.finished(kit.run_input())
    steps_after = await store.get_steps(chat.chat_id, "run-1")
    assert [s.type for s in steps_after].count("tool") == 1
    assert all(s.status is StepStatus.COMPLETED for s in steps_after)
    run = await store.get_run(chat.chat_id, "run-1")
    assert (run.status, run.owner) == (RunStatus.COMPLETE, "worker-2")
    history = await kit.history(store, "u", "thread-1")
    by_id = {m.agui_id: m for m in history}
    assert (by_id["a1"].content, by_id["a1"].status) == ("It is ", MessageStatus.INTERRUPTED)
    assert (by_id["a2"].content, by_id["a2"].status) == ("cold (EUR)", MessageStatus.COMPLETE)
    assert await store.get_last_incomplete_step(chat.chat_id) is None


async def test_nested_delegate_gets_child_stack_ids(store, kit):
    async def script(inp):
        ctx = current_run()
        async with ctx.step("llm") as step:
            step.output = {"plan": "delegate"}
        ctx.space["choose_prompt"] = "query"
        async with ctx.delegate("visualizer", input={"chart": "bar"}) as child:
            assert current_run() is child
            async with child.step("llm", input={"chart": "bar"}) as inner:
                for event in kit.text("v1", ["chart ready"]):
                    yield event
                inner.output = {"ok": True}
            child.output = {"response": "chart ready"}
        assert current_run() is ctx
        yield kit.finished(inp)

    manager = RunManager(
        lambda: StorageAgent(kit.Agent(script), store, user_id="u", agent_id="analyzer")
    )
    await (await manager.run(kit.run_input())).wait()

    chat = await store.find_chat("u", "thread-1")
    steps = await store.get_steps(chat.chat_id, "run-1")
    root = [s for s in steps if s.stack_depth == 0]
    nested = [s for s in steps if s.stack_depth == 1]
    assert [s.type for s in root] == ["input", "llm", "delegate"]
    assert [s.type for s in nested] == ["input", "llm"]
    assert {s.agent_id for s in root} == {"analyzer"}
    assert {s.agent_id for s in nested} == {"visualizer"}
    (delegate,) = [s for s in root if s.type == "delegate"]
    assert delegate.status is StepStatus.COMPLETED
    assert delegate.output == {"response": "chart ready"}
    assert delegate.space_snapshot == {"choose_prompt": "query"}
    child_stack = nested[0].stack_id
    assert nested[0].stack_parent_id == root[0].stack_id
    assert await store.get_stack_path(child_stack) == [root[0].stack_id, child_stack]


async def test_a_failing_step_is_failed_with_its_error(store, kit):
    async def script(inp):
        async with current_run().step("tool", input={"n": 1}):
            raise KeyError("missing")
        yield kit.finished(inp)  # pragma: no cover

    handle = await RunManager(lambda: StorageAgent(kit.Agent(script), store, user_id="u")).run(
        kit.run_input()
    )
    await handle.wait()
    chat = await store.find_chat("u", "thread-1")
    (tool,) = [s for s in await store.get_steps(chat.chat_id, "run-1") if s.type == "tool"]
    assert tool.status is StepStatus.FAILED
    assert tool.error == "KeyError: 'missing'"
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.ERRORED


async def test_resuming_a_complete_run_is_a_conflict(store, kit):
    manager = RunManager(
        lambda: StorageAgent(kit.Agent(lambda inp: _no_events()), store, user_id="u")
    )
    await (await manager.run(kit.run_input())).wait()
    with pytest.raises(Conflict):
        await manager.resume(kit.run_input())


async def _no_events():
    return
    yield  # pragma: no cover


def test_current_run_outside_a_run_is_a_clear_error():
    with pytest.raises(NoActiveRun, match="inside an agent"):
        current_run()
