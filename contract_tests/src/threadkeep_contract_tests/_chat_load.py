"""Bulk load of whole chats (``Store.load_chats``, ``Store.find_chats``).

What the one-chat calls would store, a batch at a time, all of a batch or none of it.
"""

from __future__ import annotations

from typing import ClassVar
from uuid import uuid4

import pytest

from threadkeep import (
    ChatLoad,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    InvalidContent,
    Message,
    Run,
    RunStatus,
    Step,
    StepStatus,
    Store,
    ToolCall,
)

from ._base import ContractBase, require_capability

__all__ = ["ChatLoadTests"]

USER = "u-chat-load"


def _messages(prefix: str, count: int) -> list[Message]:
    return [
        Message(
            role="assistant" if n % 2 else "user",
            agui_id=f"{prefix}-{n}",
            content=f"{prefix} message {n} \x00 é",
            tool_calls=[ToolCall(agui_id=f"{prefix}-call-{n}", name="f", arguments="{}")]
            if n == 1
            else [],
        )
        for n in range(count)
    ]


class ChatLoadTests(ContractBase):
    """``load_chats`` writes new chats whole or skips them whole; ``find_chats`` finds them."""

    contract_area: ClassVar[str] = "Bulk load"

    @pytest.mark.asyncio
    async def test_load_chats_stores_chats_with_their_messages(self, store: Store) -> None:
        """Each chat gets its messages at seqs 1, 2, ...; the counters let appends go on."""
        items = [
            ChatLoad(
                user_id=USER, thread_id=f"t-{n}", name=f"chat {n}", messages=_messages(f"c{n}", 3)
            )
            for n in range(3)
        ]
        results = await store.load_chats(items)
        assert [(r.created, r.messages, r.present, r.tool_calls) for r in results] == [
            (True, 3, 0, 1)
        ] * 3
        found = await store.find_chats(USER, ["t-0", "t-1", "t-2", "t-missing"])
        assert sorted(found) == ["t-0", "t-1", "t-2"]
        for n, item in enumerate(items):
            chat = found[f"t-{n}"]
            assert (chat.chat_id, chat.name) == (item.chat_id, f"chat {n}")
            assert chat.last_message_at is not None
            rows = await self.raw_messages(store, item.chat_id)
            assert [(r.seq, r.agui_id) for r in rows] == [
                (1, f"c{n}-0"),
                (2, f"c{n}-1"),
                (3, f"c{n}-2"),
            ]
            held = await store.get_tool_call_by_agui_id(item.chat_id, f"c{n}-call-1")
            assert held is not None
            after = await store.append_message(item.chat_id, Message(role="user", content="next"))
            assert after.seq == 4

    @pytest.mark.asyncio
    async def test_a_repeated_id_is_stored_once_another_payload_refuses_the_batch(
        self, store: Store
    ) -> None:
        """Within a chat, a repeat of an ``agui_id`` is present; another payload writes nothing."""
        same = [*_messages("s", 2), _messages("s", 1)[0]]
        (result,) = await store.load_chats(
            [ChatLoad(user_id=USER, thread_id="t-same", messages=same)]
        )
        assert (result.messages, result.present) == (2, 1)
        clash = [*_messages("x", 1), Message(role="user", agui_id="x-0", content="other")]
        good = ChatLoad(user_id=USER, thread_id="t-good", messages=_messages("g", 2))
        bad = ChatLoad(user_id=USER, thread_id="t-clash", messages=clash)
        with pytest.raises(IdempotencyConflict):
            await store.load_chats([good, bad])
        assert await store.find_chats(USER, ["t-good", "t-clash"]) == {}

    @pytest.mark.asyncio
    async def test_a_bad_record_anywhere_writes_nothing(self, store: Store) -> None:
        """Content the store refuses, in the last chat, refuses the whole batch first."""
        bad = Message(role="user", content="a \ud800 b")
        items = [
            ChatLoad(user_id=USER, thread_id="t-a", messages=_messages("a", 2)),
            ChatLoad(user_id=USER, thread_id="t-b", messages=[bad]),
        ]
        with pytest.raises(InvalidContent):
            await store.load_chats(items)
        assert await store.find_chats(USER, ["t-a", "t-b"]) == {}
        twice = [ChatLoad(user_id=USER, thread_id="t-a"), ChatLoad(user_id=USER, thread_id="t-a")]
        with pytest.raises(InvalidArgument):
            await store.load_chats(twice)
        assert await store.find_chats(USER, ["t-a"]) == {}

    @pytest.mark.asyncio
    async def test_a_bad_proof_writes_nothing(self, store: Store) -> None:
        """A proof the store refuses is refused before anything is written (all drivers)."""
        items = [
            ChatLoad(user_id=USER, thread_id="t-p1", messages=_messages("p1", 2)),
            ChatLoad(user_id=USER, thread_id="t-p2", proof={"digest": float("nan")}),
        ]
        with pytest.raises(InvalidContent):
            await store.load_chats(items)
        assert await store.find_chats(USER, ["t-p1", "t-p2"]) == {}

    @pytest.mark.asyncio
    async def test_two_items_with_one_chat_id_write_nothing(self, store: Store) -> None:
        """Two items naming one ``chat_id`` are refused whole, before anything is written."""
        chat_id = uuid4()
        items = [
            ChatLoad(user_id=USER, thread_id="t-i1", chat_id=chat_id, messages=_messages("i1", 1)),
            ChatLoad(user_id=USER, thread_id="t-i2", chat_id=chat_id, messages=_messages("i2", 1)),
        ]
        with pytest.raises(InvalidArgument):
            await store.load_chats(items)
        assert await store.find_chats(USER, ["t-i1", "t-i2"]) == {}

    @pytest.mark.asyncio
    async def test_one_message_in_two_chats_writes_nothing(self, store: Store) -> None:
        """One ``Message`` (one ``message_id``) in two items is refused before any write."""
        shared = _messages("m1", 1)
        items = [
            ChatLoad(user_id=USER, thread_id="t-m1", messages=shared),
            ChatLoad(user_id=USER, thread_id="t-m2", messages=shared),
        ]
        with pytest.raises(InvalidArgument, match="message_id"):
            await store.load_chats(items)
        assert await store.find_chats(USER, ["t-m1", "t-m2"]) == {}

    @pytest.mark.asyncio
    async def test_a_chat_id_another_chat_has_is_a_conflict(self, store: Store) -> None:
        """An item naming the ``chat_id`` of a stored chat (another key) leaves that chat be."""
        held = await store.create_chat(USER, "t-owner")
        item = ChatLoad(
            user_id=USER, thread_id="t-thief", chat_id=held.chat_id, messages=_messages("x", 1)
        )
        with pytest.raises(Conflict):
            await store.load_chats([item])
        chat = await store.get_chat(held.chat_id)
        assert (chat.thread_id, chat.metadata) == ("t-owner", {})
        assert await self.raw_messages(store, held.chat_id) == []
        assert await store.find_chats(USER, ["t-thief"]) == {}

    @pytest.mark.asyncio
    async def test_a_chat_whose_key_is_held_is_skipped_whole(self, store: Store) -> None:
        """A live chat holding the key is left as it is; the other chats are written."""
        held = await store.create_chat(USER, "t-held")
        items = [
            ChatLoad(user_id=USER, thread_id="t-held", messages=_messages("h", 2), proof={"p": 1}),
            ChatLoad(user_id=USER, thread_id="t-free", messages=_messages("f", 2), proof={"p": 2}),
        ]
        results = await store.load_chats(items)
        assert [r.created for r in results] == [False, True]
        assert await self.raw_messages(store, held.chat_id) == []
        found = await store.find_chats(USER, ["t-held", "t-free"])
        assert found["t-held"].chat_id == held.chat_id
        assert found["t-held"].metadata == {}
        assert found["t-free"].metadata == {"p": 2}

    @pytest.mark.asyncio
    async def test_find_chats_is_find_chat_for_many_ids(self, store: Store) -> None:
        """Other users' and deleted chats are not found; repeats and no ids are fine."""
        mine = await store.create_chat(USER, "t-mine")
        await store.create_chat("someone-else", "t-theirs")
        gone = await store.create_chat(USER, "t-gone")
        await store.delete_chat(gone.chat_id)
        tenant = await store.create_chat(USER, "t-mine", tenant_id="acme")
        found = await store.find_chats(USER, ["t-mine", "t-mine", "t-theirs", "t-gone"])
        assert {k: c.chat_id for k, c in found.items()} == {"t-mine": mine.chat_id}
        in_tenant = await store.find_chats(USER, ["t-mine"], tenant_id="acme")
        assert in_tenant["t-mine"].chat_id == tenant.chat_id
        assert await store.find_chats(USER, []) == {}
        many = [f"t-none-{n}" for n in range(1500)] + ["t-mine"]
        assert list(await store.find_chats(USER, many)) == ["t-mine"]

    @pytest.mark.asyncio
    async def test_load_chats_stores_runs_and_steps(self, store: Store) -> None:
        """Runs are stored as given; steps get increasing seqs as ``save_steps`` gives them."""
        require_capability(store.capabilities, "steps")
        chat_id = uuid4()
        run = Run(chat_id=chat_id, run_id="r-1", status=RunStatus.COMPLETE, owner="o", revision=1)
        steps = [
            Step(
                chat_id=chat_id, run_id="r-1", stack_id="s", type=kind, status=StepStatus.COMPLETED
            )
            for kind in ("input", "llm")
        ]
        messages = [m.model_copy(update={"run_id": "r-1"}) for m in _messages("r", 2)]
        item = ChatLoad(
            user_id=USER,
            thread_id="t-run",
            chat_id=chat_id,
            messages=messages,
            runs=[run],
            steps=steps,
        )
        (result,) = await store.load_chats([item])
        assert result.created
        stored = await store.get_run(chat_id, "r-1")
        assert (stored.status, stored.owner, stored.revision) == (RunStatus.COMPLETE, "o", 1)
        saved = await store.get_steps(chat_id, "r-1")
        assert [(s.step_id, s.type) for s in saved] == [
            (steps[0].step_id, "input"),
            (steps[1].step_id, "llm"),
        ]
        assert saved[0].seq is not None
        assert saved[1].seq is not None
        assert saved[0].seq < saved[1].seq
        other = Run(chat_id=uuid4(), run_id="r-2")
        with pytest.raises(InvalidArgument):
            await store.load_chats([ChatLoad(user_id=USER, thread_id="t-other", runs=[other])])
