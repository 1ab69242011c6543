"""Schema, indexes, keyset queries and capabilities as the driver declares them."""

from __future__ import annotations

from typing import Any

from pymongo import monitoring

from threadkeep import ChatFilter, Message, MessageFilter, Role
from threadkeep_mongodb import MongoStore

MakeStore = Any


class _Commands(monitoring.CommandListener):
    """Records every command the store's client sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        return None

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        return None

    def finds(self, collection: str) -> list[dict[str, Any]]:
        return [c for name, c in self.sent if name == "find" and c["find"] == collection]


def _index(info: dict[str, Any], keys: list[tuple[str, int]]) -> dict[str, Any]:
    matches = [spec for spec in info.values() if list(spec["key"]) == keys]
    assert matches, f"no index on {keys}: {sorted(info)}"
    return matches[0]


async def test_indexes_are_created(store: MongoStore, raw_db: Any) -> None:
    chats = await raw_db["chats"].index_information()
    dedup = _index(chats, [("dedup_key", 1)])
    assert dedup["unique"] is True
    assert dedup["partialFilterExpression"] == {"live": True}
    messages = await raw_db["messages"].index_information()
    assert _index(messages, [("chat_id", 1), ("seq", 1)])["unique"] is True
    agui = _index(messages, [("chat_id", 1), ("agui_id", 1)])
    assert agui["unique"] is True
    assert agui["partialFilterExpression"] == {"agui_id": {"$type": "string"}}
    _index(messages, [("tool_calls.tool_call_id", 1)])
    _index(messages, [("chat_id", 1), ("tool_calls.agui_id", 1), ("seq", -1)])
    _index(messages, [("reasonings.reasoning_id", 1)])
    assert _index(await raw_db["chunks"].index_information(), [("body_id", 1), ("n", 1)])["unique"]


async def test_reopening_keeps_indexes_and_data(make_store: MakeStore) -> None:
    async with make_store() as first:
        chat = await first.create_chat("u", "t")
        await first.append_message(chat.chat_id, Message(role="user", content="x"))
    async with make_store() as second:
        assert len((await second.list_messages(chat.chat_id)).items) == 1


async def test_sharded_option_makes_agui_index_non_unique(
    make_store: MakeStore, raw_db: Any
) -> None:
    async with make_store(collection_prefix="sharded_", unique_agui_index=False) as store:
        chat = await store.create_chat("u", "t")
        first = await store.append_message(chat.chat_id, Message(role="user", agui_id="a"))
        again = await store.append_message(chat.chat_id, Message(role="user", agui_id="a"))
        assert again.message_id == first.message_id, "agui_ids stay unique through the append"
    agui = _index(
        await raw_db["sharded_messages"].index_information(), [("chat_id", 1), ("agui_id", 1)]
    )
    assert "unique" not in agui
    assert await raw_db["messages"].count_documents({}) == 0, "the prefix keeps stores apart"


async def test_pages_are_keyset_queries_never_skip(make_store: MakeStore) -> None:
    commands = _Commands()
    async with make_store(client_options={"event_listeners": [commands]}) as store:
        chat = await store.create_chat("u", "t")
        await store.append_messages(
            chat.chat_id, [Message(role="user", content=str(i)) for i in range(30)]
        )
        for other in range(3):
            await store.create_chat("u", f"other-{other}")
        commands.sent.clear()
        page = await store.list_messages(chat.chat_id, limit=10)
        deeper = await store.list_messages(chat.chat_id, limit=10, cursor=page.next_cursor)
        roles = MessageFilter(roles=frozenset({Role.USER}))
        await store.list_messages(chat.chat_id, limit=5, message_filter=roles)
        chats = await store.list_chats(ChatFilter(user_id="u"), limit=2)
        await store.list_chats(ChatFilter(user_id="u"), limit=2, cursor=chats.next_cursor)
    assert [m.seq for m in deeper.items] == list(range(11, 21))
    sent = [c for _, c in commands.sent]
    assert all("skip" not in c for c in sent), "pages never use skip()"
    message_finds = commands.finds("messages")
    assert [f["sort"] for f in message_finds] == [{"seq": -1}] * 3
    assert message_finds[1]["filter"]["seq"] == {"$lt": 21}
    assert all(f["limit"] in {11, 6} for f in message_finds), "one row past the page, no more"
    chat_finds = commands.finds("chats")
    paged = [f for f in chat_finds if f.get("sort") == {"seq": -1}]
    assert len(paged) == 2
    assert paged[0]["limit"] == 3
    assert {"seq": {"$lt": 3}} in paged[1]["filter"]["$and"], "chat pages are keyset too"


async def test_capabilities_on_a_replica_set(store: MongoStore, make_store: MakeStore) -> None:
    assert type(store.driver).capabilities.transactions is True
    assert store.capabilities.transactions is True, "the test server is a one-node replica set"
    assert store.capabilities.steps
    assert store.capabilities.archive
    async with make_store(use_transactions=False) as plain:
        assert plain.capabilities.transactions is False
        assert "standalone" in plain.capabilities.notes["transactions"]
