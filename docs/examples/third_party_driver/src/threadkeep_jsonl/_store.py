"""``JsonlDriver``: threadkeep chat history in an append-only JSON-lines file.

It implements the fifteen required primitives of ``threadkeep.driver.Driver`` and nothing
else: core derives the rest (forward reads, lookups by nested ``agui_id``, previews) and
the optional capabilities (steps, archive) are off.

Every primitive runs under one lock: it reads the in-memory tables, decides, commits one
record to the log (``_log.py``: append + ``fsync``), then folds the same record into the
tables (``_tables.py``). Checking and writing in one critical section is what makes
``create_chat`` idempotent under concurrency, reserves each ``seq`` atomically, and lets an
``IdempotencyConflict`` anywhere in a batch write nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit
from uuid import UUID

from threadkeep import (
    Capabilities,
    Chat,
    ChatFilter,
    Conflict,
    InvalidArgument,
    Message,
    MessageFilter,
    NestedKind,
    PreparedMessage,
    as_utc,
    chat_matches,
    message_matches,
    skip_damaged,
)
from threadkeep.driver import DriverBase, resolve_batch

from ._log import Log, Record
from ._tables import Row, Tables, identity

__all__ = ["JsonlDriver"]


def _iso(value: datetime | None) -> str | None:
    utc = as_utc(value)
    return None if utc is None else utc.isoformat()


class JsonlDriver(DriverBase):
    """A store in one directory: ``jsonl:///absolute/path/to/dir`` (created if missing).

    The directory holds ``threadkeep.jsonl`` (the log) and ``threadkeep.lock``. The log is
    read into memory on open; one store instance at a time may have the directory open.
    See the package README for the file format and the driver's limits.

    Args:
        url: ``jsonl:///absolute/directory``.

    Raises:
        InvalidArgument: If the URL is not ``jsonl:///`` followed by an absolute path.
    """

    schemes: ClassVar[tuple[str, ...]] = ("jsonl",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        transactions=False,
        persistent=True,
        concurrent_processes=False,
        notes={
            "transactions": "no transactions: every write is one fsync-ed line, so a batch "
            "is all or nothing without them",
            "concurrent_processes": "one open store per directory (a lock file refuses a "
            "second one)",
        },
    )

    def __init__(self, url: str) -> None:
        super().__init__(url)
        parts = urlsplit(url)
        if parts.scheme != "jsonl" or parts.netloc not in ("", "localhost") or not parts.path:
            msg = f"{url!r} is not a jsonl store URL like 'jsonl:///var/lib/chats'"
            raise InvalidArgument(msg)
        self.directory = Path(unquote(parts.path))
        self._lock = threading.Lock()
        self._tables = Tables()
        self._log = Log(self.directory)

    # -- lifecycle -----------------------------------------------------------------------

    async def _open(self) -> None:
        with self._lock:
            tables = Tables()
            self._log.open(tables.apply)
            self._tables = tables

    async def _close(self) -> None:
        with self._lock:
            self._log.close()

    async def _load_secret(self, candidate: bytes) -> bytes:
        with self._lock:
            if self._tables.secret is None:
                self._commit({"secret": candidate.hex()})
            assert self._tables.secret is not None
            return self._tables.secret

    def _commit(self, record: Record) -> None:
        """Write ``record`` durably, then fold it into the tables (the lock is held)."""
        self._log.append(record)
        self._tables.apply(record)

    # -- chats ---------------------------------------------------------------------------

    def _chat(self, row: Row) -> Chat:
        return self.record_from_body(self.chat_model, row)

    async def insert_chat(self, chat: Chat) -> Chat:
        with self._lock:
            held = self._tables.live.get((chat.tenant_id, chat.user_id, chat.thread_id))
            if held is not None:
                return self._chat(self._tables.chats[held])
            if chat.chat_id in self._tables.chats:  # another chat's id: never replace it
                raise Conflict(f"chat {chat.chat_id} exists already under another key")
            row = chat.model_dump(mode="json") | {"seq": self._tables.chat_seq + 1, "revision": 0}
            self._commit({"chats": [row]})
            return self._chat(row)

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        with self._lock:
            row = self._tables.chats.get(chat_id)
            return None if row is None else self._chat(row)

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        with self._lock:
            chat_id = self._tables.live.get((tenant_id, user_id, thread_id))
            return None if chat_id is None else self._chat(self._tables.chats[chat_id])

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        with self._lock:
            row = self._tables.chats.get(chat.chat_id)
            if row is None:
                return None
            if expected_revision is not None and row["revision"] != expected_revision:
                return None
            holder = self._tables.live.get(identity(row))
            if chat.deleted_at is None and holder not in (None, chat.chat_id):
                msg = (
                    f"another live chat holds ({row['user_id']!r}, {row['thread_id']!r}); "
                    "delete it before restoring this one"
                )
                raise Conflict(msg)
            # Identity and creation never change; appends own seq and last_message_at.
            fixed = ("tenant_id", "user_id", "thread_id", "seq", "created_at", "last_message_at")
            kept = {k: row[k] for k in fixed}
            new = chat.model_dump(mode="json") | kept | {"revision": row["revision"] + 1}
            self._commit({"chats": [new]})
            return self._chat(new)

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        with self._lock:
            found: list[Chat] = []
            for row in self._tables.chats_desc(before_seq):
                chat = skip_damaged(self._chat, row)  # None: left out of a skipping page
                if chat is not None and chat_matches(chat_filter, chat):
                    found.append(chat)
                    if len(found) == limit:
                        break
            return found

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        with self._lock:
            if chat_id not in self._tables.chats:
                return {"chats": 0, "messages": 0}
            # Rewrite first: if it fails, the chat is still on disk and still in memory.
            self._log.rewrite(self._tables.snapshot(without=chat_id))
            return {"chats": 1, "messages": self._tables.drop_chat(chat_id)}

    # -- messages ------------------------------------------------------------------------

    def _message(self, row: Row) -> Message:
        return self.message_from_row(
            row["body"],
            chat_id=UUID(row["chat_id"]),
            seq=row["seq"],
            revision=row["revision"],
            # ISO text as stored: message_from_row parses it, and reports text that does
            # not parse as a CorruptRecord naming the column (a hand-edited log line).
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            deleted_at=row["deleted_at"],
        )

    def _new_row(self, chat_id: UUID, seq: int, item: PreparedMessage, now: datetime) -> Row:
        return {
            "message_id": str(item.message.message_id),
            "chat_id": str(chat_id),
            "seq": seq,
            "revision": 0,
            "created_at": _iso(item.message.created_at or now),
            "updated_at": _iso(now),
            "deleted_at": None,
            "fingerprint": item.fingerprint,
            "body": json.loads(item.body),
        }

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        with self._lock:
            chat = self._tables.hot_chat(chat_id)
            if chat is None:
                return None
            results: list[tuple[Row, bool]] = []
            new_rows: list[Row] = []
            next_seq = self._tables.next_seq(chat_id)  # reserved: the lock is held until commit
            # The idempotency rule (raises before anything of the batch is written).
            plan = resolve_batch(chat_id, messages, lambda agui: self._tables.held(chat_id, agui))
            for item, held in zip(messages, plan, strict=True):
                if held is None:
                    row = self._new_row(chat_id, next_seq + len(new_rows), item, now)
                    new_rows.append(row)
                    results.append((row, True))
                    continue
                results.append((held, False))
            if new_rows:
                stamp = _iso(now)
                revision = chat["revision"] + 1
                chat_row = chat | {
                    "revision": revision,
                    "updated_at": stamp,
                    "last_message_at": stamp,
                }
                self._commit({"chats": [chat_row], "messages": new_rows})
            return [(self._message(row), created) for row, created in results]

    async def get_message(self, message_id: UUID) -> Message | None:
        with self._lock:
            row = self._tables.visible(message_id)
            return None if row is None else self._message(row)

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        with self._lock:
            message_id = self._tables.by_agui.get((chat_id, agui_id))
            row = None if message_id is None else self._tables.visible(message_id)
            return None if row is None else self._message(row)

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        with self._lock:
            row = self._tables.visible(prepared.message.message_id)
            if row is None or row["revision"] != expected_revision:
                return None
            new = row | {
                "revision": expected_revision + 1,
                "updated_at": _iso(now),
                "fingerprint": prepared.fingerprint,
                "body": json.loads(prepared.body),
            }
            chat = self._tables.chats[UUID(row["chat_id"])]
            self._commit({"chats": [chat | {"revision": chat["revision"] + 1}], "messages": [new]})
            return self._message(new)

    async def page_messages(
        self, chat_id: UUID, message_filter: MessageFilter, before_seq: int | None, limit: int
    ) -> list[Message] | None:
        with self._lock:
            if self._tables.hot_chat(chat_id) is None:
                return None
            found: list[Message] = []
            for row in self._tables.rows_desc(chat_id, before_seq):
                if row["deleted_at"] is None:
                    message = skip_damaged(self._message, row)
                    if message is not None and message_matches(message_filter, message):
                        found.append(message)
                        if len(found) == limit:
                            break
            return found

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        with self._lock:
            hidden: dict[str, Row] = {}
            for message_id in message_ids:
                row = self._tables.visible(message_id)
                if row is not None and row["chat_id"] == str(chat_id):
                    changes = {"deleted_at": _iso(now), "updated_at": _iso(now)}
                    hidden[row["message_id"]] = row | changes | {"revision": row["revision"] + 1}
            if hidden:
                chat = self._tables.chats[chat_id]
                chat_row = chat | {"revision": chat["revision"] + 1}
                self._commit({"chats": [chat_row], "messages": list(hidden.values())})
            return len(hidden)

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        with self._lock:
            message_id = self._tables.nested.get((kind, item_id))
            row = None if message_id is None else self._tables.visible(message_id)
            return None if row is None else self._message(row)
