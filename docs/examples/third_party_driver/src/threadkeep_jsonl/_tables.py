"""The in-memory tables the log folds into: the latest image of every chat and message row.

Every record in the log is a set of row images (upserts); :meth:`Tables.apply` is the only
way rows change, both while replaying the log on open and after each live commit, so what
the store serves and what a reopened store replays can never disagree.

Row shapes (JSON values, exactly as they appear in the log):

* chat row: every ``threadkeep.Chat`` field (``Chat.model_dump(mode="json")``), including the
  store-assigned ``seq`` and ``revision``. Key: ``chat_id``.
* message row: the columns ``message_id``, ``chat_id``, ``seq``, ``revision``,
  ``created_at``, ``updated_at``, ``deleted_at``, ``fingerprint``, and ``body``, the message
  without its store-assigned fields (``PreparedMessage.body`` decoded). Key: ``message_id``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ._log import Record

__all__ = ["NESTED_LISTS", "Identity", "Row", "Tables", "identity", "nested_keys"]

Row = dict[str, Any]
"""One chat or message row (decoded JSON)."""

Identity = tuple[str | None, str, str]
"""A chat's identity ``(tenant_id, user_id, thread_id)``: one live chat holds each."""


def identity(chat: Row) -> Identity:
    """Return a chat row's ``(tenant_id, user_id, thread_id)``.

    The live index is rebuilt from the log on every open, so logs written before the tenant
    was part of the identity need no migration.
    """
    return (chat.get("tenant_id"), chat["user_id"], chat["thread_id"])


NESTED_LISTS = {
    "tool_call": ("tool_calls", "tool_call_id"),
    "reasoning": ("reasonings", "reasoning_id"),
}
"""Nested kind -> (list field of the message body, id field of its items)."""


def nested_keys(row: Row) -> set[tuple[str, UUID]]:
    """Return ``(kind, item uuid)`` of every tool call and reasoning in a message row."""
    keys: set[tuple[str, UUID]] = set()
    for kind, (list_field, id_field) in NESTED_LISTS.items():
        keys.update((kind, UUID(item[id_field])) for item in row["body"].get(list_field, []))
    return keys


@dataclass
class Tables:
    """Chats and messages by key, with the indexes the primitives look things up by."""

    secret: bytes | None = None
    chat_seq: int = 0
    chats: dict[UUID, Row] = field(default_factory=dict)
    chat_seqs: list[int] = field(default_factory=list)
    chat_by_seq: dict[int, UUID] = field(default_factory=dict)
    live: dict[Identity, UUID] = field(default_factory=dict)
    messages: dict[UUID, Row] = field(default_factory=dict)
    seqs: dict[UUID, list[int]] = field(default_factory=dict)
    by_seq: dict[tuple[UUID, int], UUID] = field(default_factory=dict)
    by_agui: dict[tuple[UUID, str], UUID] = field(default_factory=dict)
    nested: dict[tuple[str, UUID], UUID] = field(default_factory=dict)

    # -- folding records -------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        """Fold one committed record into the tables.

        Raises:
            KeyError, TypeError, ValueError: If the record is not a threadkeep record.
        """
        if "secret" in record:
            self.secret = bytes.fromhex(record["secret"])
        for row in record.get("chats", []):
            self._put_chat(row)
        for row in record.get("messages", []):
            self._put_message(row)

    def _put_chat(self, row: Row) -> None:
        chat_id = UUID(row["chat_id"])
        key = identity(row)
        if row["deleted_at"] is None:
            self.live[key] = chat_id
        elif self.live.get(key) == chat_id:
            del self.live[key]
        if chat_id not in self.chats:
            bisect.insort(self.chat_seqs, row["seq"])
            self.chat_by_seq[row["seq"]] = chat_id
            self.seqs[chat_id] = []
        self.chats[chat_id] = row
        self.chat_seq = max(self.chat_seq, row["seq"])

    def _put_message(self, row: Row) -> None:
        message_id, chat_id, seq = UUID(row["message_id"]), UUID(row["chat_id"]), row["seq"]
        old = self.messages.get(message_id)
        if old is None:
            bisect.insort(self.seqs[chat_id], seq)
            self.by_seq[(chat_id, seq)] = message_id
            agui_id = row["body"].get("agui_id")
            if agui_id is not None:
                self.by_agui[(chat_id, agui_id)] = message_id
        else:  # a replaced or hidden message keeps its seq and agui_id; its nested ids change
            for key in nested_keys(old):
                self.nested.pop(key, None)
        self.nested.update(dict.fromkeys(nested_keys(row), message_id))
        self.messages[message_id] = row

    # -- reads -----------------------------------------------------------------------------

    def live_chat(self, chat_id: UUID) -> Row | None:
        """Return the chat's row if it exists and is not deleted."""
        row = self.chats.get(chat_id)
        return row if row is not None and row["deleted_at"] is None else None

    def hot_chat(self, chat_id: UUID) -> Row | None:
        """Return the chat's row if it is live and not archived (it takes appends)."""
        row = self.live_chat(chat_id)
        return row if row is not None and row["status"] != "archived" else None

    def held(self, chat_id: UUID, agui_id: str) -> tuple[str, Row] | None:
        """Return ``(fingerprint, row)`` of the chat's message with this ``agui_id``, or ``None``.

        Hidden messages count: their ``agui_id`` stays taken.
        """
        message_id = self.by_agui.get((chat_id, agui_id))
        if message_id is None:
            return None
        row = self.messages[message_id]
        return row["fingerprint"], row

    def visible(self, message_id: UUID) -> Row | None:
        """Return the message's row unless it is hidden or its chat is deleted."""
        row = self.messages.get(message_id)
        if row is None or row["deleted_at"] is not None:
            return None
        return row if self.live_chat(UUID(row["chat_id"])) is not None else None

    def next_seq(self, chat_id: UUID) -> int:
        """Return the chat's next message seq (the caller holds the store's write lock)."""
        seqs = self.seqs[chat_id]
        return seqs[-1] + 1 if seqs else 1

    def chats_desc(self, before_seq: int | None) -> Iterator[Row]:
        """Yield chat rows (deleted ones too), newest created first, ``seq < before_seq``."""
        seqs = self.chat_seqs
        end = len(seqs) if before_seq is None else bisect.bisect_left(seqs, before_seq)
        for index in range(end - 1, -1, -1):  # no slicing: a deep page costs what the first does
            yield self.chats[self.chat_by_seq[seqs[index]]]

    def rows_desc(self, chat_id: UUID, before_seq: int | None = None) -> Iterator[Row]:
        """Yield the chat's message rows (hidden ones too), newest first, ``seq < before_seq``."""
        seqs = self.seqs.get(chat_id, [])
        end = len(seqs) if before_seq is None else bisect.bisect_left(seqs, before_seq)
        for index in range(end - 1, -1, -1):
            yield self.messages[self.by_seq[(chat_id, seqs[index])]]

    def rows_after(self, chat_id: UUID, after_seq: int) -> Iterator[Row]:
        """Yield the chat's message rows (hidden ones too), oldest first, ``seq > after_seq``."""
        seqs = self.seqs.get(chat_id, [])
        for index in range(bisect.bisect_right(seqs, after_seq), len(seqs)):
            yield self.messages[self.by_seq[(chat_id, seqs[index])]]

    # -- purging ---------------------------------------------------------------------------

    def snapshot(self, without: UUID) -> Iterator[Record]:
        """Yield records that rebuild these tables, minus chat ``without`` and its messages."""
        if self.secret is not None:
            yield {"secret": self.secret.hex()}
        for chat_id, chat in self.chats.items():
            if chat_id != without:
                rows = list(self.rows_after(chat_id, 0))
                yield {"chats": [chat], "messages": rows}

    def drop_chat(self, chat_id: UUID) -> int:
        """Forget a chat and its messages; return how many messages it held."""
        chat = self.chats.pop(chat_id)
        self.chat_seqs.remove(chat["seq"])
        del self.chat_by_seq[chat["seq"]]
        if self.live.get(identity(chat)) == chat_id:
            del self.live[identity(chat)]
        seqs = self.seqs.pop(chat_id)
        for seq in seqs:
            row = self.messages.pop(self.by_seq.pop((chat_id, seq)))
            self.by_agui.pop((chat_id, row["body"].get("agui_id")), None)
            for key in nested_keys(row):
                self.nested.pop(key, None)
        return len(seqs)
