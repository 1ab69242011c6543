"""The plain-Python model of one store that the state machine compares a driver with.

It states the store's rules directly: a chat is a list of messages in ``seq`` order; an
``agui_id`` stored in a chat (hidden or not) answers every later append with that id; what
the model gets is what follows the last boundary, without orphan tool results. It never
imports the store's implementation, so a bug shared by core and model cannot hide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

__all__ = [
    "CONFLICT",
    "ModelChat",
    "ModelMessage",
    "StoreModel",
    "is_compaction",
    "same_payload",
    "without_generated_ids",
]

CONFLICT = "conflict"
"""What :meth:`StoreModel.plan_append` returns for an append that must conflict."""

_GENERATED_IDS = frozenset({"message_id", "tool_call_id", "reasoning_id"})


def without_generated_ids(value: Any) -> Any:
    """Return ``value`` without the ids a client does not choose (at any depth)."""
    if isinstance(value, dict):
        return {k: without_generated_ids(v) for k, v in value.items() if k not in _GENERATED_IDS}
    if isinstance(value, list):
        return [without_generated_ids(v) for v in value]
    return value


def same_payload(stored: dict[str, Any], new: dict[str, Any]) -> bool:
    """Return whether two bodies are "equal" for idempotency."""
    return bool(without_generated_ids(stored) == without_generated_ids(new))


@dataclass
class ModelMessage:
    """A message as the model knows it: id, seq, the body as written, and hidden or not."""

    message_id: UUID
    seq: int
    body: dict[str, Any]
    hidden: bool = False

    @property
    def agui_id(self) -> str | None:
        """The client id, if any."""
        value = self.body.get("agui_id")
        return None if value is None else str(value)

    @property
    def is_boundary(self) -> bool:
        """Whether this is a start-over or compaction marker."""
        return self.body.get("kind") == "boundary"

    def nested(self, list_field: str) -> list[dict[str, Any]]:
        """Return the tool calls (``tool_calls``) or reasonings (``reasonings``) of the body."""
        items: list[dict[str, Any]] = self.body.get(list_field, [])
        return items


@dataclass
class ModelChat:
    """A chat as the model knows it."""

    chat_id: UUID
    label: str
    user_id: str
    thread_id: str
    tenant_id: str | None
    name: str | None
    order: int
    deleted: bool = False
    messages: list[ModelMessage] = field(default_factory=list)

    def visible(self) -> list[ModelMessage]:
        """The messages every read path shows, in seq order."""
        return [m for m in self.messages if not m.hidden]

    def by_agui(self, agui_id: str) -> ModelMessage | None:
        """The stored message with this client id (hidden or not), or ``None``."""
        return next((m for m in self.messages if m.agui_id == agui_id), None)

    def max_seq(self) -> int:
        """The highest seq ever assigned in this chat (0 if none)."""
        return max((m.seq for m in self.messages), default=0)

    def cut(self) -> int:
        """The last seq out of context: the last visible boundary's ``upto_seq`` or seq."""
        boundaries = [m for m in self.visible() if m.is_boundary]
        if not boundaries:
            return 0
        last = boundaries[-1]
        if is_compaction(last):
            return int(last.body["boundary"]["upto_seq"])
        return last.seq

    def context(self, max_messages: int | None = None) -> list[ModelMessage]:
        """What the model gets: after the cut, summary first, no orphan tool results.

        A compaction marker superseded by a later one cuts nothing; a "start over" line
        always cuts what came before it.
        """
        visible = self.visible()
        boundaries = [m for m in visible if m.is_boundary]
        last = boundaries[-1] if boundaries else None
        head = [last] if last is not None and is_compaction(last) else []
        after = self.cut()
        body: list[ModelMessage] = []
        for message in visible:
            if message.seq <= after or message is last:
                continue
            if message.is_boundary:
                if not is_compaction(message):
                    body = []
                continue
            body.append(message)
        if max_messages is not None:
            body = body[-max_messages:]
        return head + _without_orphans(body)


def is_compaction(message: ModelMessage) -> bool:
    """Whether ``message`` is a compaction marker (a boundary carrying ``upto_seq``)."""
    marker = message.body.get("boundary") or {}
    return marker.get("reason") == "compaction" and marker.get("upto_seq") is not None


def _without_orphans(window: list[ModelMessage]) -> list[ModelMessage]:
    calls: set[str] = set()
    kept: list[ModelMessage] = []
    for message in window:
        if message.body.get("role") == "tool" and message.body.get("tool_call_ref") not in calls:
            continue
        calls.update(c["agui_id"] for c in message.nested("tool_calls") if c.get("agui_id"))
        kept.append(message)
    return kept


@dataclass
class StoreModel:
    """Every chat one state-machine run created, by id, plus its creation counter."""

    chats: dict[UUID, ModelChat] = field(default_factory=dict)
    created: int = 0

    def live_chat(self, user_id: str, thread_id: str, tenant_id: str | None) -> ModelChat | None:
        """The live chat of a key ``(tenant_id, user_id, thread_id)``, or ``None``."""
        key = (tenant_id, user_id, thread_id)
        return next(
            (
                c
                for c in self.chats.values()
                if (c.tenant_id, c.user_id, c.thread_id) == key and not c.deleted
            ),
            None,
        )

    def add_chat(
        self, chat_id: UUID, user_id: str, thread_id: str, tenant_id: str | None, name: str | None
    ) -> ModelChat:
        """Record a newly created chat."""
        self.created += 1
        chat = ModelChat(
            chat_id=chat_id,
            label=f"chat{self.created}",
            user_id=user_id,
            thread_id=thread_id,
            tenant_id=tenant_id,
            name=name,
            order=self.created,
        )
        self.chats[chat_id] = chat
        return chat

    @staticmethod
    def plan_append(
        chat: ModelChat, bodies: list[dict[str, Any]]
    ) -> list[ModelMessage | int | None] | str:
        """Say what an append of ``bodies`` must do, or :data:`CONFLICT`.

        Returns:
            Per body: the stored message a retry returns, the index of an earlier body of
            the batch it repeats, or ``None`` for a new message.
        """
        plan: list[ModelMessage | int | None] = []
        first_of: dict[str, int] = {}
        for index, body in enumerate(bodies):
            agui_id = body.get("agui_id")
            if agui_id is None:
                plan.append(None)
                continue
            if agui_id in first_of:
                if not same_payload(bodies[first_of[agui_id]], body):
                    return CONFLICT
                plan.append(first_of[agui_id])
                continue
            first_of[agui_id] = index
            stored = chat.by_agui(agui_id)
            if stored is not None and not same_payload(stored.body, body):
                return CONFLICT
            plan.append(stored)
        return plan

    def holder_of(self, list_field: str, item_id: str) -> tuple[ModelChat, ModelMessage] | None:
        """The chat and message holding a tool call / reasoning id (visible or not)."""
        id_field = "tool_call_id" if list_field == "tool_calls" else "reasoning_id"
        for chat in self.chats.values():
            for message in chat.messages:
                if any(i.get(id_field) == item_id for i in message.nested(list_field)):
                    return chat, message
        return None

    @staticmethod
    def newest_holder(chat: ModelChat, list_field: str, agui_id: str) -> dict[str, Any] | None:
        """The nested item with this agui_id in the newest visible message holding one."""
        for message in reversed(chat.visible()):
            for item in message.nested(list_field):
                if item.get("agui_id") == agui_id:
                    return item
        return None
