"""Damaged documents (issue 12, item 1): a document stripped of a field.

A document stripped of a field raises ``CorruptRecord`` naming the field, never a raw
``KeyError``. Damaged step and run bodies (naming their chat, the sweeper going on past a
damaged run) are contract tests now: ``DamagedRecordTests`` in threadkeep-contract-tests,
run by ``test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from threadkeep import CorruptRecord, Message, Step
from threadkeep_mongodb import MongoStore


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
