"""Schema 2 on open: chats with a tenant written by schema 1 get the tenant-aware dedup key.

The version-1 database is made through the back door from a store's own documents: the
schema document says 1 and every chat has the tenant-less key that version wrote.
"""

from __future__ import annotations

from typing import Any

from threadkeep import chat_deduplication_key
from threadkeep_mongodb._schema import SCHEMA_VERSION


async def _as_version_one(raw_db: Any) -> None:
    await raw_db["meta"].update_one({"_id": "schema"}, {"$set": {"version": 1}})
    async for doc in raw_db["chats"].find({}):
        old = chat_deduplication_key(doc["user_id"], doc["thread_id"])
        await raw_db["chats"].update_one({"_id": doc["_id"]}, {"$set": {"dedup_key": old}})


async def test_opening_a_version_one_database_rekeys_tenant_chats(make_store, raw_db) -> None:
    async with make_store() as store:
        a = await store.create_chat("alice", "t1", tenant_id="acme")
        gone = await store.create_chat("alice", "t2", tenant_id="acme")
        await store.delete_chat(gone.chat_id)
        plain = await store.create_chat("bob", "t1")
    await _as_version_one(raw_db)
    for _ in range(2):  # the upgrade runs once; a second open finds nothing to do
        async with make_store() as store:
            found = await store.find_chat("alice", "t1", tenant_id="acme")
            assert found is not None
            assert found.chat_id == a.chat_id
            assert await store.find_chat("alice", "t1") is None
            assert (await store.create_chat("bob", "t1")).chat_id == plain.chat_id
        schema = await raw_db["meta"].find_one({"_id": "schema"})
        assert schema["version"] == SCHEMA_VERSION == 2
        docs = [d async for d in raw_db["chats"].find({})]
        assert len(docs) == 3
        for doc in docs:
            key = chat_deduplication_key(doc["user_id"], doc["thread_id"], doc["tenant_id"])
            assert doc["dedup_key"] == key
