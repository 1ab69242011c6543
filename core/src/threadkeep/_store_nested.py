"""Tool calls and reasonings nested in a message: append, update, look up.

Both live inside their message's body (one record per message, SPEC section 2); a change is a
compare-and-set of the whole message on its revision, so concurrent changes to one message
never lose each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from ._content import message_fingerprint, validate_model
from ._driver import NestedKind
from ._errors import Conflict, IdempotencyConflict, InvalidArgument, MessageNotFound
from ._models import Message, Reasoning, ToolCall
from ._store_messages import MessageOps

__all__ = ["NestedOps"]

_CAS_ATTEMPTS = 16
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Nest:
    kind: NestedKind
    list_field: str
    id_field: str
    label: str


_TOOL_CALLS = _Nest("tool_call", "tool_calls", "tool_call_id", "tool call")
_REASONINGS = _Nest("reasoning", "reasonings", "reasoning_id", "reasoning")
_IMMUTABLE = frozenset({"tool_call_id", "reasoning_id", "agui_id", "message_id"})


def _item_fingerprint(item: dict[str, Any]) -> str:
    return message_fingerprint({k: v for k, v in item.items() if k != "message_id"})


class NestedOps(MessageOps):
    """Tool-call and reasoning operations (AG-UI seed, ``MessageRepositoryLike``)."""

    async def append_tool_call(self, message_id: UUID, tool_call: ToolCall) -> ToolCall:
        """Append a tool call to a visible message.

        Idempotent on ``agui_id`` within the message: an equal tool call already there is
        returned; a different one with the same ``agui_id`` raises ``IdempotencyConflict``.

        Returns:
            The stored tool call (``message_id`` set).

        Raises:
            MessageNotFound: If the message is not visible.
            IdempotencyConflict: As above.
            InvalidContent / PayloadTooLarge: If the grown message cannot be stored.
        """
        item = await self._append_nested(_TOOL_CALLS, message_id, tool_call)
        assert isinstance(item, ToolCall)
        return item

    async def append_reasoning(self, message_id: UUID, reasoning: Reasoning) -> Reasoning:
        """Append a reasoning to a visible message; as :meth:`append_tool_call`."""
        item = await self._append_nested(_REASONINGS, message_id, reasoning)
        assert isinstance(item, Reasoning)
        return item

    async def update_tool_call(self, tool_call_id: UUID, **changes: Any) -> ToolCall:
        """Change fields of a tool call (``arguments``, ``content``, ``status``, ``name``...).

        Raises:
            MessageNotFound: If no visible message holds the tool call.
            InvalidArgument: If an id field is changed or a value does not validate.
        """
        item = await self._update_nested(_TOOL_CALLS, tool_call_id, changes)
        assert isinstance(item, ToolCall)
        return item

    async def update_reasoning(self, reasoning_id: UUID, **changes: Any) -> Reasoning:
        """Change fields of a reasoning; as :meth:`update_tool_call`."""
        item = await self._update_nested(_REASONINGS, reasoning_id, changes)
        assert isinstance(item, Reasoning)
        return item

    async def get_tool_call(self, tool_call_id: UUID) -> ToolCall:
        """Return a tool call by id.

        Raises:
            MessageNotFound: If no visible message holds it.
        """
        message = await self._holder(_TOOL_CALLS, tool_call_id)
        return _pick(message.tool_calls, "tool_call_id", tool_call_id)

    async def get_reasoning(self, reasoning_id: UUID) -> Reasoning:
        """Return a reasoning by id; as :meth:`get_tool_call`."""
        message = await self._holder(_REASONINGS, reasoning_id)
        return _pick(message.reasonings, "reasoning_id", reasoning_id)

    async def get_tool_call_by_agui_id(self, chat_id: UUID, agui_id: str) -> ToolCall | None:
        """Return the chat's visible tool call with this client id (newest), or ``None``."""
        self._require_open()
        message = await self._find_nested_by_agui_id("tool_call", chat_id, agui_id)
        if message is None and await self._rehydrate_if_archived(chat_id):
            message = await self._find_nested_by_agui_id("tool_call", chat_id, agui_id)
        if message is None:
            return None
        return next((c for c in message.tool_calls if c.agui_id == agui_id), None)

    async def get_reasoning_by_agui_id(self, chat_id: UUID, agui_id: str) -> Reasoning | None:
        """Return the chat's visible reasoning with this client id (newest), or ``None``."""
        self._require_open()
        message = await self._find_nested_by_agui_id("reasoning", chat_id, agui_id)
        if message is None and await self._rehydrate_if_archived(chat_id):
            message = await self._find_nested_by_agui_id("reasoning", chat_id, agui_id)
        if message is None:
            return None
        return next((r for r in message.reasonings if r.agui_id == agui_id), None)

    async def _holder(self, nest: _Nest, item_id: UUID) -> Message:
        self._require_open()
        message = await self._find_nested(nest.kind, item_id)
        if message is None and await self._rehydrate_holder(item_id):
            message = await self._find_nested(nest.kind, item_id)
        if message is None:
            raise MessageNotFound(f"no visible {nest.label} {item_id}")
        return message

    async def _append_nested(self, nest: _Nest, message_id: UUID, item: Any) -> Any:
        new = item.model_dump(mode="json")
        new["message_id"] = str(message_id)
        for _ in range(_CAS_ATTEMPTS):
            current = await self.get_message(message_id)
            existing = [i.model_dump(mode="json") for i in getattr(current, nest.list_field)]
            same = [e for e in existing if new["agui_id"] and e["agui_id"] == new["agui_id"]]
            if same:
                if _item_fingerprint(same[0]) != _item_fingerprint(new):
                    msg = f"{nest.label} agui_id {new['agui_id']!r} is stored with another payload"
                    raise IdempotencyConflict(msg)
                return _pick(getattr(current, nest.list_field), "agui_id", new["agui_id"])
            data = {**current.model_dump(), nest.list_field: [*existing, new]}
            stored = await self._cas(current, data)
            if stored is not None:
                return _pick(
                    getattr(stored, nest.list_field), nest.id_field, UUID(new[nest.id_field])
                )
        raise Conflict(f"message {message_id} kept changing under concurrent writers")

    async def _update_nested(self, nest: _Nest, item_id: UUID, changes: dict[str, Any]) -> Any:
        frozen = set(changes) & _IMMUTABLE
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a {nest.label}")
        for _ in range(_CAS_ATTEMPTS):
            current = await self._holder(nest, item_id)
            items = [i.model_dump() for i in getattr(current, nest.list_field)]
            for entry in items:
                if entry[nest.id_field] == item_id:
                    entry.update(changes)
            stored = await self._cas(current, {**current.model_dump(), nest.list_field: items})
            if stored is not None:
                return _pick(getattr(stored, nest.list_field), nest.id_field, item_id)
        raise Conflict(f"{nest.label} {item_id} kept changing under concurrent writers")

    async def _cas(self, current: Message, data: dict[str, Any]) -> Message | None:
        updated = validate_model(type(current), data)
        return await self._replace_message(self.prepare(updated), current.revision, self._now())


def _pick(items: list[T], field: str, value: Any) -> T:
    for item in items:
        if getattr(item, field) == value:
            return item
    raise MessageNotFound(f"no nested record with {field}={value}")
