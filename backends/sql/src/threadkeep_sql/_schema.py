"""The SQL schema as SQLAlchemy Core tables (what queries are built from).

The tables are created and migrated by the Alembic scripts in ``_migrations`` (run by
``SqlStore.open``); this module mirrors the head revision for the query builder, and a test
checks that the two agree.

Layout:

- ``chats``: one row per chat. ``seq`` (the primary key, an identity column) is the store-wide
  creation order that ``list_chats`` pages by; ``next_seq`` / ``next_step_seq`` hand out the
  per-chat message and step seqs; ``revision`` is bumped by every write to the chat or its
  messages. Every ``ChatFilter`` field has a column (``name_folded`` holds
  ``name.casefold()`` for the keyword filter); the full record is the JSON ``body``.
  The live key: a partial unique index on ``dedup_key`` (``chat_deduplication_key``: the
  ``sha256`` of ``tenant_id`` when set, ``user_id`` and ``thread_id``)
  where ``deleted_at IS NULL``, so deleted chats do not hold it and index entries stay 64
  bytes whatever the ids' length.
- ``messages``: primary key ``(chat_id, seq)``, the keyset index every page walks; unique
  ``message_id``; partial unique ``(chat_id, agui_id)`` where ``agui_id`` is not null. The
  body is TEXT holding ``PreparedMessage.body`` (JSON escapes U+0000, so PostgreSQL ``text``
  holds it exactly; JSONB would not).
- ``message_refs``: the side index of nested tool-call and reasoning ids and agui ids, one
  row per nested item, written in the same transaction (or statement) as its message.
- ``steps``, ``runs``: the ``steps`` capability; ``settings``: one row per key (the cursor
  secret); ``archived_ids``: which chat an archived message, tool call or reasoning id
  belongs to, so lookups by id can find (and rehydrate) an archived chat.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from threadkeep import Unreadable

__all__ = [
    "CHAT_COLUMNS",
    "MESSAGE_COLUMNS",
    "KeyText",
    "archived_ids",
    "chats",
    "escape_key",
    "message_refs",
    "messages",
    "metadata",
    "runs",
    "settings",
    "steps",
    "unescape_key",
]


def escape_key(value: str) -> str:
    r"""Return ``value`` with U+0000 and backslash escaped (``\0``, ``\\``); injective.

    PostgreSQL ``text`` cannot hold U+0000 (and SQLite's string functions stop at it), but
    ids and names may contain it. Key columns hold this form; bodies hold the exact JSON.
    """
    if "\\" in value or "\x00" in value:
        return value.replace("\\", "\\\\").replace("\x00", "\\0")
    return value


def unescape_key(value: str) -> str:
    """Invert :func:`escape_key`."""
    if "\\" not in value:
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else "\\", value)


_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


class KeyText(sa.TypeDecorator[str]):
    """TEXT for ids, names and keys: values are stored through :func:`escape_key`.

    Comparisons against a ``KeyText`` column escape their bound values the same way, so
    equality, ``IN`` and uniqueness behave exactly as on the original strings.
    """

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        """Escape a string on its way to the database."""
        return escape_key(value) if isinstance(value, str) else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Any:
        """Unescape a string read from the database."""
        return unescape_key(value) if isinstance(value, str) else value


class When(sa.TypeDecorator[datetime]):
    """``TIMESTAMP WITH TIME ZONE``; a stored value that does not parse reads as ``Unreadable``.

    SQLite keeps timestamps as text, so a row changed outside threadkeep can hold
    ``'not-a-date'``; SQLAlchemy's parser would raise ``ValueError`` from inside the
    result, before the row is rebuilt. Here the value becomes a
    :class:`threadkeep.Unreadable` and the rebuild raises ``CorruptRecord`` naming the
    row's chat, seq and column (issue 12); other rows read normally.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def result_processor(self, dialect: sa.Dialect, coltype: Any) -> Any:
        """Return the dialect's parser, turning a parse failure into ``Unreadable``."""
        inner = self.impl_instance.result_processor(dialect, coltype)
        if inner is None:
            return None

        def process(value: Any) -> Any:
            try:
                return inner(value)
            except (ValueError, TypeError, OverflowError):
                return Unreadable(value, f"is not a timestamp ({value!r:.60})")

        return process


metadata = sa.MetaData()

_Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_When = When()
_Short = sa.String(32)

chats = sa.Table(
    "chats",
    metadata,
    sa.Column("seq", _Seq, primary_key=True, autoincrement=True),
    sa.Column("chat_id", sa.Uuid(), nullable=False, unique=True),
    sa.Column("dedup_key", sa.String(64), nullable=False),
    sa.Column("user_id", KeyText(), nullable=False),
    sa.Column("thread_id", KeyText(), nullable=False),
    sa.Column("agent_id", KeyText()),
    sa.Column("channel", KeyText()),
    sa.Column("tenant_id", KeyText()),
    sa.Column("team_id", KeyText()),
    sa.Column("name", KeyText()),
    sa.Column("name_folded", KeyText()),
    sa.Column("status", _Short, nullable=False),
    sa.Column("share", _Short, nullable=False),
    sa.Column("archive_ref", KeyText()),
    sa.Column("revision", sa.BigInteger(), nullable=False, server_default="0"),
    sa.Column("next_seq", sa.BigInteger(), nullable=False, server_default="1"),
    sa.Column("next_step_seq", sa.BigInteger(), nullable=False, server_default="1"),
    sa.Column("created_at", _When),
    sa.Column("updated_at", _When),
    sa.Column("last_message_at", _When),
    sa.Column("deleted_at", _When),
    sa.Column("body", sa.Text(), nullable=False),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("chat_id", sa.Uuid(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("message_id", sa.Uuid(), nullable=False, unique=True),
    sa.Column("agui_id", KeyText()),
    sa.Column("role", _Short, nullable=False),
    sa.Column("kind", _Short, nullable=False),
    sa.Column("run_id", KeyText()),
    sa.Column("request_id", KeyText()),
    sa.Column("block_id", KeyText()),
    sa.Column("revision", sa.BigInteger(), nullable=False),
    sa.Column("created_at", _When),
    sa.Column("updated_at", _When),
    sa.Column("deleted_at", _When),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("body", sa.Text(), nullable=False),
)

message_refs = sa.Table(
    "message_refs",
    metadata,
    sa.Column("chat_id", sa.Uuid(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("kind", _Short, primary_key=True),
    sa.Column("position", sa.Integer(), primary_key=True),
    sa.Column("item_id", sa.Uuid(), nullable=False),
    sa.Column("agui_id", KeyText()),
)

steps = sa.Table(
    "steps",
    metadata,
    sa.Column("step_id", sa.Uuid(), primary_key=True),
    sa.Column("chat_id", sa.Uuid(), nullable=False),
    sa.Column("seq", sa.BigInteger(), nullable=False),
    sa.Column("run_id", KeyText()),
    sa.Column("stack_id", KeyText(), nullable=False),
    sa.Column("status", _Short, nullable=False),
    sa.Column("created_at", _When),
    sa.Column("updated_at", _When),
    sa.Column("body", sa.Text(), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("chat_id", sa.Uuid(), primary_key=True),
    sa.Column("run_id", KeyText(), primary_key=True),
    sa.Column("status", _Short, nullable=False),
    sa.Column("revision", sa.BigInteger(), nullable=False),
    sa.Column("lease_expires_at", _When),
    sa.Column("created_at", _When),
    sa.Column("updated_at", _When),
    sa.Column("body", sa.Text(), nullable=False),
)

archived_ids = sa.Table(
    "archived_ids",
    metadata,
    sa.Column("item_id", sa.Uuid(), primary_key=True),
    sa.Column("chat_id", sa.Uuid(), nullable=False),
)

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)

sa.Index(
    "ux_chats_live_key",
    chats.c.dedup_key,
    unique=True,
    postgresql_where=chats.c.deleted_at.is_(None),
    sqlite_where=chats.c.deleted_at.is_(None),
)
sa.Index("ix_chats_user_seq", chats.c.user_id, chats.c.seq)
sa.Index("ix_chats_tenant_seq", chats.c.tenant_id, chats.c.seq)
sa.Index(
    "ux_messages_agui",
    messages.c.chat_id,
    messages.c.agui_id,
    unique=True,
    postgresql_where=messages.c.agui_id.isnot(None),
    sqlite_where=messages.c.agui_id.isnot(None),
)
sa.Index(
    "ix_messages_run",
    messages.c.chat_id,
    messages.c.run_id,
    postgresql_where=messages.c.run_id.isnot(None),
    sqlite_where=messages.c.run_id.isnot(None),
)
sa.Index(
    "ix_messages_boundary",
    messages.c.chat_id,
    messages.c.seq,
    postgresql_where=messages.c.kind == "boundary",
    sqlite_where=messages.c.kind == "boundary",
)
sa.Index("ix_message_refs_item", message_refs.c.item_id, message_refs.c.kind)
sa.Index(
    "ix_message_refs_agui",
    message_refs.c.chat_id,
    message_refs.c.kind,
    message_refs.c.agui_id,
    message_refs.c.seq,
    postgresql_where=message_refs.c.agui_id.isnot(None),
    sqlite_where=message_refs.c.agui_id.isnot(None),
)
sa.Index("ix_archived_ids_chat", archived_ids.c.chat_id)
sa.Index("ux_steps_chat_seq", steps.c.chat_id, steps.c.seq, unique=True)
sa.Index("ix_steps_run", steps.c.chat_id, steps.c.run_id, steps.c.seq)
sa.Index("ix_steps_stack", steps.c.stack_id, steps.c.seq)
sa.Index(
    "ix_runs_lease",
    runs.c.lease_expires_at,
    postgresql_where=runs.c.status == "active",
    sqlite_where=runs.c.status == "active",
)

MESSAGE_COLUMNS = (
    messages.c.chat_id,
    messages.c.seq,
    messages.c.revision,
    messages.c.created_at,
    messages.c.updated_at,
    messages.c.deleted_at,
    messages.c.body,
    messages.c.fingerprint,
)
"""The columns a message is rebuilt from, in the order ``Store.messages_from_rows`` expects,
then the fingerprint (idempotency checks)."""

CHAT_COLUMNS = (
    chats.c.seq,
    chats.c.revision,
    chats.c.updated_at,
    chats.c.last_message_at,
    chats.c.body,
    chats.c.chat_id,
)
"""The columns a chat is rebuilt from (the body, and what appends change without it), then
``chat_id`` for callers that need only the ids of a page (a chat list's previews)."""
