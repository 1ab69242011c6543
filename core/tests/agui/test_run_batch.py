"""Regression tests for the core addition ``Store.begin_run`` / ``Store.end_run`` (``_commit_run``).

A buffered run is two store writes: ``begin_run`` (the input and the lease) and ``end_run``
(every record, every step and the end status), each one ``_commit_run`` call.
"""

from __future__ import annotations

import pytest

from threadkeep import (
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    Message,
    Role,
    RunStatus,
    Step,
    StepStatus,
    open_store,
)
from threadkeep.testing import ManualClock, count_store_writes


@pytest.fixture
async def store():
    async with open_store("memory://") as opened:
        yield opened


async def test_begin_and_end_are_one_write_each(store):
    chat = await store.create_chat("u", "t")
    with count_store_writes(store) as counts:
        run = await store.begin_run(
            chat.chat_id,
            "r1",
            owner="w1",
            messages=[Message(role=Role.USER, content="hi", agui_id="m1", run_id="r1")],
        )
        step = Step(chat_id=chat.chat_id, run_id="r1", stack_id="s", type="llm")
        ended = await store.end_run(
            chat.chat_id,
            "r1",
            owner="w1",
            status=RunStatus.COMPLETE,
            messages=[Message(role=Role.ASSISTANT, content="hello", agui_id="a1", run_id="r1")],
            steps=[step.model_copy(update={"status": StepStatus.COMPLETED})],
            metadata={"agui_usage": [1]},
        )
    assert counts.total() == 2
    assert counts["commit_run"] == 2
    assert run.status is RunStatus.ACTIVE
    assert ended.status is RunStatus.COMPLETE
    assert ended.metadata == {"agui_usage": [1]}
    assert ended.lease_expires_at is None
    page = await store.list_messages(chat.chat_id)
    assert [(m.agui_id, m.content) for m in page.items] == [("m1", "hi"), ("a1", "hello")]
    (saved,) = await store.get_steps(chat.chat_id, "r1")
    assert saved.status is StepStatus.COMPLETED
    assert saved.seq is not None


async def test_begin_run_refuses_a_run_of_another_owner_and_writes_nothing(store):
    chat = await store.create_chat("u", "t")
    await store.begin_run(chat.chat_id, "r1", owner="w1")
    with pytest.raises(Conflict):
        await store.begin_run(
            chat.chat_id, "r1", owner="w2", messages=[Message(role=Role.USER, content="x")]
        )
    assert (await store.list_messages(chat.chat_id)).items == []
    again = await store.begin_run(chat.chat_id, "r1", owner="w1")
    assert again.status is RunStatus.ACTIVE


async def test_end_run_needs_the_lease_holder(store):
    clock = ManualClock()
    async with open_store("memory://", clock=clock) as timed:
        chat = await timed.create_chat("u", "t")
        await timed.begin_run(chat.chat_id, "r1", owner="w1", lease_seconds=5)
        clock.advance(seconds=10)
        (swept,) = await timed.sweep_expired_runs()
        assert swept.status is RunStatus.INTERRUPTED
        message = Message(role=Role.ASSISTANT, content="late")
        with pytest.raises(Conflict):
            await timed.end_run(
                chat.chat_id, "r1", owner="w1", status=RunStatus.COMPLETE, messages=[message]
            )
        assert (await timed.list_messages(chat.chat_id)).items == []


async def test_end_run_is_all_or_nothing_on_an_idempotency_conflict(store):
    chat = await store.create_chat("u", "t")
    await store.append_message(chat.chat_id, Message(role=Role.USER, content="a", agui_id="x"))
    await store.begin_run(chat.chat_id, "r1", owner="w1")
    clash = Message(role=Role.ASSISTANT, content="b", agui_id="x")
    fresh = Message(role=Role.ASSISTANT, content="c", agui_id="y")
    with pytest.raises(IdempotencyConflict):
        await store.end_run(
            chat.chat_id, "r1", owner="w1", status=RunStatus.COMPLETE, messages=[fresh, clash]
        )
    assert (await store.get_run(chat.chat_id, "r1")).status is RunStatus.ACTIVE
    assert await store.get_message_by_agui_id(chat.chat_id, "y") is None


async def test_end_run_argument_checks(store):
    chat = await store.create_chat("u", "t")
    other = await store.create_chat("u", "t2")
    await store.begin_run(chat.chat_id, "r1", owner="w1")
    with pytest.raises(InvalidArgument):
        await store.end_run(chat.chat_id, "r1", owner="w1", status=RunStatus.ACTIVE)
    foreign = Step(chat_id=other.chat_id, run_id="r1", stack_id="s", type="llm")
    with pytest.raises(InvalidArgument):
        await store.end_run(
            chat.chat_id, "r1", owner="w1", status=RunStatus.COMPLETE, steps=[foreign]
        )


async def test_default_commit_run_composes_the_primitives(store):
    """The SPI default (for drivers that do not override it) gives the same result."""
    from threadkeep.driver import Primitives

    chat = await store.create_chat("u", "t")
    default = Primitives.commit_run
    store.primitives.commit_run = lambda *a, **k: default(store.primitives, *a, **k)
    await store.begin_run(
        chat.chat_id, "r1", owner="w1", messages=[Message(role=Role.USER, content="q")]
    )
    with pytest.raises(Conflict):
        await store.begin_run(chat.chat_id, "r1", owner="w2")
    ended = await store.end_run(
        chat.chat_id,
        "r1",
        owner="w1",
        status=RunStatus.ERRORED,
        error="boom",
        messages=[Message(role=Role.ASSISTANT, content="partial")],
    )
    assert (ended.status, ended.error) == (RunStatus.ERRORED, "boom")
    contents = [m.content for m in (await store.list_messages(chat.chat_id)).items]
    assert contents == ["q", "partial"]
