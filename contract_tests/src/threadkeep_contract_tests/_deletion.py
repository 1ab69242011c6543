"""Deletion and tenancy: soft delete hides everywhere; tenants never mix."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar
from uuid import UUID

import pytest

from threadkeep import (
    Chat,
    ChatFilter,
    ChatNotFound,
    ChatStatus,
    Conflict,
    Message,
    MessageNotFound,
    Reasoning,
    Share,
    Store,
    ToolCall,
    Viewer,
)

from ._base import ContractBase
from ._helpers import walk_chats, walk_messages

__all__ = ["DeletionTests"]


async def _chat_with_everything(store: Store, user: str, thread: str) -> tuple[Chat, Message]:
    chat = await store.create_chat(user, thread, tenant_id="tenant-a", name="doomed")
    message = await store.append_message(
        chat.chat_id,
        Message(
            role="assistant",
            agui_id="msg-1",
            content="secret",
            tool_calls=[ToolCall(agui_id="call-1", name="f", arguments="{}")],
            reasonings=[Reasoning(agui_id="think-1", content="hmm")],
        ),
    )
    return chat, message


class DeletionTests(ContractBase):
    """Soft delete, restore, recreate, hidden messages, purge, erase, tenant filters."""

    contract_area: ClassVar[str] = "Deletion & tenancy"

    async def _assert_hidden(self, store: Store, chat: Chat, message: Message) -> None:
        with pytest.raises(ChatNotFound):
            await store.get_chat(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await store.list_messages(chat.chat_id)
        with pytest.raises(MessageNotFound):
            await store.get_message(message.message_id)
        with pytest.raises(MessageNotFound):
            await store.get_tool_call(message.tool_calls[0].tool_call_id)
        with pytest.raises(MessageNotFound):
            await store.get_reasoning(message.reasonings[0].reasoning_id)
        assert await store.get_message_by_agui_id(chat.chat_id, "msg-1") is None
        assert await store.get_tool_call_by_agui_id(chat.chat_id, "call-1") is None
        assert await store.get_reasoning_by_agui_id(chat.chat_id, "think-1") is None
        assert chat.chat_id not in await store.get_last_messages([chat.chat_id])
        assert await store.find_chat(chat.user_id, chat.thread_id, tenant_id=chat.tenant_id) is None
        for chat_filter in (
            None,
            ChatFilter(user_id=chat.user_id),
            ChatFilter(tenant_id="tenant-a"),
        ):
            listed = await walk_chats(store, chat_filter, limit=50)
            assert chat.chat_id not in {c.chat_id for c in listed}, (
                f"deleted chat listed by {chat_filter}"
            )
        with pytest.raises(ChatNotFound):
            await store.append_message(chat.chat_id, Message(role="user", content="late"))

    @pytest.mark.asyncio
    async def test_soft_delete_hides_from_every_read_path(self, store: Store) -> None:
        """A deleted chat is hidden from get, list, message/tool-call lookups and previews."""
        chat, message = await _chat_with_everything(store, "u-del", "t-hide")
        deleted = await store.delete_chat(chat.chat_id)
        assert deleted.deleted_at is not None
        await self._assert_hidden(store, chat, message)
        raw = {c.chat_id: c for c in await self.raw_chats(store)}
        assert raw[chat.chat_id].deleted, "delete must be soft: the chat stays stored, marked"
        assert [r.message_id for r in await self.raw_messages(store, chat.chat_id)] == [
            message.message_id
        ]
        with pytest.raises(ChatNotFound):
            await store.delete_chat(chat.chat_id)

    @pytest.mark.asyncio
    async def test_restore_brings_everything_back(self, store: Store) -> None:
        """``restore_chat`` makes the chat and its messages readable again, unchanged."""
        chat, message = await _chat_with_everything(store, "u-del", "t-restore")
        await store.delete_chat(chat.chat_id)
        restored = await store.restore_chat(chat.chat_id)
        assert restored.deleted_at is None
        assert (await store.get_chat(chat.chat_id)).chat_id == chat.chat_id
        assert (await store.get_message(message.message_id)).content == "secret"
        assert await store.get_tool_call_by_agui_id(chat.chat_id, "call-1") is not None
        assert (await store.get_last_messages([chat.chat_id]))[
            chat.chat_id
        ].message_id == message.message_id
        listed = await walk_chats(store, ChatFilter(user_id="u-del"), limit=10)
        assert chat.chat_id in {c.chat_id for c in listed}
        again = await store.create_chat("u-del", "t-restore", tenant_id="tenant-a")
        assert again.chat_id == chat.chat_id
        assert not {c.chat_id: c for c in await self.raw_chats(store)}[chat.chat_id].deleted

    @pytest.mark.asyncio
    async def test_same_key_after_delete_creates_new_chat(self, store: Store) -> None:
        """After delete, the same key creates a new chat; restoring the old one then conflicts."""
        old, _ = await _chat_with_everything(store, "u-del", "t-recreate")
        await store.delete_chat(old.chat_id)
        new = await store.create_chat("u-del", "t-recreate", tenant_id="tenant-a")
        assert new.chat_id != old.chat_id
        assert (await store.list_messages(new.chat_id)).items == []
        with pytest.raises(Conflict):
            await store.restore_chat(old.chat_id)
        with pytest.raises(ChatNotFound):
            await store.get_chat(old.chat_id)
        found = await store.find_chat("u-del", "t-recreate", tenant_id="tenant-a")
        assert found is not None
        assert found.chat_id == new.chat_id
        raw = [c for c in await self.raw_chats(store) if c.thread_id == "t-recreate"]
        assert sorted(c.deleted for c in raw) == [False, True]

    @pytest.mark.asyncio
    async def test_hidden_messages_disappear_from_reads(self, store: Store) -> None:
        """``delete_messages`` hides single messages from pages, lookups and previews."""
        chat = await store.create_chat("u-del", "t-messages")
        stored = await store.append_messages(
            chat.chat_id,
            [Message(role="user", agui_id=f"a{i}", content=f"c{i}") for i in range(5)],
        )
        hidden_ids = [stored[1].message_id, stored[4].message_id]
        assert await store.delete_messages(chat.chat_id, [*hidden_ids, UUID(int=0)]) == 2
        assert await store.delete_messages(chat.chat_id, hidden_ids) == 0
        walk = await walk_messages(store, chat.chat_id, limit=2)
        assert [m.content for m in walk.items] == ["c0", "c2", "c3"]
        with pytest.raises(MessageNotFound):
            await store.get_message(stored[1].message_id)
        assert await store.get_message_by_agui_id(chat.chat_id, "a4") is None
        preview = await store.get_last_messages([chat.chat_id])
        assert preview[chat.chat_id].content == "c3"
        rows = {r.message_id: r.hidden for r in await self.raw_messages(store, chat.chat_id)}
        assert rows == {m.message_id: m.message_id in hidden_ids for m in stored}

    @pytest.mark.asyncio
    async def test_purge_removes_deleted_chats_for_good(self, store: Store) -> None:
        """``purge`` removes chats deleted before the cutoff, and nothing else."""
        doomed, _ = await _chat_with_everything(store, "u-purge", "t-1")
        kept_deleted, _ = await _chat_with_everything(store, "u-purge", "t-2")
        live, _ = await _chat_with_everything(store, "u-purge", "t-3")
        stamp = (await store.delete_chat(doomed.chat_id)).deleted_at
        assert stamp is not None
        removed = await store.purge(stamp + timedelta(microseconds=1))
        assert removed == 1
        await store.delete_chat(kept_deleted.chat_id)
        assert await store.purge(stamp - timedelta(days=1)) == 0
        raw = {c.chat_id for c in await self.raw_chats(store)}
        assert doomed.chat_id not in raw
        assert {kept_deleted.chat_id, live.chat_id} <= raw
        assert await self.raw_messages(store, doomed.chat_id) == []
        with pytest.raises(ChatNotFound):
            await store.restore_chat(doomed.chat_id)

    @pytest.mark.asyncio
    async def test_erase_user_removes_everything_of_one_person(self, store: Store) -> None:
        """``erase_user`` removes a person's live and deleted chats and messages, with counts."""
        one, _ = await _chat_with_everything(store, "u-erase", "t-1")
        two, _ = await _chat_with_everything(store, "u-erase", "t-2")
        other, _ = await _chat_with_everything(store, "u-keep", "t-1")
        await store.delete_chat(two.chat_id)
        receipt = await store.erase_user("u-erase")
        assert receipt.stores["hot"]["chats"] == 2
        assert receipt.stores["hot"]["messages"] == 2
        raw = {c.chat_id for c in await self.raw_chats(store)}
        assert raw.isdisjoint({one.chat_id, two.chat_id})
        assert other.chat_id in raw
        assert await self.raw_messages(store, one.chat_id) == []
        assert (await store.get_chat(other.chat_id)).user_id == "u-keep"

    @pytest.mark.asyncio
    async def test_filters_never_cross_tenants(self, store: Store) -> None:
        """Filters (user, team, agent, channel, status, viewer) never cross tenants."""
        for tenant in ("tenant-a", "tenant-b"):
            for index in range(3):
                await store.create_chat(
                    "u-shared-name",
                    f"{tenant}-t{index}",
                    tenant_id=tenant,
                    team_id="team-1",
                    agent_id="agent-1",
                    channel="web",
                    share=Share.TEAM,
                    name=f"{tenant} chat",
                )
        filters = [
            ChatFilter(tenant_id="tenant-a"),
            ChatFilter(tenant_id="tenant-a", user_id="u-shared-name"),
            ChatFilter(tenant_id="tenant-a", team_id="team-1"),
            ChatFilter(tenant_id="tenant-a", agent_id="agent-1", channel="web"),
            ChatFilter(tenant_id="tenant-a", status=ChatStatus.ACTIVE, keyword="chat"),
            ChatFilter(
                visible_to=Viewer(user_id="u-teammate", team_id="team-1", tenant_id="tenant-a")
            ),
            ChatFilter(visible_to=Viewer(user_id="u-shared-name", tenant_id="tenant-a")),
        ]
        for chat_filter in filters:
            chats = await walk_chats(store, chat_filter, limit=2)
            assert len(chats) == 3, f"{chat_filter} returned {len(chats)} chats"
            assert {c.tenant_id for c in chats} == {"tenant-a"}, f"{chat_filter} crossed tenants"
        both = await walk_chats(store, ChatFilter(user_id="u-shared-name"), limit=4)
        assert len(both) == 6
        assert await walk_chats(store, ChatFilter(status=ChatStatus.ARCHIVED), limit=5) == []

    @pytest.mark.asyncio
    async def test_viewer_sees_own_and_team_shared_chats_only(self, store: Store) -> None:
        """A chat is visible to its owner, to its team when shared, and to nobody else."""
        private = await store.create_chat("u-owner", "t-private", tenant_id="t1", team_id="team")
        shared = await store.create_chat(
            "u-owner", "t-shared", tenant_id="t1", team_id="team", share=Share.TEAM
        )
        owner = Viewer(user_id="u-owner", tenant_id="t1")
        mate = Viewer(user_id="u-mate", team_id="team", tenant_id="t1")
        stranger = Viewer(user_id="u-stranger", team_id="other", tenant_id="t1")
        foreign_mate = Viewer(user_id="u-mate", team_id="team", tenant_id="t2")
        assert (await store.get_chat(private.chat_id, viewer=owner)).chat_id == private.chat_id
        assert (await store.get_chat(shared.chat_id, viewer=mate)).chat_id == shared.chat_id
        for viewer, chat in ((mate, private), (stranger, shared), (foreign_mate, shared)):
            with pytest.raises(ChatNotFound):
                await store.get_chat(chat.chat_id, viewer=viewer)
            with pytest.raises(ChatNotFound):
                await store.list_messages(chat.chat_id, viewer=viewer)
        visible = await walk_chats(store, ChatFilter(visible_to=mate), limit=5)
        assert [c.chat_id for c in visible] == [shared.chat_id]

    @pytest.mark.asyncio
    async def test_tenant_none_is_a_tenant_of_its_own(self, store: Store) -> None:
        """A viewer without a tenant sees no tenant's chats, and a tenant's viewer no others.

        ``None`` is a tenant of its own: ``visible_to``, ``get_chat(viewer=)`` and
        ``list_messages(viewer=)`` match ``chat.tenant_id == viewer.tenant_id`` exactly.
        """
        in_t1 = await store.create_chat(
            "u-ten", "t-in-t1", tenant_id="t1", team_id="team", share=Share.TEAM
        )
        untenanted = await store.create_chat("u-ten", "t-none", team_id="team", share=Share.TEAM)
        for viewer, sees, hidden in (
            (Viewer(user_id="u-ten"), untenanted, in_t1),
            (Viewer(user_id="u-mate", team_id="team"), untenanted, in_t1),
            (Viewer(user_id="u-ten", tenant_id="t1"), in_t1, untenanted),
            (Viewer(user_id="u-mate", team_id="team", tenant_id="t1"), in_t1, untenanted),
        ):
            listed = await walk_chats(store, ChatFilter(visible_to=viewer), limit=1)
            assert [c.chat_id for c in listed] == [sees.chat_id], (
                f"{viewer} listed {[c.tenant_id for c in listed]}"
            )
            assert (await store.get_chat(sees.chat_id, viewer=viewer)).chat_id == sees.chat_id
            with pytest.raises(ChatNotFound):
                await store.get_chat(hidden.chat_id, viewer=viewer)
            with pytest.raises(ChatNotFound):
                await store.list_messages(hidden.chat_id, viewer=viewer)
        mapped = await walk_chats(store, {"visible_to": {"user_id": "u-ten"}}, limit=5)
        assert [c.chat_id for c in mapped] == [untenanted.chat_id]
