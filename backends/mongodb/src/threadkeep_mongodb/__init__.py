"""threadkeep-mongodb: threadkeep on MongoDB through PyMongo's ``AsyncMongoClient``.

Open it by URL like any driver::

    from threadkeep import open_store

    async with open_store("mongodb://localhost:27017/threadkeep?replicaSet=rs0") as store:
        chat = await store.create_chat("user-1", "thread-1")

One document per message, bodies stored as JSON text, per-chat seqs reserved atomically on
the chat document inside a multi-document transaction, keyset pages on ``(chat_id, seq)``,
bodies over 12 MiB in chunk documents, and the shard key ``{chat_id: 1, seq: 1}`` for scale:
the schema, indexes and sharding notes are in :mod:`threadkeep_mongodb._schema`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadkeep.driver import lazy_exports

if TYPE_CHECKING:
    from ._store import MongoDriver, MongoStore

__all__ = [
    "MongoDriver",
    "MongoStore",
]

# Loaded on first use: the plugin entry point imports this package, and loading plugins must
# not pull in the driver's heavy dependencies until its scheme is opened.
_LAZY = {
    "MongoDriver": "_store",
    "MongoStore": "_store",
}


__getattr__ = lazy_exports(__name__, _LAZY)
