"""A streamed message over the store's ``max_message_bytes``: stored truncated, and visibly so.

Under either policy the message keeps the deltas that fit, ends ``errored`` with
``metadata["truncated"]``; the run ends ``errored`` naming it; one warning is logged; the
rest of the run is stored as usual.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from ag_ui.core import (
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UserMessage,
)

from threadkeep import MessageStatus, RunStatus, open_store
from threadkeep.agui import StorageAgent

POLICIES = ["incremental", "buffered"]
LIMIT = 1000


@pytest.fixture(params=["memory", "sqlite"])
async def small_store(request, tmp_path: Path):
    url = "memory://" if request.param == "memory" else f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
    async with open_store(url, max_message_bytes=LIMIT) as store:
        yield store


def text_body(kit):
    return [
        *kit.text("big", ["x" * 300] * 4 + ["tail"]),  # the 4th delta passes 1000 bytes
        *kit.text("after", ["still stored"]),
    ]


def tool_body(kit):
    return [
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="dump", parent_message_id="big"),
        *[ToolCallArgsEvent(tool_call_id="c1", delta="y" * 300) for _ in range(4)],
        ToolCallEndEvent(tool_call_id="c1"),
        *kit.text("after", ["still stored"]),
    ]


def reasoning_body(kit):
    return [
        ReasoningMessageStartEvent(message_id="big", role="reasoning"),
        *[ReasoningMessageContentEvent(message_id="big", delta="z" * 300) for _ in range(4)],
        ReasoningMessageEndEvent(message_id="big"),
        *kit.text("after", ["still stored"]),
    ]


@pytest.mark.parametrize("body", [text_body, tool_body, reasoning_body])
@pytest.mark.parametrize("policy", POLICIES)
async def test_an_oversize_message_is_stored_truncated_errored_and_noted(
    small_store, kit, policy, body, caplog
):
    inp = kit.run_input()
    events = [kit.started(inp), *body(kit), kit.finished(inp)]

    async def script(_):
        for event in events:
            yield event

    agent = StorageAgent(kit.Agent(script), small_store, user_id="u", write_policy=policy)
    with caplog.at_level(logging.WARNING, "threadkeep.agui"):
        out = [e async for e in agent.run(inp)]
    assert out == events  # the client's stream is untouched

    history = await kit.history(small_store, "u", "thread-1")
    big = next(m for m in history if "big" in (m.agui_id, *(c.agui_id for c in m.tool_calls)))
    kept = big.content + "".join(c.arguments for c in big.tool_calls)
    kept += "".join(r.content for r in big.reasonings)
    assert len(kept) == 900  # three whole deltas
    assert big.status is MessageStatus.ERRORED
    assert not big.in_progress
    dropped = 300 + len("tail") if body is text_body else 300
    assert big.metadata["truncated"] == {"kept_bytes": 900, "dropped_bytes": dropped}
    assert [(m.agui_id, m.content, m.status) for m in history if m.agui_id == "after"] == [
        ("after", "still stored", MessageStatus.COMPLETE)
    ]
    chat = await small_store.find_chat("u", "thread-1")
    run = await small_store.get_run(chat.chat_id, "run-1")
    assert run.status is RunStatus.ERRORED
    assert "max_message_bytes" in (run.error or "")
    assert run.metadata["truncated_messages"] == [big.agui_id or str(big.message_id)]
    assert run.lease_expires_at is None
    warnings = [r for r in caplog.records if "max_message_bytes" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_oversize_inbound_message_is_invalid_input(small_store, kit, caplog):
    inp = kit.run_input(messages=[UserMessage(id="u1", content="w" * (LIMIT + 1))])

    async def script(_):
        yield kit.started(inp)
        yield RunFinishedEvent(thread_id=inp.thread_id, run_id=inp.run_id)

    agent = StorageAgent(kit.Agent(script), small_store, user_id="u")
    (event,) = [e async for e in agent.run(inp)]
    assert isinstance(event, RunErrorEvent)
    assert event.code == "INVALID_INPUT"
    assert "max_message_bytes" in event.message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
