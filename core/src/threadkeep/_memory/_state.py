"""The in-memory reference store's data: plain dicts guarded by one lock.

Rows keep the serialized JSON body, as a real backend would, so the reference driver proves
that everything the contract demands survives serialization.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

__all__ = ["ChatRow", "MemoryState", "MessageRow", "RunRow", "StepRow", "named_state"]


@dataclass
class MessageRow:
    """One stored message: its body text and the columns reads need."""

    body: str
    chat_id: UUID
    seq: int
    message_id: UUID
    agui_id: str | None
    fingerprint: str
    revision: int
    created_at: datetime | None
    updated_at: datetime | None
    deleted_at: datetime | None = None
    run_id: str | None = None
    tool_call_ids: frozenset[UUID] = frozenset()
    reasoning_ids: frozenset[UUID] = frozenset()
    tool_call_aguis: frozenset[str] = frozenset()
    reasoning_aguis: frozenset[str] = frozenset()


@dataclass
class ChatRow:
    """One stored chat: its body text, its counters and its messages by seq."""

    body: str
    user_id: str
    thread_id: str
    seq: int
    revision: int = 0
    deleted: bool = False
    archived: bool = False
    last_message_at: datetime | None = None
    updated_at: datetime | None = None
    next_seq: int = 1
    next_step_seq: int = 1
    seqs: list[int] = field(default_factory=list)
    messages: dict[int, MessageRow] = field(default_factory=dict)

    def add(self, row: MessageRow) -> None:
        """Insert a message row, keeping ``seqs`` sorted."""
        bisect.insort(self.seqs, row.seq)
        self.messages[row.seq] = row
        self.next_seq = max(self.next_seq, row.seq + 1)


@dataclass
class StepRow:
    """One stored step: its body and the columns lookups need."""

    body: str
    chat_id: UUID
    seq: int
    run_id: str | None
    stack_id: str
    completed: bool


@dataclass
class RunRow:
    """One stored run: its chat, its body and its compare-and-set revision."""

    chat_id: UUID
    body: str
    revision: int
    active: bool
    lease_expires_at: datetime | None


@dataclass
class MemoryState:
    """Everything one memory store holds."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    secret: bytes | None = None
    chat_seq: int = 0
    chats: dict[UUID, ChatRow] = field(default_factory=dict)
    live_keys: dict[str, UUID] = field(default_factory=dict)  # by Chat.dedup_key
    message_index: dict[UUID, tuple[UUID, int]] = field(default_factory=dict)
    agui_index: dict[tuple[UUID, str], int] = field(default_factory=dict)
    steps: dict[UUID, StepRow] = field(default_factory=dict)
    runs: dict[tuple[UUID, str], RunRow] = field(default_factory=dict)
    archived_ids: dict[UUID, UUID] = field(default_factory=dict)


_NAMED: dict[str, MemoryState] = {}
_NAMED_LOCK = threading.Lock()


def named_state(name: str) -> MemoryState:
    """Return the process-wide state called ``name`` (``memory://name``), creating it."""
    with _NAMED_LOCK:
        return _NAMED.setdefault(name, MemoryState())
