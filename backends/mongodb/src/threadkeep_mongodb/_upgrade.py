"""Schema upgrades run on open: idempotent steps from a stored schema version to the code's.

Version 2 (issue 12): a chat's identity is ``(tenant_id, user_id, thread_id)``, so the
``dedup_key`` of a chat with a tenant becomes ``chat_deduplication_key(user_id, thread_id,
tenant_id)``. Databases written at version 1 keyed every chat on ``(user_id, thread_id)``;
:func:`upgrade_schema` rewrites the key of each chat that has a tenant, then records
version 2. Every step sets values computed from the document alone, so a step that is
interrupted, or run by two openers at once, is simply run again; a chat without a tenant
keeps its key. The partial unique index on ``dedup_key`` cannot fail on the way: at most one
live chat held each ``(user_id, thread_id)`` before, so at most one holds each ``(tenant_id,
user_id, thread_id)`` after.
"""

from __future__ import annotations

from typing import Any

from pymongo import UpdateOne

from threadkeep import chat_deduplication_key

from ._codec import Document

__all__ = ["TENANT_KEY_VERSION", "upgrade_schema"]

TENANT_KEY_VERSION = 2
"""The schema version from which chats with a tenant key on it."""

_BATCH = 1000


async def upgrade_schema(meta: Any, chats: Any, schema_id: str) -> None:
    """Bring a database to :data:`TENANT_KEY_VERSION` (a no-op when it is there).

    Args:
        meta: The store's ``meta`` collection (holds ``{_id: schema_id, version}``).
        chats: The store's ``chats`` collection.
        schema_id: The ``_id`` of the schema document in ``meta``.

    Raises:
        pymongo.errors.PyMongoError: If the server fails (the caller maps it); the next
            open runs the step again.
    """
    stored = await meta.find_one({"_id": schema_id})
    if stored is None or stored.get("version", 0) >= TENANT_KEY_VERSION:
        return
    await _rekey_tenant_chats(chats)
    await meta.update_one(
        {"_id": schema_id, "version": {"$lt": TENANT_KEY_VERSION}},
        {"$set": {"version": TENANT_KEY_VERSION}},
    )


async def _rekey_tenant_chats(chats: Any) -> None:
    """Set the tenant-aware ``dedup_key`` of every chat with a tenant, in batches."""
    wrong: list[UpdateOne] = []
    cursor = chats.find(
        {"tenant_id": {"$ne": None}},
        {"_id": 1, "user_id": 1, "thread_id": 1, "tenant_id": 1, "dedup_key": 1},
    )
    async for doc in cursor:
        key = _key_of(doc)
        if doc.get("dedup_key") != key:
            wrong.append(UpdateOne({"_id": doc["_id"]}, {"$set": {"dedup_key": key}}))
        if len(wrong) >= _BATCH:
            await chats.bulk_write(wrong, ordered=False)
            wrong = []
    if wrong:
        await chats.bulk_write(wrong, ordered=False)


def _key_of(doc: Document) -> str:
    """The version-2 dedup key of a stored chat document."""
    return chat_deduplication_key(doc["user_id"], doc["thread_id"], doc["tenant_id"])
