"""The MongoDB schema of threadkeep: collections, documents, indexes, and the shard key.

Every collection name carries the store's ``collection_prefix`` (default empty). The database
is the URL's path (``mongodb://host/DBNAME``), ``threadkeep`` when the URL has none.

Bodies are JSON text
    A message, chat, step or run body is the compact JSON text the core produces
    (``PreparedMessage.body``, ``Store.record_body``), stored as a BSON string. User data
    therefore never becomes BSON keys: a metadata key such as ``"$where"`` or ``"a.b"`` is
    stored and read back exactly and can never be read as an operator or a path; NUL
    characters (escaped by JSON), integers beyond int64 and float bit patterns survive too.
    Only the fields queries need are copied into typed top-level fields. Instants are int64
    microseconds since the Unix epoch, UTC (``*_us``), so they keep the microseconds a BSON
    date would drop.

``{prefix}chats``, one document per chat::

    _id: UUID (chat_id)      seq: int64 (store-wide, from the chat_seq counter)
    dedup_key: str           live: bool (not deleted)
    writable: bool (live, status active, not being purged: appends need it)
    purging: true (only while ``purge_chat`` removes the chat)
    user_id, thread_id, tenant_id, team_id, agent_id, channel, status, share, name: str | null
    name_folded: str | null (casefolded name, for the keyword filter)
    revision: int64          next_seq: int64 (next message seq)   next_step_seq: int64
    created_us, updated_us, last_message_us, deleted_us: int64 | null
    idle_us: int64 | null (last_message_us, else created_us)
    body: str (JSON of the whole Chat; the typed fields above win on read)

``{prefix}messages``, one document per message (never a thread per document, so a chat grows
without bound and a message may approach the 16 MiB BSON limit on its own)::

    _id: UUID (message_id)   chat_id: UUID     seq: int64      agui_id: str (absent if none)
    role, kind: str          run_id, request_id, block_id: str | null
    fingerprint: str         revision: int64
    created_us, updated_us: int64              deleted_us: int64 | null (hidden when set)
    tool_calls: [{tool_call_id: UUID, agui_id?: str}]   (nested; the full calls are in body)
    reasonings: [{reasoning_id: UUID, agui_id?: str}]
    body: str                (inline JSON body), or, when the body is over INLINE_BODY_BYTES:
    body_id: UUID, body_chunks: int, body_bytes: int (UTF-8 body split into chunk documents)

``{prefix}chunks``, pieces of oversized bodies (GridFS-style; written in the same transaction
as their message)::

    _id: ObjectId   body_id: UUID   n: int (0-based)   chat_id: UUID   data: Binary (UTF-8 bytes)

``{prefix}steps``: ``_id: UUID (step_id), chat_id, seq, run_id, stack_id, completed: bool,
created_us, body``. ``{prefix}runs``: ``chat_id, run_id, revision, active: bool,
lease_expires_us, body``. ``{prefix}archived_ids``: ``_id: UUID`` (a message, tool call or
reasoning id of an archived chat) and ``chat_id``, so lookups by id find archived chats.
``{prefix}meta``: ``{_id: "chat_seq", value}`` (the store-wide chat counter),
``{_id: "cursor_secret", value: Binary}``, ``{_id: "schema", version}``.

Indexes (see :func:`indexes`)
    chats: ``dedup_key`` unique, partial on ``{live: true}`` (one live chat per
    ``(user_id, thread_id)``; deleted chats release the key); ``seq`` and
    ``(user_id, seq)`` and ``(tenant_id, seq)`` for keyset chat pages; ``idle_us``.
    messages: ``(chat_id, seq)`` unique (keyset pages, never ``skip()``);
    ``(chat_id, agui_id)`` unique, partial on ``agui_id`` being a string;
    ``(chat_id, run_id, seq)``; multikey ``tool_calls.tool_call_id``,
    ``reasonings.reasoning_id``, ``(chat_id, tool_calls.agui_id, seq)``,
    ``(chat_id, reasonings.agui_id, seq)``.
    chunks: ``(body_id, n)`` unique, ``chat_id``. steps: ``(chat_id, seq)``,
    ``(chat_id, run_id, seq)``, ``(stack_id, seq)``. runs: ``(chat_id, run_id)`` unique,
    ``lease_expires_us`` partial on ``{active: true}``. archived_ids: ``chat_id``.

Scale: shard ``messages`` (and ``chunks`` on ``{body_id: 1}``) with the shard key
``{chat_id: 1, seq: 1}``: a chat's pages stay on one shard and keyset reads are targeted.
MongoDB enforces a unique index on a sharded collection only when the shard key prefixes it,
so on a sharded ``messages`` the ``(chat_id, agui_id)`` index must be created non-unique
(``unique_agui_index=False``). Uniqueness of ``agui_id`` still holds: every append reads the
chat's stored ``agui_id`` s and reserves seqs on the chat document inside one transaction, so
two appends to one chat serialize on that document (a write conflict retries the later one).
``chats`` stays unsharded (small; its partial unique dedup index needs it) or is sharded on
``{dedup_key: 1}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHUNK_BYTES",
    "INLINE_BODY_BYTES",
    "SCHEMA_VERSION",
    "IndexSpec",
    "collection_names",
    "indexes",
]

SCHEMA_VERSION = 2
"""Stored in ``meta``; a store refuses a database written by a newer schema.

Version 2 keys a chat with a tenant on ``(tenant_id, user_id, thread_id)``; a version-1
database is upgraded on open (``_upgrade.upgrade_schema``).
"""

INLINE_BODY_BYTES = 12 * 1024 * 1024
"""Bodies up to 12 MiB (UTF-8) stay in the message document; larger ones go to chunks.

The margin below BSON's 16 MiB document limit (16,777,216 bytes) leaves room for the nested
id lists and typed fields of a message with many tool calls.
"""

CHUNK_BYTES = 4 * 1024 * 1024
"""Bytes of body per chunk document."""

COLLECTIONS = ("chats", "messages", "chunks", "steps", "runs", "archived_ids", "meta")


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: its collection (unprefixed), keys, and ``create_index`` options."""

    collection: str
    keys: tuple[tuple[str, int], ...]
    options: tuple[tuple[str, Any], ...] = ()

    def kwargs(self) -> dict[str, Any]:
        """Return the options as ``create_index`` keyword arguments."""
        return dict(self.options)


def _partial(expression: dict[str, Any]) -> tuple[str, Any]:
    return ("partialFilterExpression", expression)


_UNIQUE = ("unique", True)

_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec("chats", (("dedup_key", 1),), (_UNIQUE, _partial({"live": True}))),
    IndexSpec("chats", (("seq", -1),), (_UNIQUE,)),
    IndexSpec("chats", (("user_id", 1), ("seq", -1))),
    IndexSpec("chats", (("tenant_id", 1), ("seq", -1))),
    IndexSpec("chats", (("idle_us", 1),)),
    IndexSpec("messages", (("chat_id", 1), ("seq", 1)), (_UNIQUE,)),
    IndexSpec("messages", (("chat_id", 1), ("run_id", 1), ("seq", 1))),
    IndexSpec("messages", (("tool_calls.tool_call_id", 1),)),
    IndexSpec("messages", (("reasonings.reasoning_id", 1),)),
    IndexSpec("messages", (("chat_id", 1), ("tool_calls.agui_id", 1), ("seq", -1))),
    IndexSpec("messages", (("chat_id", 1), ("reasonings.agui_id", 1), ("seq", -1))),
    IndexSpec("chunks", (("body_id", 1), ("n", 1)), (_UNIQUE,)),
    IndexSpec("chunks", (("chat_id", 1),)),
    IndexSpec("steps", (("chat_id", 1), ("seq", 1))),
    IndexSpec("steps", (("chat_id", 1), ("run_id", 1), ("seq", 1))),
    IndexSpec("steps", (("stack_id", 1), ("seq", 1))),
    IndexSpec("runs", (("chat_id", 1), ("run_id", 1)), (_UNIQUE,)),
    IndexSpec("runs", (("lease_expires_us", 1),), (_partial({"active": True}),)),
    IndexSpec("archived_ids", (("chat_id", 1),)),
)


def indexes(*, unique_agui_index: bool = True) -> list[IndexSpec]:
    """Return every index the driver creates at open (``create_index`` is idempotent).

    Args:
        unique_agui_index: Make ``(chat_id, agui_id)`` unique (the default); ``False`` for a
            ``messages`` collection sharded on ``{chat_id: 1, seq: 1}`` (see the module text).
    """
    options: tuple[tuple[str, Any], ...] = (_partial({"agui_id": {"$type": "string"}}),)
    if unique_agui_index:
        options = (_UNIQUE, *options)
    agui = IndexSpec("messages", (("chat_id", 1), ("agui_id", 1)), options)
    return [*_INDEXES, agui]


def collection_names(prefix: str) -> dict[str, str]:
    """Map each unprefixed collection name to its name under ``prefix``."""
    return {name: f"{prefix}{name}" for name in COLLECTIONS}
