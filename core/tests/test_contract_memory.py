"""The in-memory reference driver passes the whole contract suite (threadkeep-contract-tests).

Its back door reads ``MemoryStore._state`` directly, never the store's read path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import pytest

from threadkeep import Store
from threadkeep._memory import MemoryDriver, MemoryStore
from threadkeep_contract_tests import (
    DAMAGED_BODIES,
    DAMAGED_TIMESTAMP,
    RawChat,
    RawMessage,
    StoreContract,
)


def _state_of(store: Store) -> Any:
    assert isinstance(store.driver, MemoryDriver)
    return store.driver._state


def _damage_record(
    state: Any, kind: str, chat_id: UUID, seq: int | None, damage: str
) -> str | None:
    """Damage the body of the chat's step of ``seq``, or of its one run."""
    body = DAMAGED_BODIES.get(damage)
    if body is None:
        return None
    if kind == "step":
        [row] = [r for r in state.steps.values() if r.chat_id == chat_id and r.seq == seq]
    else:
        [row] = [r for key, r in state.runs.items() if key[0] == chat_id]
    row.body = body
    return "body"


class TestMemoryStore(StoreContract):
    """``memory://<unique name>`` per test: named stores share state across reopen."""

    @pytest.fixture
    def store_factory(self) -> Callable[..., Store]:
        url = f"memory://contract-{uuid4().hex}"
        return lambda **options: MemoryStore(url, **options)

    async def raw_chats(self, store: Store) -> list[RawChat]:
        state = _state_of(store)
        with state.lock:
            return [
                RawChat.from_body(row.body, deleted=row.deleted) for row in state.chats.values()
            ]

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        state = _state_of(store)
        with state.lock:
            row = state.chats.get(chat_id)
            rows = [] if row is None else list(row.messages.values())
            return [
                RawMessage.from_body(
                    m.body, chat_id=m.chat_id, seq=m.seq, hidden=m.deleted_at is not None
                )
                for m in rows
            ]

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        state = _state_of(store)
        with state.lock:
            if kind in ("step", "run"):
                return _damage_record(state, kind, chat_id, seq, damage)
            chat = state.chats[chat_id]
            row = chat if kind == "chat" else chat.messages[seq]
            if damage.startswith("timestamp"):
                if kind == "chat":
                    return None
                row.created_at = DAMAGED_TIMESTAMP if damage == "timestamp" else 12345
                return "created_at"
            row.body = DAMAGED_BODIES[damage]
            return "body"

    async def move_message(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        """Re-key the row of ``seq`` to ``new_seq``, leaving the chat's ``next_seq`` alone."""
        state = _state_of(store)
        with state.lock:
            chat = state.chats[chat_id]
            row = chat.messages.pop(seq)
            chat.seqs.remove(seq)
            row.seq = new_seq
            chat.messages[new_seq] = row
            chat.seqs.append(new_seq)
            chat.seqs.sort()
            state.message_index[row.message_id] = (chat_id, new_seq)
            if row.agui_id is not None:
                state.agui_index[(chat_id, row.agui_id)] = new_seq
            return "behind"
