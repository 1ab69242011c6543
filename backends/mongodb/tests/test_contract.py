"""The MongoDB driver against the shared contract suite (threadkeep-contract-tests).

Each test gets a fresh database on the test server (dropped afterwards); the back door reads
the ``chats``, ``messages`` and ``chunks`` collections with plain queries, never through
the store's read path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar
from uuid import UUID

import pytest

from threadkeep import Capabilities, Store
from threadkeep.driver import store_for
from threadkeep_contract_tests import RawChat, RawMessage, StoreContract
from threadkeep_mongodb import MongoDriver, MongoStore


def _mongo(store: Store) -> MongoDriver:
    assert isinstance(store.driver, MongoDriver)
    return store.driver


async def _body(store: MongoDriver, doc: dict[str, Any]) -> str:
    if "body" in doc:
        return str(doc["body"])
    cursor = store._cols.chunks.find({"body_id": doc["body_id"]}, sort=[("n", 1)])
    return b"".join([bytes(c["data"]) async for c in cursor]).decode("utf-8")


class TestMongoContract(StoreContract):
    """``mongodb://`` on the test server; a fresh database per test."""

    @pytest.fixture
    def store_factory(self, mongo_db: tuple[str, str]) -> Callable[..., Store]:
        url, _ = mongo_db
        return lambda **options: MongoStore(url, **options)

    async def raw_chats(self, store: Store) -> list[RawChat]:
        cursor = _mongo(store)._cols.chats.find({})
        return [
            RawChat.from_body(doc["body"], deleted=doc["deleted_us"] is not None)
            async for doc in cursor
        ]

    async def raw_messages(self, store: Store, chat_id: UUID) -> list[RawMessage]:
        mongo = _mongo(store)
        docs = await mongo._cols.messages.find({"chat_id": chat_id}).to_list(None)
        return [
            RawMessage.from_body(
                await _body(mongo, doc),
                chat_id=doc["chat_id"],
                seq=doc["seq"],
                hidden=doc["deleted_us"] is not None,
            )
            for doc in docs
        ]

    async def damage_row(
        self, store: Store, kind: str, chat_id: UUID, seq: int | None, damage: str
    ) -> str | None:
        damaged = _DAMAGED_FIELDS.get(damage)
        if damaged is None:  # BSON has a type per field: no unparsable date text
            return None
        field, value = damaged
        cols = _mongo(store)._cols
        collection, query = {
            "chat": (cols.chats, {"_id": chat_id}),
            "message": (cols.messages, {"chat_id": chat_id, "seq": seq}),
            "step": (cols.steps, {"chat_id": chat_id, "seq": seq}),
            "run": (cols.runs, {"chat_id": chat_id}),
        }[kind]
        await collection.update_one(query, {"$set": {field: value}})
        return "created_at" if field == "created_us" else "body"

    async def move_message(self, store: Store, chat_id: UUID, seq: int, new_seq: int) -> str:
        """Set the document's ``seq``, leaving the chat document's ``next_seq`` alone."""
        query = {"chat_id": chat_id, "seq": seq}
        await _mongo(store)._cols.messages.update_one(query, {"$set": {"seq": new_seq}})
        return "behind"


_DAMAGED_FIELDS: dict[str, tuple[str, Any]] = {
    "body_not_json": ("body", "not json {"),
    "body_not_object": ("body", "[1, 2]"),
    "body_wrong_types": ("body", '{"role": 5}'),
    "body_wrong_native_type": ("body", 42),
    "timestamp_wrong_native_type": ("created_us", "not-a-date"),
}


class StandaloneMongoDriver(MongoDriver):
    """The store as a standalone server (no transactions) makes it: its class says so."""

    capabilities: ClassVar[Capabilities] = MongoDriver.capabilities.model_copy(
        update={"transactions": False}
    )

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, use_transactions=False, **options)


class TestMongoContractWithoutTransactions(TestMongoContract):
    """The standalone-server code path (``use_transactions=False``) on the same server.

    The suite reads ``store.capabilities``, so the factory builds a driver subclass whose
    class declares ``transactions=False``, as an open store on a standalone server reports.
    """

    @pytest.fixture
    def store_factory(self, mongo_db: tuple[str, str]) -> Callable[..., Store]:
        url, _ = mongo_db
        return lambda **options: store_for(StandaloneMongoDriver, url, **options)
