"""``erase_user``'s receipt: both stores always listed, every record counted once."""

from __future__ import annotations

from threadkeep import Archiver, FileArchive, Message, Store


async def _chat_with(store: Store, user: str, thread: str, n: int) -> None:
    chat = await store.create_chat(user, thread)
    await store.append_messages(
        chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(n)]
    )


async def test_unknown_person_gets_zeros_under_hot_and_archive(store: Store) -> None:
    receipt = await store.erase_user("nobody")
    assert set(receipt.stores) == {"hot", "archive"}
    assert set(receipt.stores["hot"].values()) == {0}
    assert {"chats", "messages"} <= set(receipt.stores["hot"])
    assert receipt.stores["archive"] == {"bundles": 0, "messages": 0, "steps": 0}


async def test_archived_chat_counts_its_bundle_rows_under_archive(
    store: Store, archive: FileArchive
) -> None:
    await _chat_with(store, "u", "cold", 4)
    chat = await store.find_chat("u", "cold")
    assert chat is not None
    await Archiver(store, archive).archive_chat(chat.chat_id)
    receipt = await store.erase_user("u")
    assert receipt.stores["archive"] == {"bundles": 1, "messages": 4, "steps": 0}
    assert (receipt.stores["hot"]["chats"], receipt.stores["hot"]["messages"]) == (1, 0)


async def test_rehydrated_chat_is_not_counted_twice(store: Store, archive: FileArchive) -> None:
    await _chat_with(store, "u", "warm", 3)
    chat = await store.find_chat("u", "warm")
    assert chat is not None
    await Archiver(store, archive).archive_chat(chat.chat_id)
    assert len((await store.list_messages(chat.chat_id)).items) == 3  # rehydrates
    await store.append_message(chat.chat_id, Message(role="user", content="new"))
    assert (await store.get_chat(chat.chat_id)).archive_ref is not None
    receipt = await store.erase_user("u")
    assert receipt.stores["hot"]["messages"] == 4, "the hot rows, each once"
    assert receipt.stores["archive"] == {"bundles": 1, "messages": 0, "steps": 0}, (
        "the bundle's rows are copies of the hot rows: counting them again double counts"
    )
