"""threadkeep-jsonl against the whole threadkeep store contract (threadkeep-contract-tests).

The back door reads ``threadkeep.jsonl`` itself, the way the README documents the format
(every line is a set of row images; the last image of a row wins), never through
``JsonlDriver``'s in-memory tables: a bug in the driver's read path cannot hide a write bug.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from threadkeep import Store, open_store
from threadkeep_contract_tests import (
    DAMAGED_BODIES,
    DAMAGED_TIMESTAMP,
    RawChat,
    RawMessage,
    StoreContract,
)

from threadkeep_jsonl import LOG_NAME, JsonlDriver


def _latest_rows(store: Store, table: str, key: str) -> list[dict[str, Any]]:
    """Fold the log file: the last image of each row of ``table`` ("chats" or "messages")."""
    assert isinstance(store.driver, JsonlDriver)
    latest: dict[str, dict[str, Any]] = {}
    for line in (store.driver.directory / LOG_NAME).read_bytes().split(b"\n"):
        if line:
            for row in json.loads(line).get(table, []):
                latest[row[key]] = row
    return list(latest.values())


class TestJsonlStore(StoreContract):
    """A fresh store directory per test; ``store_factory`` reopens the same one."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[..., Store]:
        url = "jsonl" + (tmp_path / "chats").as_uri().removeprefix("file")
        # Through open_store, as users open it: every test also proves the entry point.
        return lambda **options: open_store(url, **options)

    async def raw_chats(self, store: Store) -> list[RawChat]:
        return [
            RawChat.from_body(row, deleted=row["deleted_at"] is not None)
            for row in _latest_rows(store, "chats", "chat_id")
        ]

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        return [
            RawMessage.from_body(
                row["body"], chat_id=chat_id, seq=row["seq"], hidden=row["deleted_at"] is not None
            )
            for row in _latest_rows(store, "messages", "message_id")
            if row["chat_id"] == str(chat_id)
        ]

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        """Damage the row in the store's tables, as a hand-edited log line would on reopen."""
        assert isinstance(store.driver, JsonlDriver)
        tables = store.driver._tables
        if kind == "chat":
            row = tables.chats[chat_id]
        else:
            assert seq is not None
            row = tables.messages[tables.by_seq[(chat_id, seq)]]
        if damage == "timestamp" and kind == "message":
            row["created_at"] = DAMAGED_TIMESTAMP
            return "created_at"
        body = DAMAGED_BODIES.get(damage)
        if body is None or kind == "chat":  # a chat row is its own body
            return None
        row["body"] = body
        return "body"
