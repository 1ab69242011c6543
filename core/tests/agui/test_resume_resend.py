"""Issue 18 item 2: a resumed run whose agent re-sends a completed step's events stores them once.

The agent below does not check ``step.done``: on resume it replays its whole stream from the
start, as many real agents do (they re-run from their own checkpoint). The first attempt
fails mid-answer; the resumed attempt re-sends the completed AG-UI step ``plan`` (a reasoning
without ids, a text message, a tool result) and then the whole answer.
"""

from __future__ import annotations

import pytest
from ag_ui.core import (
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)

from threadkeep import MessageStatus, Role, RunStatus
from threadkeep.agui import StorageAgent
from threadkeep.agui._compat import (
    ThinkingEndEvent,
    ThinkingStartEvent,
    ThinkingTextMessageContentEvent,
)


class Crash(Exception):
    """The first attempt's failure."""


@pytest.mark.parametrize("policy", ["incremental", "buffered"])
async def test_a_resumed_agent_that_resends_a_completed_step_stores_it_once(
    every_store, kit, policy
):
    store = every_store
    attempts: list[int] = []

    async def script(inp):
        attempts.append(1)
        yield kit.started(inp)
        yield StepStartedEvent(step_name="plan")
        yield ThinkingStartEvent()
        yield ThinkingTextMessageContentEvent(delta="think")
        yield ThinkingEndEvent()
        for event in kit.text("p1", ["plan done"]):
            yield event
        yield ToolCallResultEvent(message_id="r1", tool_call_id="c1", content="42")
        yield StepFinishedEvent(step_name="plan")
        yield TextMessageStartEvent(message_id="a1", role="assistant")
        yield TextMessageContentEvent(message_id="a1", delta="The answer")
        if len(attempts) == 1:
            raise Crash("worker died")
        yield TextMessageContentEvent(message_id="a1", delta=" is 42.")
        yield kit.finished(inp)

    def agent(owner):
        return StorageAgent(kit.Agent(script), store, user_id="u", owner=owner, write_policy=policy)

    inp = kit.run_input()
    with pytest.raises(Crash):
        [_ async for _ in agent("w1").run(inp)]
    resumer = agent("w2")
    resume = await resumer.claim(inp)
    [_ async for _ in resumer.run(inp, resume=resume)]

    history = await kit.history(store, "u", "thread-1")
    summary = [
        (m.role, m.agui_id, m.content or "".join(r.content for r in m.reasonings), m.status)
        for m in history
    ]
    assert summary == [
        (Role.USER, "user-run-1", "hello from run-1", MessageStatus.COMPLETE),
        (Role.REASONING, None, "think", MessageStatus.COMPLETE),
        (Role.ASSISTANT, "p1", "plan done", MessageStatus.COMPLETE),
        (Role.TOOL, "r1", "42", MessageStatus.COMPLETE),
        (Role.ASSISTANT, "a1", "The answer is 42.", MessageStatus.COMPLETE),
    ]
    chat = await store.find_chat("u", "thread-1")
    steps = [s for s in await store.get_steps(chat.chat_id, "run-1") if s.type == "agui_step"]
    assert len(steps) == 1
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.COMPLETE
