"""Inbound ids no visible read finds: hidden messages, and a double submit's concurrent run.

- A message hidden with ``Store.delete_messages`` counts as stored: a client echoing its
  whole list (hidden ones included) runs on, and the hidden message is not sent back to
  the model.
- Two concurrent runs carrying the same new user message (a double submit): the first
  writer stores it, the second uses the stored one, on every backend; a different
  message under the same id is still a ``RUN_CONFLICT``.
"""

from __future__ import annotations

import asyncio

import pytest
from ag_ui.core import AssistantMessage, RunErrorEvent, RunFinishedEvent, UserMessage

from threadkeep import Role
from threadkeep.agui import RunManager, StorageAgent

POLICIES = ["incremental", "buffered"]


def reply_script(kit, text: str = "ok"):
    async def script(inp):
        yield kit.started(inp)
        for event in kit.text(f"a-{inp.run_id}", [text]):
            yield event
        yield kit.finished(inp)

    return script


async def run(store, agent, inp):
    return [e async for e in StorageAgent(agent, store, user_id="u").run(inp)]


@pytest.mark.parametrize("hide", ["user", "assistant", "both"])
async def test_an_echoed_hidden_message_counts_as_stored_and_stays_hidden(store, kit, hide):
    agent = kit.Agent(reply_script(kit, "answer r1"))
    secret = UserMessage(id="u1", content="my SSN is 123-45-6789")
    await run(store, agent, kit.run_input(run_id="r1", messages=[secret]))
    chat = await store.find_chat("u", "thread-1")
    user, assistant = await kit.history(store, "u", "thread-1")
    hidden = {"user": [user], "assistant": [assistant], "both": [user, assistant]}[hide]
    assert await store.delete_messages(chat.chat_id, [m.message_id for m in hidden])

    echo = [
        secret,
        AssistantMessage(id="a-r1", content="answer r1"),
        UserMessage(id="u2", content="next question"),
    ]
    for run_id in ("r2", "r3"):  # every later run of the client, not only the first
        out = await run(store, agent, kit.run_input(run_id=run_id, messages=echo))
        assert type(out[-1]) is RunFinishedEvent, out
    visible = await kit.history(store, "u", "thread-1")
    assert [m.agui_id for m in visible if m.role is Role.USER] == (
        ["u2"] if hide != "assistant" else ["u1", "u2"]
    )
    assert not {m.message_id for m in hidden} & {m.message_id for m in visible}
    # The model never gets the hidden message back.
    sent = [m.id for m in agent.inputs[-1].messages]
    assert not {m.agui_id for m in hidden} & set(sent)
    assert "u2" in sent


async def test_an_unknown_assistant_message_is_still_refused(store, kit):
    agent = kit.Agent(reply_script(kit))
    await run(store, agent, kit.run_input(run_id="r1"))
    echo = [AssistantMessage(id="never-stored", content="?"), UserMessage(id="u2", content="hi")]
    (event,) = await run(store, agent, kit.run_input(run_id="r2", messages=echo))
    assert isinstance(event, RunErrorEvent)
    assert event.code == "INVALID_INPUT"


class _Barrier:
    """Holds each ``begin_run`` until ``parties`` runs have classified their input."""

    def __init__(self, store, parties: int) -> None:
        self.real = store.begin_run
        self.parties = parties
        self.arrived = 0
        self.ready = asyncio.Event()

    async def begin_run(self, *args, **kwargs):
        self.arrived += 1
        if self.arrived >= self.parties:
            self.ready.set()
        await asyncio.wait_for(self.ready.wait(), 120)  # a hang guard
        return await self.real(*args, **kwargs)


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_double_submit_stores_the_message_once_and_both_runs_proceed(
    store, kit, policy, monkeypatch
):
    agent = kit.Agent(reply_script(kit))
    manager = RunManager(lambda: StorageAgent(agent, store, user_id="u", write_policy=policy))
    first = kit.run_input(run_id="r0", messages=[UserMessage(id="u1", content="hi")])
    handle = await manager.run(first)
    await handle.wait()

    barrier = _Barrier(store, 2)
    monkeypatch.setattr(store, "begin_run", barrier.begin_run)
    messages = [UserMessage(id="u1", content="hi"), UserMessage(id="u2", content="same question")]
    handles = [await manager.run(kit.run_input(run_id=r, messages=messages)) for r in ("x0", "x1")]
    outs = [[e async for e in h.events()] for h in handles]
    await manager.drain()

    assert [type(out[-1]) for out in outs] == [RunFinishedEvent, RunFinishedEvent], outs
    history = await kit.history(store, "u", "thread-1")
    users = [m for m in history if m.role is Role.USER]
    assert [m.agui_id for m in users] == ["u1", "u2"]
    assert users[1].content == "same question"
    # Both runs' models got the question, as stored by whichever run wrote it first.
    for inp in agent.inputs[-2:]:
        assert [m.id for m in inp.messages if m.role == "user"] == ["u1", "u2"]


async def test_a_different_message_under_the_same_id_is_still_a_conflict(store, kit, monkeypatch):
    agent = kit.Agent(reply_script(kit))
    manager = RunManager(lambda: StorageAgent(agent, store, user_id="u"))
    await (await manager.run(kit.run_input(run_id="r0"))).wait()

    barrier = _Barrier(store, 2)
    monkeypatch.setattr(store, "begin_run", barrier.begin_run)
    handles = [
        await manager.run(
            kit.run_input(run_id=r, messages=[UserMessage(id="u2", content=f"from {r}")])
        )
        for r in ("x0", "x1")
    ]
    outs = [[e async for e in h.events()] for h in handles]
    await manager.drain()
    codes = sorted(getattr(out[-1], "code", None) or type(out[-1]).__name__ for out in outs)
    assert codes == ["RUN_CONFLICT", "RunFinishedEvent"]
    (stored,) = [m for m in await kit.history(store, "u", "thread-1") if m.agui_id == "u2"]
    assert stored.content in ("from x0", "from x1")
