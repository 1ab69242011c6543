"""The store's copy API: whole records in, ids and timestamps kept, idempotent by id."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from threadkeep import ChatNotFound, Conflict, InvalidArgument, Message, Run, open_store

OLD = datetime(2020, 5, 1, 12, 0, tzinfo=UTC)


async def test_copy_keeps_ids_seqs_and_timestamps_and_is_idempotent():
    async with (
        open_store(f"memory://copy-src-{uuid4().hex}", clock=lambda: OLD) as source,
        open_store(f"memory://copy-dst-{uuid4().hex}") as target,
    ):
        chat = await source.create_chat("u", "t", name="n")
        await source.append_messages(
            chat.chat_id, [Message(role="user", content=str(i)) for i in range(5)]
        )
        await source.start_run(chat.chat_id, "r", owner="w")
        messages = await source.scan_messages(chat.chat_id, after_seq=2, limit=2)
        assert [m.content for m in messages] == ["2", "3"]
        everything = await source.scan_messages(chat.chat_id)

        assert await target.copy_chat(chat) is True
        assert await target.copy_chat(chat) is False
        assert await target.copy_messages(chat.chat_id, everything) == 5
        assert await target.copy_messages(chat.chat_id, everything) == 0
        run = await source.get_run(chat.chat_id, "r")
        assert await target.copy_run(run) is True
        assert await target.copy_run(run) is False

        copied = await target.get_chat(chat.chat_id)
        assert (copied.created_at, copied.name) == (OLD, "n")
        page = await target.list_messages(chat.chat_id)
        assert [(m.message_id, m.seq, m.created_at) for m in page.items] == [
            (m.message_id, m.seq, m.created_at) for m in everything
        ]
        assert (await target.get_run(chat.chat_id, "r")).owner == "w"
        # A later append continues after the copied seqs.
        later = await target.append_message(chat.chat_id, Message(role="user", content="x"))
        assert later.seq is not None
        assert later.seq > everything[-1].seq


async def test_copy_refuses_bad_input_and_a_held_key():
    async with (
        open_store(f"memory://copy-a-{uuid4().hex}") as source,
        open_store(f"memory://copy-b-{uuid4().hex}") as target,
    ):
        chat = await source.create_chat("u", "t")
        await target.create_chat("u", "t")  # another chat holds the key there
        with pytest.raises(Conflict):
            await target.copy_chat(chat)
        for bad in ({"after_seq": -1}, {"limit": 0}, {"limit": 10_000}, {"after_seq": True}):
            with pytest.raises(InvalidArgument):
                await source.scan_messages(chat.chat_id, **bad)
        with pytest.raises(InvalidArgument):
            await target.copy_chat({"chat_id": "x"})  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await target.copy_messages(chat.chat_id, [Message(role="user")])  # no seq
        with pytest.raises(InvalidArgument):
            await target.copy_run("r")  # type: ignore[arg-type]
        with pytest.raises(ChatNotFound, match="copy_chat it first"):
            await target.copy_run(Run(chat_id=uuid4(), run_id="r"))
