"""The storage agent is an open state machine (AG-UI seed, "Extensibility").

A subclass extends the event-handler registry (dispatch walks the event's MRO), overrides
the unknown-event handler, and the message-build hooks to store extra fields.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import CustomEvent, RawEvent, RunAgentInput

from threadkeep import Conflict, Message, Role
from threadkeep.agui import FoldState, Record, RunManager, StorageAgent, UnknownEvent, parse_event


class VoteEvent(CustomEvent):
    """A subclass of a known event: it finds the handler registered for ``CustomEvent``."""


class TaggedMessage(Message):
    team: str = "none"
    finished_at: int | None = None


class CustomStorageAgent(StorageAgent):
    @classmethod
    def event_handlers(cls):
        return {**super().event_handlers(), CustomEvent: "handle_custom"}

    async def handle_custom(self, state: FoldState, event: CustomEvent) -> None:
        record = await self.open_record(state, agui_id=None, role=Role.ASSISTANT)
        record.content.append(f"{event.name}={event.value}")
        await self.finish(state, record, record.message.status.COMPLETE)

    async def handle_unknown_event(self, state: FoldState, event: Any) -> None:
        state.run_metadata.setdefault("unknown", []).append(event.type)

    def build_message_create(self, state: FoldState, *, agui_id: str | None, role: Role) -> Message:
        base = super().build_message_create(state, agui_id=agui_id, role=role)
        return TaggedMessage(**base.model_dump(), team="research")

    def message_update_fields(self, state: FoldState, record: Record) -> dict[str, Any]:
        return {"finished_at": state.event_timestamp}


async def test_a_subclass_registers_handlers_and_hooks(store, kit):
    async def script(inp: RunAgentInput):
        yield kit.started(inp)
        yield VoteEvent(name="vote", value=5)
        yield RawEvent(event={"latency": 12})
        yield parse_event({"type": "FUTURE_EVENT", "payload": 1})
        start, content, end = kit.text("a1", ["tagged"])
        yield start
        yield content
        yield end.model_copy(update={"timestamp": 1234})
        yield kit.finished(inp)

    agent = CustomStorageAgent(kit.Agent(script), store, user_id="u")
    assert CustomStorageAgent.handler_name(VoteEvent) == "handle_custom"
    assert StorageAgent.handler_name(VoteEvent) is None
    await (await RunManager(lambda: agent).run(kit.run_input())).wait()

    history = await kit.history(store, "u", "thread-1")
    vote, answer = history[1:]
    assert vote.content == "vote=5"
    assert (answer.agui_id, answer.content) == ("a1", "tagged")
    assert answer.model_extra["team"] == "research"
    assert answer.model_extra["finished_at"] == 1234
    chat = await store.find_chat("u", "thread-1")
    run = await store.get_run(chat.chat_id, "run-1")
    assert run.metadata["unknown"] == ["RAW", "FUTURE_EVENT"]


def test_unknown_types_parse_to_unknown_events():
    event = parse_event({"type": "FUTURE_EVENT", "payload": 1})
    assert isinstance(event, UnknownEvent)
    assert event.model_extra == {"payload": 1}


def test_a_bad_policy_is_refused(store, kit):
    with pytest.raises(ValueError, match="write_policy"):
        StorageAgent(kit.Agent(None), store, user_id="u", write_policy="sometimes")
    with pytest.raises(ValueError, match="on_error"):
        StorageAgent(kit.Agent(None), store, user_id="u", on_error="ignore")


async def test_the_manager_refuses_a_duplicate_run_and_knows_its_runs(store, kit):
    import asyncio

    release = asyncio.Event()

    async def script(inp):
        yield kit.started(inp)
        await release.wait()
        yield kit.finished(inp)

    manager = RunManager(lambda: StorageAgent(kit.Agent(script), store, user_id="u"))
    handle = await manager.run(kit.run_input())
    assert manager.get("thread-1", "run-1") is handle
    with pytest.raises(Conflict):
        await manager.run(kit.run_input())
    assert manager.cancel("thread-1", "unknown") is False
    release.set()
    await handle.wait()
    assert manager.get("thread-1", "run-1") is None
    assert manager.cancel("thread-1", "run-1") is False
