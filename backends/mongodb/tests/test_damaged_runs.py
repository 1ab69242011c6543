"""Damaged documents (issue 12, item 1).

A step or run document changed outside threadkeep raises ``CorruptRecord`` naming its chat
(the document's ``chat_id``, not the damaged body's); one damaged run never stops the
sweeper from interrupting the other expired runs of the store; a document stripped of a
field raises ``CorruptRecord`` naming the field, never a raw ``KeyError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from threadkeep import CorruptRecord, Message, RunStatus, Step
from threadkeep_mongodb import MongoStore

DAMAGED_BODIES: list[Any] = ["not json {", "[1, 2]", '{"status": 5}', 42]


@pytest.mark.parametrize("body", DAMAGED_BODIES)
async def test_damaged_step_and_run_name_their_chat(store: MongoStore, body: Any) -> None:
    chat = await store.create_chat("u-damaged", "t-runs")
    steps = await store.save_steps(
        [Step(chat_id=chat.chat_id, stack_id="s1", type="tool", run_id="r1") for _ in range(3)]
    )
    await store.start_run(chat.chat_id, "r1", owner="w")
    await store.driver._cols.steps.update_one({"_id": steps[1].step_id}, {"$set": {"body": body}})
    await store.driver._cols.runs.update_one({"run_id": "r1"}, {"$set": {"body": body}})
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
        assert caught.value.column == "body", name


async def test_a_damaged_run_does_not_stop_the_sweeper(store: MongoStore) -> None:
    damaged = await store.create_chat("u-damaged", "t-bad-run")
    healthy = await store.create_chat("u-damaged", "t-good-run")
    await store.start_run(damaged.chat_id, "r-bad", owner="w", lease_seconds=0.01)
    await asyncio.sleep(0.02)  # the damaged run expires first: it heads the sweep's order
    await store.start_run(healthy.chat_id, "r-good", owner="w", lease_seconds=0.01)
    await store.driver._cols.runs.update_one({"run_id": "r-bad"}, {"$set": {"body": "not json {"}})
    await asyncio.sleep(0.05)
    swept = await store.sweep_expired_runs()
    assert [(r.chat_id, r.run_id) for r in swept] == [(healthy.chat_id, "r-good")]
    good = await store.get_run(healthy.chat_id, "r-good")
    assert good is not None
    assert good.status is RunStatus.INTERRUPTED
    with pytest.raises(CorruptRecord):  # still reported to whoever reads it
        await store.get_run(damaged.chat_id, "r-bad")


@pytest.mark.parametrize("missing", ["body", "seq", "revision", "chat_id"])
async def test_documents_missing_a_field_raise_corrupt_record(
    store: MongoStore, missing: str
) -> None:
    """A document with a field removed is damaged too: never a raw ``KeyError``, never a
    record rebuilt without it (a message without its ``seq``)."""
    chat = await store.create_chat("u-damaged", f"t-missing-{missing}")
    stored = await store.append_messages(
        chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(3)]
    )
    steps = await store.save_steps([Step(chat_id=chat.chat_id, stack_id="s", type="tool")])
    await store.start_run(chat.chat_id, "r1", owner="w")
    unset = {"$unset": {missing: ""}}
    await store.driver._cols.messages.update_one({"_id": stored[1].message_id}, unset)
    reads: dict[str, Callable[[], Awaitable[object]]] = {
        "get_message": lambda: store.get_message(stored[1].message_id),
    }
    if missing in ("body", "revision"):  # list reads select by chat and seq
        reads["list_messages"] = lambda: store.list_messages(chat.chat_id)
    if missing != "revision":  # steps have no revision
        await store.driver._cols.steps.update_one({"_id": steps[0].step_id}, unset)
        reads["get_step"] = lambda: store.get_step(steps[0].step_id)
    if missing in ("body", "revision"):  # runs have no seq; get_run selects by chat_id
        await store.driver._cols.runs.update_one({"run_id": "r1"}, unset)
        reads["get_run"] = lambda: store.get_run(chat.chat_id, "r1")
    for name, read in reads.items():
        with pytest.raises(CorruptRecord) as caught:
            await read()
        assert caught.value.column == missing, name
    if missing == "body":
        await store.driver._cols.chats.update_one({"_id": chat.chat_id}, unset)
        with pytest.raises(CorruptRecord) as chat_error:
            await store.get_chat(chat.chat_id)
        assert chat_error.value.column == "body"
