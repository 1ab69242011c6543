"""Tool calls and reasonings nested in a message: append, update, look up.

Both live inside their message's body (one record per message); a change is a
compare-and-set of the whole message on its revision, so concurrent changes to one message
never lose each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from ._content import json_data, message_fingerprint, validate_model
from ._driver import NestedKind
from ._errors import Conflict, IdempotencyConflict, InvalidArgument, MessageNotFound
from ._models import Message, Reasoning, ToolCall
from ._store_args import as_id, as_model, as_str
from ._store_core import Component

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


class NestedOps(Component):
    """Tool-call and reasoning operations: append, update, look up by id or ``agui_id``."""

    async def append_tool_call(
        self, message_id: UUID | str, tool_call: ToolCall | Mapping[str, Any]
    ) -> ToolCall:
        """Implement :meth:`threadkeep.Store.append_tool_call`."""
        message_id = as_id(message_id, "message_id")
        item = await self._append_nested(
            _TOOL_CALLS, message_id, as_model(ToolCall, tool_call, "tool_call")
        )
        assert isinstance(item, ToolCall)
        return item

    async def append_reasoning(
        self, message_id: UUID | str, reasoning: Reasoning | Mapping[str, Any]
    ) -> Reasoning:
        """Implement :meth:`threadkeep.Store.append_reasoning`."""
        message_id = as_id(message_id, "message_id")
        item = await self._append_nested(
            _REASONINGS, message_id, as_model(Reasoning, reasoning, "reasoning")
        )
        assert isinstance(item, Reasoning)
        return item

    async def update_tool_call(self, tool_call_id: UUID | str, /, **changes: Any) -> ToolCall:
        """Implement :meth:`threadkeep.Store.update_tool_call`."""
        tool_call_id = as_id(tool_call_id, "tool_call_id")
        item = await self._update_nested(_TOOL_CALLS, tool_call_id, changes)
        assert isinstance(item, ToolCall)
        return item

    async def update_reasoning(self, reasoning_id: UUID | str, /, **changes: Any) -> Reasoning:
        """Implement :meth:`threadkeep.Store.update_reasoning`."""
        reasoning_id = as_id(reasoning_id, "reasoning_id")
        item = await self._update_nested(_REASONINGS, reasoning_id, changes)
        assert isinstance(item, Reasoning)
        return item

    async def get_tool_call(self, tool_call_id: UUID | str) -> ToolCall:
        """Implement :meth:`threadkeep.Store.get_tool_call`."""
        tool_call_id = as_id(tool_call_id, "tool_call_id")
        message = await self._holder(_TOOL_CALLS, tool_call_id)
        return _pick(message.tool_calls, "tool_call_id", tool_call_id)

    async def get_reasoning(self, reasoning_id: UUID | str) -> Reasoning:
        """Implement :meth:`threadkeep.Store.get_reasoning`."""
        reasoning_id = as_id(reasoning_id, "reasoning_id")
        message = await self._holder(_REASONINGS, reasoning_id)
        return _pick(message.reasonings, "reasoning_id", reasoning_id)

    async def get_tool_call_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> ToolCall | None:
        """Implement :meth:`threadkeep.Store.get_tool_call_by_agui_id`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        agui_id = as_str(agui_id, "agui_id")
        message = await self._driver.find_nested_by_agui_id("tool_call", chat_id, agui_id)
        if message is None and await self._ctx.chats._rehydrate_if_archived(chat_id):
            message = await self._driver.find_nested_by_agui_id("tool_call", chat_id, agui_id)
        if message is None:
            return None
        return next((c for c in message.tool_calls if c.agui_id == agui_id), None)

    async def get_reasoning_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Reasoning | None:
        """Implement :meth:`threadkeep.Store.get_reasoning_by_agui_id`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        agui_id = as_str(agui_id, "agui_id")
        message = await self._driver.find_nested_by_agui_id("reasoning", chat_id, agui_id)
        if message is None and await self._ctx.chats._rehydrate_if_archived(chat_id):
            message = await self._driver.find_nested_by_agui_id("reasoning", chat_id, agui_id)
        if message is None:
            return None
        return next((r for r in message.reasonings if r.agui_id == agui_id), None)

    async def _holder(self, nest: _Nest, item_id: UUID) -> Message:
        self._ctx.require_open()
        message = await self._driver.find_nested(nest.kind, item_id)
        if message is None and await self._ctx.chats._rehydrate_holder(item_id):
            message = await self._driver.find_nested(nest.kind, item_id)
        if message is None:
            raise MessageNotFound(f"no visible {nest.label} {item_id}")
        return message

    async def _append_nested(self, nest: _Nest, message_id: UUID, item: Any) -> Any:
        # Checked before the JSON dump, which would turn NaN/infinity into null.
        new = json_data(item, nest.kind)
        new["message_id"] = str(message_id)
        for _ in range(_CAS_ATTEMPTS):
            current = await self._ctx.messages.get_message(message_id)
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
        return await self._driver.replace_message(
            self._ctx.records.prepare(updated), current.revision, self._ctx.now()
        )


def _pick(items: list[T], field: str, value: Any) -> T:
    for item in items:
        if getattr(item, field) == value:
            return item
    raise MessageNotFound(f"no nested record with {field}={value}")
