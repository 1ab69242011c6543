"""``MongoStore``: threadkeep on MongoDB through PyMongo's ``AsyncMongoClient``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, ClassVar

from bson.binary import Binary
from pymongo import AsyncMongoClient, IndexModel, ReturnDocument
from pymongo.errors import PyMongoError

from threadkeep import BackendUnavailable, Capabilities, InvalidArgument, Store
from threadkeep.driver import store_for

from ._archive import MongoArchiveMixin
from ._base import Collections
from ._chats import MongoChatsMixin
from ._codec import Document
from ._commit import MongoCommitRunMixin
from ._config import check_prefix, check_url, database_name
from ._errors import is_duplicate_key, map_errors
from ._load import MongoLoadMixin
from ._messages import MongoMessagesMixin
from ._schema import SCHEMA_VERSION, collection_names, indexes
from ._upgrade import upgrade_schema

__all__ = ["MongoDriver", "MongoStore"]

_SECRET_ID = "cursor_secret"  # noqa: S105 - the id of the document, not a secret
_SCHEMA = "schema"
_REPLICA_SET_WIRE_VERSION = 7  # MongoDB 4.0: transactions on replica sets
_SHARDED_WIRE_VERSION = 8  # MongoDB 4.2: transactions on sharded clusters

_STANDALONE_NOTE = (
    "this server is a standalone mongod, which has no multi-document transactions: a batch "
    "append undoes its own inserts when one fails, and under concurrent appends to one chat a "
    "reader may see a higher seq before a lower one commits; run MongoDB as a replica set "
    "(a one-node replica set is enough) for the full guarantees"
)


class MongoDriver(
    MongoLoadMixin,
    MongoCommitRunMixin,
    MongoArchiveMixin,
    MongoMessagesMixin,
    MongoChatsMixin,
):
    """The threadkeep driver for MongoDB (``mongodb://`` and ``mongodb+srv://`` URLs).

    The database is the URL's path (``mongodb://host:27017/mydb``; ``threadkeep`` when
    absent); every other URL option goes to PyMongo. See :mod:`threadkeep_mongodb._schema`
    for the collections, indexes and the shard key.

    Args:
        url: A MongoDB connection string.
        collection_prefix: Prepended to every collection name (letters, digits, ``_.-``),
            so several stores (or test runs) share one database.
        use_transactions: ``None`` (default) detects at open: transactions on a replica set
            or sharded cluster, none on a standalone server. ``False`` never uses them.
            ``True`` requires them (open fails on a standalone server).
        unique_agui_index: Make the ``(chat_id, agui_id)`` index unique (default); pass
            ``False`` when ``messages`` is sharded on ``{chat_id: 1, seq: 1}``.
        client_options: Extra keyword options for ``pymongo.AsyncMongoClient``.
        **options: Nothing else: an unknown option is refused.

    Raises:
        InvalidArgument: If the URL (its port, an option; see :func:`check_url`), the
            database name or the prefix is invalid.

    ``capabilities`` (a class attribute) declares what the driver does on a replica set,
    where MongoDB is meant to run. When :meth:`open` finds a standalone server it shadows
    it with an instance attribute whose ``transactions`` is ``False``, so
    ``store.capabilities`` always tells what this open store does.
    """

    schemes: ClassVar[tuple[str, ...]] = ("mongodb", "mongodb+srv")
    capabilities: ClassVar[Capabilities] = Capabilities(
        transactions=True,
        steps=True,
        archive=True,
        persistent=True,
        concurrent_processes=True,
        notes={
            "transactions": (
                "on a replica set or sharded cluster (detected at open); an open store on a "
                "standalone server reports transactions=False in store.capabilities"
            ),
        },
    )

    def __init__(
        self,
        url: str,
        *,
        collection_prefix: str = "",
        use_transactions: bool | None = None,
        unique_agui_index: bool = True,
        client_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        check_url(url)
        self.database_name = database_name(url)
        self.collection_prefix = check_prefix(collection_prefix)
        self._use_transactions = use_transactions
        self._unique_agui_index = unique_agui_index
        self._client_options = dict(client_options or {})
        self._client_or_none = None
        self._cols_or_none = None
        self._transactions = False

    # -- lifecycle -----------------------------------------------------------------------

    async def _open(self) -> None:
        with map_errors("open the MongoDB store"):
            # The driver relies on these two: standard UUIDs, and plain dict documents.
            options = {"appname": "threadkeep", **self._client_options}
            options.update(uuidRepresentation="standard", document_class=dict)
            client: AsyncMongoClient[Document] = AsyncMongoClient(self.url, **options)
            try:
                await self._connect(client)
            except BaseException:
                await client.close()
                self._client_or_none = self._cols_or_none = None
                raise

    async def _connect(self, client: AsyncMongoClient[Document]) -> None:
        hello = await client.admin.command("hello")
        self._transactions = self._decide_transactions(hello)
        caps = type(self).capabilities
        if not self._transactions:
            notes = {**caps.notes, "transactions": _STANDALONE_NOTE}
            caps = caps.model_copy(update={"transactions": False, "notes": notes})
        vars(self)["capabilities"] = caps  # instance-level: what this open store does
        database = client[self.database_name]
        names = collection_names(self.collection_prefix)
        self._client_or_none = client
        self._cols_or_none = Collections(**{k: database[v] for k, v in names.items()})
        await self._create_indexes()
        await self._check_schema()

    def _decide_transactions(self, hello: Document) -> bool:
        wire = int(hello.get("maxWireVersion", 0))
        replica_set = "setName" in hello and wire >= _REPLICA_SET_WIRE_VERSION
        sharded = hello.get("msg") == "isdbgrid" and wire >= _SHARDED_WIRE_VERSION
        available = replica_set or sharded
        if self._use_transactions and not available:
            msg = (
                "use_transactions=True, but this MongoDB server is a standalone mongod (or "
                "older than 4.0) without multi-document transactions; run it as a replica set"
            )
            raise InvalidArgument(msg)
        return available if self._use_transactions is None else self._use_transactions

    async def _create_indexes(self) -> None:
        by_collection: dict[str, list[IndexModel]] = {}
        for spec in indexes(unique_agui_index=self._unique_agui_index):
            model = IndexModel(list(spec.keys), **spec.kwargs())
            by_collection.setdefault(spec.collection, []).append(model)
        for name, models in by_collection.items():
            await getattr(self._cols, name).create_indexes(models)

    async def _check_schema(self) -> None:
        meta = self._cols.meta
        try:
            await meta.update_one(
                {"_id": _SCHEMA}, {"$setOnInsert": {"version": SCHEMA_VERSION}}, upsert=True
            )
            await meta.update_one({"_id": "chat_seq"}, {"$setOnInsert": {"value": 0}}, upsert=True)
        except PyMongoError as exc:
            if not is_duplicate_key(exc):  # a concurrent opener inserted them first
                raise
        stored = await meta.find_one({"_id": _SCHEMA})
        if stored is not None and stored.get("version", 0) > SCHEMA_VERSION:
            msg = (
                f"database {self.database_name!r} holds threadkeep-mongodb schema "
                f"{stored['version']}, newer than this version's {SCHEMA_VERSION}; upgrade "
                "threadkeep-mongodb"
            )
            raise BackendUnavailable(msg)
        await upgrade_schema(meta, self._cols.chats, _SCHEMA)

    async def _close(self) -> None:
        client, self._client_or_none, self._cols_or_none = self._client_or_none, None, None
        if client is not None:
            # Closing must not raise; the connections are gone either way.
            with contextlib.suppress(PyMongoError):
                await client.close()

    async def _load_secret(self, candidate: bytes) -> bytes:
        query = {"_id": _SECRET_ID}
        with map_errors("load the cursor secret"):
            try:
                doc = await self._cols.meta.find_one_and_update(
                    query,
                    {"$setOnInsert": {"value": Binary(candidate)}},
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            except PyMongoError as exc:
                if not is_duplicate_key(exc):
                    raise
                doc = await self._cols.meta.find_one(query)
        assert doc is not None
        return bytes(doc["value"])


def MongoStore(url: str, **options: Any) -> Store:  # noqa: N802 - the documented factory
    """Return an unopened ``Store`` holding a :class:`MongoDriver` for ``url``.

    Args:
        url: A MongoDB connection string (as for :class:`MongoDriver`).
        **options: The options of :class:`threadkeep.Store` (``cursor_secret``, ``clock``,
            ``max_message_bytes``, ``message_model``, ``chat_model``, ``auto_migrate``...)
            and those of :class:`MongoDriver` (``collection_prefix``, ``use_transactions``...).

    Returns:
        The store; its driver is ``store.driver``.

    Raises:
        InvalidArgument: If the URL or an option is invalid.
    """
    return store_for(MongoDriver, url, **options)
