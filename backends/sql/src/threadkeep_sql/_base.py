"""``SqlBase``: the state and row helpers the SQL driver's mixins share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

from threadkeep import Chat, Message, PreparedMessage, as_utc
from threadkeep.driver import DriverBase

from ._engine import Database

__all__ = ["SqlBase", "message_values", "ref_values"]

_CHAT_ROW = ("seq", "revision", "updated_at", "last_message_at")  # then the body (CHAT_COLUMNS)


def message_values(item: PreparedMessage, chat_id: UUID, seq: int, now: datetime) -> dict[str, Any]:
    """Return the ``messages`` row of a new message (revision 0, not deleted)."""
    message = item.message
    return {
        "chat_id": chat_id,
        "seq": seq,
        "message_id": message.message_id,
        "agui_id": message.agui_id,
        "role": message.role.value,
        "kind": message.kind.value,
        "run_id": message.run_id,
        "request_id": message.request_id,
        "block_id": message.block_id,
        "revision": 0,
        "created_at": message.created_at or now,
        "updated_at": now,
        "deleted_at": None,
        "fingerprint": item.fingerprint,
        "body": item.body,
    }


def ref_values(message: Message, chat_id: UUID, seq: int) -> list[dict[str, Any]]:
    """Return the ``message_refs`` rows of a message's tool calls and reasonings."""
    rows = [
        {
            "chat_id": chat_id,
            "seq": seq,
            "kind": "tool_call",
            "position": position,
            "item_id": call.tool_call_id,
            "agui_id": call.agui_id,
        }
        for position, call in enumerate(message.tool_calls)
    ]
    rows += [
        {
            "chat_id": chat_id,
            "seq": seq,
            "kind": "reasoning",
            "position": position,
            "item_id": reasoning.reasoning_id,
            "agui_id": reasoning.agui_id,
        }
        for position, reasoning in enumerate(message.reasonings)
    ]
    return rows


class SqlBase(DriverBase):
    """Shared state of :class:`threadkeep_sql.SqlDriver`; see there."""

    shield_writes = True  # a cancelled write must not leave BEGIN IMMEDIATE held (issue 12)

    _db: Database

    @property
    def db(self) -> Database:
        """The opened database (engine, dialect, connection helpers)."""
        return self._db

    def _upsert(self, table: Table) -> Any:
        """Return the dialect's ``INSERT`` (with ``on_conflict_do_nothing``) for ``table``."""
        module = postgresql if self._db.dialect == "postgresql" else sqlite
        return module.insert(table)

    def _message_row(self, row: Sequence[Any]) -> Message:
        """Rebuild a message from a row of ``_schema.MESSAGE_COLUMNS``."""
        chat_id, seq, revision, created_at, updated_at, deleted_at, body, _fingerprint = row
        return self.message_from_row(
            body,
            chat_id=chat_id,
            seq=seq,
            revision=revision,
            created_at=created_at,
            updated_at=updated_at,
            deleted_at=deleted_at,
        )

    def _message_rows(self, rows: Sequence[Sequence[Any]]) -> list[Message]:
        """Rebuild the messages of rows of ``_schema.MESSAGE_COLUMNS``."""
        return self.messages_from_rows(rows)

    def _chat_rows(self, rows: Sequence[Sequence[Any]]) -> list[Chat]:
        """Rebuild the chats of rows of ``_schema.CHAT_COLUMNS``."""
        return self.records_from_rows(self.chat_model, _CHAT_ROW, rows)

    def _chat_row(self, row: Sequence[Any]) -> Chat:
        """Rebuild a chat from a row of ``_schema.CHAT_COLUMNS``."""
        seq, revision, updated_at, last_message_at, body, _chat_id = row
        return self.record_from_body(
            self.chat_model,
            body,
            seq=seq,
            revision=revision,
            updated_at=updated_at,
            last_message_at=last_message_at,
        )

    @staticmethod
    def _stored(
        item: PreparedMessage,
        chat_id: UUID,
        seq: int,
        *,
        revision: int,
        created_at: datetime | None,
        updated_at: datetime,
    ) -> Message:
        """Return the stored form of a message just written, without re-parsing its body."""
        return item.message.model_copy(
            update={
                "chat_id": chat_id,
                "seq": seq,
                "revision": revision,
                "created_at": as_utc(created_at),
                "updated_at": updated_at,
                "deleted_at": None,
            }
        )
