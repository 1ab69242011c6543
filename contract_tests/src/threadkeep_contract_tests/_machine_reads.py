"""State-machine rules that read: page walks, context, lookups, chat lists, previews."""

from __future__ import annotations

from uuid import UUID, uuid4

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from threadkeep import ChatFilter, ChatNotFound, Message, MessageFilter, MessageNotFound, Role

from ._helpers import body_of, walk_chats, walk_messages
from ._machine_base import ROLES, RUN_IDS, MachineBase
from ._model import ModelChat, ModelMessage

__all__ = ["ReadRules"]

_has_chats = precondition(lambda self: bool(self.model.chats))
_has_messages = precondition(lambda self: self.has_messages())


def _matches(message_filter: MessageFilter | None, message: ModelMessage) -> bool:
    if message_filter is None:
        return True
    if message_filter.roles is not None and message.body["role"] not in message_filter.roles:
        return False
    return message_filter.run_id is None or message.body.get("run_id") == message_filter.run_id


class ReadRules(MachineBase):
    """Rules that read the store and compare with the model."""

    @_has_chats
    @rule(data=st.data())
    def walk_pages(self, data: st.DataObject) -> None:
        """Walk every page: each visible message once, in seq order, also while appending."""
        self.begin("walk_pages")
        chat = self.pick_chat(data)
        limit = data.draw(st.integers(1, 9), label="limit")
        message_filter = data.draw(
            st.none()
            | st.builds(
                MessageFilter,
                roles=st.frozensets(st.sampled_from([Role(r) for r in ROLES]), min_size=1),
            )
            | st.builds(MessageFilter, run_id=st.sampled_from([r for r in RUN_IDS if r])),
            label="filter",
        )
        append_between = data.draw(st.booleans(), label="append between pages")
        note(
            f"walk {chat.label} limit={limit} filter={message_filter} "
            f"append_between={append_between}"
        )
        self.touched.add(chat.chat_id)
        if chat.deleted:
            self.expect_error(ChatNotFound, self.store.list_messages(chat.chat_id, limit=limit))
            return
        expected = [m for m in chat.visible() if _matches(message_filter, m)]

        async def append_one() -> None:
            if append_between:
                await self._append_during_walk(chat)

        walk = self.run(
            walk_messages(
                self.store,
                chat.chat_id,
                limit=limit,
                message_filter=message_filter,
                between_pages=append_one,
            )
        )
        assert [m.message_id for m in walk.items] == [m.message_id for m in expected], (
            f"walking {chat.label} by {limit} did not yield every message once, in order"
        )
        for got, want in zip(walk.items, expected, strict=True):
            assert (got.seq, body_of(got)) == (want.seq, want.body)

    async def _append_during_walk(self, chat: ModelChat) -> None:
        message = Message(role="user", content=f"during walk {self.fresh_id('w')}")
        stored = await self.store.append_message(chat.chat_id, message)
        assert stored.seq is not None
        assert stored.seq > chat.max_seq()
        chat.messages.append(
            ModelMessage(message_id=stored.message_id, seq=stored.seq, body=body_of(message))
        )

    @_has_chats
    @rule(data=st.data())
    def context(self, data: st.DataObject) -> None:
        """``context_messages``: after the last boundary, summary first, no orphan results."""
        self.begin("context")
        chat = self.pick_chat(data)
        size = data.draw(st.none() | st.integers(1, 5), label="max_messages")
        note(f"context_messages({chat.label}, max_messages={size})")
        call = self.store.context_messages(chat.chat_id, max_messages=size)
        if chat.deleted:
            self.expect_error(ChatNotFound, call)
            return
        got = self.run(call)
        expected = chat.context(size)
        assert [m.message_id for m in got] == [m.message_id for m in expected], (
            f"context of {chat.label}"
        )

    @_has_messages
    @rule(data=st.data())
    def lookups(self, data: st.DataObject) -> None:
        """Lookups by uuid and agui_id find the visible record, and never another one."""
        self.begin("lookups")
        chat, message = data.draw(st.sampled_from(self.all_messages()), label="message")
        visible = not chat.deleted and not message.hidden
        note(f"look up {chat.label} seq {message.seq} (visible={visible})")
        if visible:
            found = self.lookup(
                self.store.get_message(message.message_id), "message", message.message_id
            )
            assert found is None or (found.message_id, body_of(found)) == (
                message.message_id,
                message.body,
            )
        else:
            self.expect_error(MessageNotFound, self.store.get_message(message.message_id))
        if message.agui_id is not None:
            by_agui = self.run(self.store.get_message_by_agui_id(chat.chat_id, message.agui_id))
            if by_agui is not None or self.capabilities.strong_uuid_lookup:
                assert (by_agui and by_agui.message_id) == (message.message_id if visible else None)
        for item in message.nested("tool_calls"):
            if visible:
                tool_call_id = UUID(item["tool_call_id"])
                call = self.lookup(
                    self.store.get_tool_call(tool_call_id), "tool_call", tool_call_id
                )
                assert call is None or call.model_dump(mode="json") == item
            else:
                self.expect_error(
                    MessageNotFound, self.store.get_tool_call(UUID(item["tool_call_id"]))
                )
            if item.get("agui_id"):
                newest = (
                    None
                    if chat.deleted
                    else self.model.newest_holder(chat, "tool_calls", item["agui_id"])
                )
                got = self.run(self.store.get_tool_call_by_agui_id(chat.chat_id, item["agui_id"]))
                if got is not None or self.capabilities.strong_uuid_lookup:
                    assert (got and got.model_dump(mode="json")) == newest

    @_has_chats
    @rule()
    def last_messages(self) -> None:
        """``get_last_messages``: the newest visible message of each live chat, nothing else."""
        self.begin("last_messages")
        chats = sorted(self.model.chats.values(), key=lambda c: c.order)
        note("get_last_messages(every chat)")
        got = self.run(self.store.get_last_messages([c.chat_id for c in chats] + [uuid4()]))
        expected = {c.chat_id: c.visible()[-1] for c in chats if not c.deleted and c.visible()}
        assert {k: v.message_id for k, v in got.items()} == {
            k: v.message_id for k, v in expected.items()
        }

    @_has_chats
    @rule(data=st.data())
    def list_chats(self, data: st.DataObject) -> None:
        """``list_chats`` walks: matching live chats, newest created first, exactly once."""
        self.begin("list_chats")
        user = data.draw(st.none() | st.integers(0, 2).map(self.user), label="user")
        tenant_index = data.draw(st.integers(0, 2), label="tenant")
        tenant = self.tenant(tenant_index)
        if user is None and tenant is None:
            user = self.user(0)
        limit = data.draw(st.integers(1, 4), label="limit")
        chat_filter = ChatFilter(user_id=user, tenant_id=tenant)
        note(f"list_chats({chat_filter}, limit={limit})")
        got = self.run(walk_chats(self.store, chat_filter, limit=limit))
        expected = [
            c
            for c in sorted(self.model.chats.values(), key=lambda c: c.order)
            if not c.deleted
            and (user is None or c.user_id == user)
            and (tenant is None or c.tenant_id == tenant)
        ]
        assert [c.chat_id for c in got] == [c.chat_id for c in expected], "list_chats walk differs"
        assert all(c.tenant_id == tenant for c in got if tenant is not None), "crossed tenants"
