"""``Store.run_context`` and ``end_run(current=)``: a run's reads, fewer round trips, same answers.

On every backend ``run_context`` must give exactly ``context_messages`` plus one
``get_message_by_agui_id`` per id (the SQL driver answers it in one statement or one thread
hop, the others with the core default), and ``end_run`` given a copy of the run that is no
longer current must read the run and write the same as without it.
"""

from __future__ import annotations

import pytest

from threadkeep import ChatNotFound, Conflict, Message, Role, RunStatus, Step, Store


async def _expected(store: Store, chat_id, ids):
    context = await store.context_messages(chat_id)
    held = {}
    for agui_id in ids:
        found = await store.get_message_by_agui_id(chat_id, agui_id)
        if found is not None:
            held[agui_id] = found
    return context, held


def _user(n: int) -> Message:
    return Message(role=Role.USER, content=f"m{n}", agui_id=f"m{n}")


async def test_run_context_is_context_messages_and_the_lookups(any_store: Store) -> None:
    store = any_store
    chat = await store.create_chat("u", "t-context")
    ids = ["m0", "m3", "m250", "nowhere"]
    assert await store.run_context(chat.chat_id, agui_ids=ids) == ([], {})
    # More than one read's batch (200), so the window continues past the first read.
    await store.append_messages(chat.chat_id, [_user(n) for n in range(260)])
    assert await store.run_context(chat.chat_id, agui_ids=ids) == await _expected(
        store, chat.chat_id, ids
    )
    await store.start_over(chat.chat_id)
    await store.append_messages(chat.chat_id, [_user(n) for n in range(300, 305)])
    got = await store.run_context(chat.chat_id, agui_ids=[*ids, "m301"])
    assert got == await _expected(store, chat.chat_id, [*ids, "m301"])
    assert [m.agui_id for m in got[0]] == [f"m{n}" for n in range(300, 305)]
    assert set(got[1]) == {"m0", "m3", "m250", "m301"}  # held before the cut too
    newest = (await store.list_messages(chat.chat_id, limit=1)).items[-1]
    assert newest.seq is not None
    await store.compact(chat.chat_id, "summary", newest.seq - 2)
    assert await store.run_context(chat.chat_id, agui_ids=ids) == await _expected(
        store, chat.chat_id, ids
    )


async def test_run_context_of_a_missing_chat_raises(any_store: Store) -> None:
    chat = await any_store.create_chat("u", "t-gone")
    await any_store.delete_chat(chat.chat_id)
    with pytest.raises(ChatNotFound):
        await any_store.run_context(chat.chat_id, agui_ids=["m1"])
    with pytest.raises(ChatNotFound):
        await any_store.context_messages(chat.chat_id)


async def test_end_run_with_a_stale_copy_reads_the_run(any_store: Store) -> None:
    store = any_store
    chat = await store.create_chat("u", "t-stale")
    begun = await store.begin_run(chat.chat_id, "r1", owner="w", messages=[_user(1)])
    beat = await store.heartbeat_run(chat.chat_id, "r1", owner="w")
    assert beat.revision > begun.revision
    other = await store.begin_run(chat.chat_id, "r2", owner="w")
    step = Step(chat_id=chat.chat_id, run_id="r1", stack_id="s", type="input")
    answer = Message(role=Role.ASSISTANT, content="a", agui_id="a1", run_id="r1")
    ended = await store.end_run(
        chat.chat_id,
        "r1",
        owner="w",
        status=RunStatus.COMPLETE,
        messages=[answer],
        steps=[step],
        metadata={"k": 1},
        current=begun,  # stale: the heartbeat came after it
    )
    assert ended.status is RunStatus.COMPLETE
    assert ended.revision == beat.revision + 1
    assert ended.metadata == {"k": 1}
    assert (await store.get_run(chat.chat_id, "r1")) == ended
    [saved] = await store.get_steps(chat.chat_id, "r1")
    assert saved.step_id == step.step_id
    assert saved.seq is not None
    stored = await store.get_message_by_agui_id(chat.chat_id, "a1")
    assert stored is not None
    assert stored.content == "a"
    # A copy of another run is ignored; the ended run is still refused.
    with pytest.raises(Conflict):
        await store.end_run(chat.chat_id, "r1", owner="w", status=RunStatus.COMPLETE, current=other)
    ended2 = await store.end_run(
        chat.chat_id, "r2", owner="w", status=RunStatus.ERRORED, current=other
    )
    assert ended2.revision == other.revision + 1


async def test_begin_run_again_renews_and_another_owner_is_refused(any_store: Store) -> None:
    store = any_store
    chat = await store.create_chat("u", "t-renew")
    first = await store.begin_run(chat.chat_id, "r1", owner="w", messages=[_user(1)])
    again = await store.begin_run(chat.chat_id, "r1", owner="w", messages=[_user(1)])
    assert again.revision == first.revision + 1
    assert len((await store.list_messages(chat.chat_id)).items) == 1
    with pytest.raises(Conflict):
        await store.begin_run(chat.chat_id, "r1", owner="someone else")
