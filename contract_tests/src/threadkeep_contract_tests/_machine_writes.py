"""State-machine rules that write: chats, appends, nested records, deletes, boundaries."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any
from uuid import UUID, uuid4

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from threadkeep import (
    Boundary,
    ChatFilter,
    ChatNotFound,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    InvalidContent,
    Message,
    MessageNotFound,
    Reasoning,
    ToolCall,
)

from ._helpers import assert_utc, body_of, walk_chats
from ._machine_base import MachineBase, texts
from ._model import CONFLICT, ModelChat, ModelMessage, is_compaction, same_payload

__all__ = ["WriteRules"]

_has_chats = precondition(lambda self: bool(self.model.chats))
_has_messages = precondition(lambda self: self.has_messages())


class WriteRules(MachineBase):
    """Rules that change the store, checking each result against the model."""

    @rule(data=st.data())
    def create_chat(self, data: st.DataObject) -> None:
        """``create_chat``: the live chat of the key, or a new one."""
        self.begin("create_chat")
        user = self.user(data.draw(st.integers(0, 2), label="user"))
        thread = f"thread{data.draw(st.integers(0, 2), label='thread')}"
        tenant = self.tenant(data.draw(st.integers(0, 2), label="tenant"))
        name = data.draw(st.none() | texts, label="name")
        live = self.model.live_chat(user, thread, tenant)
        note(
            f"create_chat({user!r}, {thread!r}, tenant={tenant!r}) "
            f"-> {live.label if live else 'new'}"
        )
        chat = self.run(self.store.create_chat(user, thread, tenant_id=tenant, name=name))
        assert_utc(chat.created_at, "chat.created_at")
        assert chat.deleted_at is None
        if live is not None:
            assert chat.chat_id == live.chat_id, f"a second live chat for the key of {live.label}"
            assert (chat.tenant_id, chat.name) == (live.tenant_id, live.name)
        else:
            assert chat.chat_id not in self.model.chats, "create_chat returned a deleted chat"
            assert (chat.user_id, chat.thread_id, chat.tenant_id, chat.name) == (
                user,
                thread,
                tenant,
                name,
            )
            live = self.model.add_chat(chat.chat_id, user, thread, tenant, name)
        self.touched.add(live.chat_id)
        self.chats_changed = True

    @initialize(data=st.data())
    def seed_chat(self, data: st.DataObject) -> None:
        """Start every run with one chat holding a few messages."""
        self.create_chat(data)
        self.append(data)

    @_has_chats
    @rule(data=st.data())
    def append_more(self, data: st.DataObject) -> None:
        """Appending is what a store mostly does: a second rule doubles its share of steps."""
        self.append(data)

    @_has_chats
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        """``append_message(s)``: new messages get higher seqs; retries return the stored one."""
        self.begin("append")
        chat = self.pick_chat(data)
        messages = [
            self.draw_message(data, chat) for _ in range(data.draw(st.integers(1, 4), label="size"))
        ]
        single = len(messages) == 1 and data.draw(st.booleans(), label="single")
        note(f"append to {chat.label}: {[self.describe(m) for m in messages]}")
        self.touched.add(chat.chat_id)
        call: Coroutine[Any, Any, Message | list[Message]] = (
            self.store.append_message(chat.chat_id, messages[0])
            if single
            else self.store.append_messages(chat.chat_id, messages)
        )
        bodies = [body_of(m) for m in messages]
        if chat.deleted:
            # A batch that contradicts itself may be refused before the chat is looked up.
            inner = self.model.plan_append(ModelChat(uuid4(), "", "", "", None, None, 0), bodies)
            self.expect_error(
                (ChatNotFound, IdempotencyConflict) if inner == CONFLICT else ChatNotFound, call
            )
            return
        plan = self.model.plan_append(chat, bodies)
        if isinstance(plan, str):  # CONFLICT
            self.expect_error(IdempotencyConflict, call)
            return
        result: Message | list[Message] = self.run(call)
        stored = [result] if isinstance(result, Message) else result
        assert len(stored) == len(messages)
        resolved: list[ModelMessage] = []
        for body, expected, got in zip(bodies, plan, stored, strict=True):
            resolved.append(self._check_appended(chat, body, expected, got, resolved))

    def _check_appended(
        self,
        chat: ModelChat,
        body: dict[str, Any],
        expected: ModelMessage | int | str | None,
        got: Message,
        resolved: list[ModelMessage],
    ) -> ModelMessage:
        if isinstance(expected, int):
            assert got.message_id == resolved[expected].message_id, (
                "a repeat in the batch was stored twice"
            )
            return resolved[expected]
        if isinstance(expected, ModelMessage):
            assert (got.message_id, got.seq) == (expected.message_id, expected.seq), (
                f"retry of agui_id {expected.agui_id!r} in {chat.label} "
                "did not return the stored message"
            )
            self.check_body(chat.label, got, expected.body)
            return expected
        assert got.message_id == Message.model_validate(body).message_id
        assert got.seq is not None
        assert got.seq > chat.max_seq(), f"{chat.label}: seq {got.seq} not above {chat.max_seq()}"
        self.check_body(chat.label, got, body)
        assert_utc(got.created_at, "message.created_at")
        message = ModelMessage(message_id=got.message_id, seq=got.seq, body=body)
        chat.messages.append(message)
        return message

    @_has_chats
    @rule(data=st.data())
    def append_lone_surrogate(self, data: st.DataObject) -> None:
        """A lone surrogate is refused with ``InvalidContent`` and nothing is written."""
        self.begin("append_lone_surrogate")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        note(f"append a lone surrogate to {chat.label}")
        bad = Message(role="user", content=f"{data.draw(texts)}\udc80")
        self.expect_error(
            InvalidContent, self.store.append_messages(chat.chat_id, [Message(role="user"), bad])
        )

    @_has_chats
    @rule(data=st.data())
    def delete_chat(self, data: st.DataObject) -> None:
        """``delete_chat``: soft-deletes a live chat; a deleted one is not found."""
        self.begin("delete_chat")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        note(f"delete_chat({chat.label}) deleted={chat.deleted}")
        if chat.deleted:
            self.expect_error(ChatNotFound, self.store.delete_chat(chat.chat_id))
            return
        deleted = self.run(self.store.delete_chat(chat.chat_id))
        assert_utc(deleted.deleted_at, "chat.deleted_at")
        found = self.run(
            self.store.find_chat(chat.user_id, chat.thread_id, tenant_id=chat.tenant_id)
        )
        assert found is None or found.chat_id != chat.chat_id, "a deleted chat is found"
        owned = ChatFilter(user_id=chat.user_id, tenant_id=chat.tenant_id)
        listed = self.run(walk_chats(self.store, owned, limit=50))
        assert chat.chat_id not in {c.chat_id for c in listed}, "a deleted chat is listed"
        chat.deleted = True
        self.chats_changed = True

    @_has_chats
    @rule(data=st.data())
    def restore_chat(self, data: st.DataObject) -> None:
        """``restore_chat``: brings a deleted chat back unless its key is taken again."""
        self.begin("restore_chat")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        holder = self.model.live_chat(chat.user_id, chat.thread_id, chat.tenant_id)
        note(
            f"restore_chat({chat.label}) deleted={chat.deleted} "
            f"key held by {holder and holder.label}"
        )
        if chat.deleted and holder is not None:
            self.expect_error(Conflict, self.store.restore_chat(chat.chat_id))
            return
        restored = self.run(self.store.restore_chat(chat.chat_id))
        assert restored.chat_id == chat.chat_id
        assert restored.deleted_at is None
        chat.deleted = False
        self.chats_changed = True

    @_has_messages
    @rule(data=st.data())
    def hide_messages(self, data: st.DataObject) -> None:
        """``delete_messages``: hides visible messages and says how many."""
        self.begin("hide_messages")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        chosen = (
            data.draw(st.lists(st.sampled_from(chat.messages), max_size=3), label="hide")
            if chat.messages
            else []
        )
        ids = [m.message_id for m in chosen] + [uuid4()]
        note(f"delete_messages({chat.label}, seqs={[m.seq for m in chosen]})")
        if chat.deleted:
            self.expect_error(ChatNotFound, self.store.delete_messages(chat.chat_id, ids))
            return
        expected = len({m.message_id for m in chosen if not m.hidden})
        assert self.run(self.store.delete_messages(chat.chat_id, ids)) == expected
        for message in chosen:
            message.hidden = True

    @_has_messages
    @rule(data=st.data(), list_field=st.sampled_from(["tool_calls", "reasonings"]))
    def append_nested(self, data: st.DataObject, list_field: str) -> None:
        """``append_tool_call`` / ``append_reasoning``: idempotent on agui_id within a message."""
        self.begin("append_nested")
        holders = [(c, m) for c, m in self.all_messages() if not m.is_boundary]
        if not holders:
            return
        chat, message = data.draw(st.sampled_from(holders), label="holder")
        self.touched.add(chat.chat_id)
        existing = [i for i in message.nested(list_field) if i.get("agui_id")]
        kind = data.draw(st.sampled_from(["new", "new", "retry", "changed"]), label="kind")
        model = ToolCall if list_field == "tool_calls" else Reasoning
        if kind != "new" and existing:
            item = dict(data.draw(st.sampled_from(existing), label="retry of"))
            if kind == "changed":
                item["content"] = f"{item.get('content') or ''}~"
        else:
            text = data.draw(texts, label="text")
            fields = {"arguments": text} if list_field == "tool_calls" else {"content": text}
            item = model(agui_id=self.fresh_id("n"), **fields).model_dump(mode="json")
        item["message_id"] = str(message.message_id)
        note(f"append {list_field[:-1]} {item.get('agui_id')!r} to {chat.label} seq {message.seq}")
        append = (
            self.store.append_tool_call
            if list_field == "tool_calls"
            else self.store.append_reasoning
        )
        call = append(message.message_id, model.model_validate(item))  # type: ignore[arg-type]
        if chat.deleted or message.hidden:
            self.expect_error(MessageNotFound, call)
            return
        same = next((i for i in existing if i["agui_id"] == item["agui_id"]), None)
        if same is not None and not same_payload(same, item):
            weak = not self.capabilities.strong_uuid_lookup
            self.expect_error(
                (IdempotencyConflict, MessageNotFound) if weak else IdempotencyConflict, call
            )
            return
        # finding the holder by uuid may miss (weak lookups)
        appended = self.lookup(call, "message", message.message_id)
        if appended is None:
            return
        got = appended.model_dump(mode="json")
        if same is None:
            message.body[list_field] = [*message.nested(list_field), item]
        assert got == (same or item), f"{list_field} item read back differs"

    @_has_messages
    @rule(data=st.data())
    def update_tool_call(self, data: st.DataObject) -> None:
        """``update_tool_call``: the result lands in the call, found by its uuid."""
        self.begin("update_tool_call")
        calls = [(c, m, i) for c, m in self.all_messages() for i in m.nested("tool_calls")]
        if not calls:
            return
        chat, message, item = data.draw(st.sampled_from(calls), label="tool call")
        self.touched.add(chat.chat_id)
        result = data.draw(texts, label="result")
        note(f"update_tool_call {item.get('agui_id')!r} in {chat.label} seq {message.seq}")
        call = self.store.update_tool_call(
            UUID(item["tool_call_id"]), content=result, status="complete"
        )
        if chat.deleted or message.hidden:
            self.expect_error(MessageNotFound, call)
            return
        updated = self.lookup(call, "tool_call", UUID(item["tool_call_id"]))
        if updated is None:
            return
        item.update(content=result, status="complete")
        assert updated.model_dump(mode="json") == item

    @_has_chats
    @rule(data=st.data())
    def start_over(self, data: st.DataObject) -> None:
        """``start_over``: one line after the last message; nothing after a start-over line.

        A compaction boundary as the last message gets a line drawn after it (its summary
        must not reach the model any more).
        """
        self.begin("start_over")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        note(f"start_over({chat.label})")
        if chat.deleted:
            self.expect_error(ChatNotFound, self.store.start_over(chat.chat_id))
            return
        visible = chat.visible()
        line = self.run(self.store.start_over(chat.chat_id))
        if not visible:
            assert line is None, "start_over on an empty chat added a boundary"
            return
        assert line is not None
        assert line.boundary is not None
        assert line.boundary.reason == "start_over", "start_over returned a compaction"
        if visible[-1].is_boundary and not is_compaction(visible[-1]):
            assert line.message_id == visible[-1].message_id, (
                "start_over after a boundary added another"
            )
        else:
            assert line.deleted_at is None, (
                "start_over returned a hidden boundary: no line is in effect"
            )
            assert line.message_id not in {m.message_id for m in chat.messages}
            assert line.seq is not None
            assert line.seq > chat.max_seq()
            chat.messages.append(
                ModelMessage(message_id=line.message_id, seq=line.seq, body=body_of(line))
            )

    @_has_messages
    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        """``compact``: a summary boundary, idempotent per ``upto_seq``; the cut moves forward."""
        self.begin("compact")
        chat = self.pick_chat(data)
        self.touched.add(chat.chat_id)
        seqs = [m.seq for m in chat.messages]
        upto = data.draw(st.sampled_from([*seqs, chat.max_seq() + 1]), label="upto_seq")
        summary = data.draw(st.sampled_from(["summary", "résumé 摘要"]), label="summary")
        note(f"compact({chat.label}, {summary!r}, upto_seq={upto})")
        call = self.store.compact(chat.chat_id, summary, upto)
        if chat.deleted:
            self.expect_error(ChatNotFound, call)
            return
        visible = chat.visible()
        if not visible or upto > visible[-1].seq or upto < chat.cut():
            self.expect_error(InvalidArgument, call)
            return
        wanted = body_of(
            Message(
                role="system",
                kind="boundary",
                content=summary,
                boundary=Boundary(reason="compaction", upto_seq=upto),
            )
        )
        stored = next(
            (
                m
                for m in chat.messages
                if m.is_boundary
                and (m.body.get("boundary") or {}).get("upto_seq") == upto
                and m.body["boundary"]["reason"] == "compaction"
            ),
            None,
        )
        if stored is not None and not same_payload(
            stored.body, {**wanted, "agui_id": stored.agui_id}
        ):
            self.expect_error(IdempotencyConflict, call)
            return
        line = self.run(call)
        assert line.deleted_at is None, (
            "compact returned a hidden boundary: the summary is not in effect"
        )
        if stored is not None and not stored.hidden:
            assert line.message_id == stored.message_id
            return
        assert line.message_id != (stored and stored.message_id)
        assert same_payload({**body_of(line), "agui_id": None}, {**wanted, "agui_id": None})
        assert line.seq is not None
        assert line.seq > chat.max_seq()
        chat.messages.append(
            ModelMessage(message_id=line.message_id, seq=line.seq, body=body_of(line))
        )
