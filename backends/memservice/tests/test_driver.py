"""The driver's own rules: placeholder codec, large bodies, atomic batches, deletes, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from threadkeep import (
    BackendUnavailable,
    ChatNotFound,
    Conflict,
    InvalidArgument,
    Message,
    MessageFilter,
    Reasoning,
    ToolCall,
    open_store,
)
from threadkeep_memservice import MemServiceDriver, MemServiceStore, decode_strings, encode_strings
from threadkeep_memservice.emulator import (
    FaultAction,
    FaultRule,
    MemoryService,
    NewEvent,
    ValidationError,
)

from .backdoor import all_events, chat_sessions

ZW = "\u200b"


@pytest.fixture
def service() -> MemoryService:
    return MemoryService()


@pytest.fixture
async def store(service: MemoryService) -> AsyncIterator[MemServiceStore]:
    async with MemServiceStore("memservice://", service=service) as opened:
        yield opened


async def _events_of(store: MemServiceStore, chat_id: Any) -> list[Any]:
    session_id = store.driver.registry.get_session_id(chat_id)
    assert session_id is not None
    return await all_events(store.driver.service, store.driver.space_id, session_id)


@pytest.mark.parametrize(
    "text",
    ["", ZW, ZW + ZW, ZW + "x", "x" + ZW, " ", "\x00"],
    ids=["empty", "placeholder", "two-placeholders", "leading", "trailing", "space", "nul"],
)
def test_the_placeholder_codec_is_a_bijection(text: str) -> None:
    stored = encode_strings({text: [text, {"k": text}]})
    assert all(s for s in _strings(stored)), f"an empty string reached storage: {stored!r}"
    assert decode_strings(stored) == {text: [text, {"k": text}]}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value.keys(), *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_empty_message_tool_arguments_and_reasoning_round_trip_exactly(
    store: MemServiceStore, service: MemoryService
) -> None:
    chat = await store.create_chat("u", "t", name="", metadata={"": ""})
    sent = Message(
        role="assistant",
        content="",
        metadata={"": "", "list": ["", ZW]},
        tool_calls=[ToolCall(name="", arguments="", content="")],
        reasonings=[Reasoning(content="", name="", encrypted_value="")],
    )
    literal = Message(
        role="user",
        content=ZW,
        tool_calls=[ToolCall(arguments=ZW + ZW)],
        reasonings=[Reasoning(content=ZW + "think")],
    )
    stored = await store.append_messages(chat.chat_id, [sent, literal])
    async with MemServiceStore("memservice://", service=service) as cold:
        page = await cold.list_messages(chat.chat_id)
        assert page.items == stored
        assert (await cold.get_chat(chat.chat_id)).metadata == {"": ""}
        again = await cold.get_message(stored[0].message_id)
        assert again.content == ""
        assert again.tool_calls[0].arguments == ""
        assert again.reasonings[0].content == ""
        assert (await cold.get_message(stored[1].message_id)).content == ZW
    for event in await _events_of(store, chat.chat_id):
        assert all(_strings(event.body)), "an empty string reached the service"
    # The codec is what makes it pass: the service refuses the same body unencoded.
    session_id = store.driver.registry.get_session_id(chat.chat_id)
    assert session_id is not None
    with pytest.raises(ValidationError):
        await service.create_events(
            store.driver.space_id, session_id, [NewEvent("message", {"content": ""})]
        )


async def test_a_16_mib_message_is_chunked_and_read_back_exactly(store: MemServiceStore) -> None:
    chat = await store.create_chat("u", "t")
    content = ("\x00日本" + "x" * 1021) * (16 * 1024 * 1024 // 1030)
    big = await store.append_message(
        chat.chat_id, Message(role="user", content=content, agui_id="big")
    )
    small = await store.append_message(chat.chat_id, Message(role="user", content="after"))
    events = await _events_of(store, chat.chat_id)
    assert sum(e.event_type == "chunk" for e in events) > 16
    assert [e.event_type for e in events if e.event_type != "chunk"] == ["message", "message"]
    assert small.seq is not None
    assert big.seq is not None
    assert small.seq > big.seq
    assert (await store.get_message(big.message_id)).content == content
    page = await store.list_messages(chat.chat_id)
    assert [m.content for m in page.items] == [content, "after"]
    assert (
        await store.append_message(
            chat.chat_id, Message(role="user", content=content, agui_id="big")
        )
    ).message_id == big.message_id
    edited = await store.update_message(big.message_id, content=content[:-1] + "!")
    assert (await store.get_message(big.message_id)).content == edited.content
    chunks = [e for e in await _events_of(store, chat.chat_id) if e.event_type == "chunk"]
    assert len(chunks) == sum(e.event_type == "chunk" for e in events), "old chunks were left"
    shrunk = await store.update_message(big.message_id, content="short now")
    assert shrunk.content == "short now"
    assert not [e for e in await _events_of(store, chat.chat_id) if e.event_type == "chunk"]


async def test_a_failed_batch_writes_nothing_and_a_lost_answer_retries_idempotently(
    store: MemServiceStore, service: MemoryService
) -> None:
    chat = await store.create_chat("u", "t")
    batch = [Message(role="user", agui_id=f"b{i}", content=f"{i}") for i in range(5)]
    service.faults.add(FaultRule("create_events", FaultAction.FAIL, times=1))
    with pytest.raises(BackendUnavailable):
        await store.append_messages(chat.chat_id, batch)
    assert (await store.list_messages(chat.chat_id)).items == []
    service.faults.add(FaultRule("create_events", FaultAction.TIMEOUT, applied=True, times=1))
    with pytest.raises(BackendUnavailable, match="may have happened"):
        await store.append_messages(chat.chat_id, batch)
    retried = await store.append_messages(chat.chat_id, batch)
    page = await store.list_messages(chat.chat_id)
    assert [m.message_id for m in page.items] == [m.message_id for m in retried]
    assert [m.content for m in page.items] == ["0", "1", "2", "3", "4"]


async def test_a_reader_never_sees_part_of_a_batch(store: MemServiceStore) -> None:
    chat = await store.create_chat("u", "t")
    seen: list[int] = []

    async def write() -> None:
        for round_ in range(10):
            batch = [Message(role="user", content=f"{round_}-{i}") for i in range(5)]
            await store.append_messages(chat.chat_id, batch)

    async def read() -> None:
        for _ in range(40):
            seen.append(len((await store.list_messages(chat.chat_id, limit=200)).items))
            await asyncio.sleep(0)

    await asyncio.gather(write(), read())
    assert all(count % 5 == 0 for count in seen), seen


async def test_two_replicas_appending_at_once_get_strictly_increasing_seqs(
    service: MemoryService,
) -> None:
    async with (
        MemServiceStore("memservice://", service=service) as one,
        MemServiceStore("memservice://", service=service) as two,
    ):
        chat = await one.create_chat("u", "t")
        assert (await two.create_chat("u", "t")).chat_id == chat.chat_id
        sent = [Message(role="user", content=f"{i}") for i in range(40)]
        stored = await asyncio.gather(
            *((one if i % 2 else two).append_message(chat.chat_id, m) for i, m in enumerate(sent))
        )
        page = await two.list_messages(chat.chat_id, limit=200)
    assert len({m.seq for m in stored}) == 40
    assert sorted(m.message_id for m in page.items) == sorted(m.message_id for m in sent)
    assert [m.seq for m in page.items] == sorted(m.seq or 0 for m in stored)


async def test_appends_race_a_delete_without_landing_in_a_deleted_chat(
    service: MemoryService,
) -> None:
    async with (
        MemServiceStore("memservice://", service=service) as one,
        MemServiceStore("memservice://", service=service) as two,
    ):
        chat = await one.create_chat("u", "t")
        await one.append_message(chat.chat_id, Message(role="user", content="warm the cache"))
        await two.delete_chat(chat.chat_id)
        with pytest.raises(ChatNotFound):
            await one.append_message(chat.chat_id, Message(role="user", content="late"))
        await two.restore_chat(chat.chat_id)
        page = await one.list_messages(chat.chat_id)
    assert [m.content for m in page.items] == ["warm the cache"]


async def test_a_lost_session_delete_is_finished_by_the_next_create(
    store: MemServiceStore, service: MemoryService
) -> None:
    chat = await store.create_chat("u", "t")
    service.faults.add(FaultRule("delete_session", FaultAction.FAIL, times=1))
    deleted = await store.delete_chat(chat.chat_id)
    assert deleted.deleted_at is not None
    assert await store.find_chat("u", "t") is None
    with pytest.raises(ChatNotFound):
        await store.list_messages(chat.chat_id)
    fresh = await store.create_chat("u", "t")
    assert fresh.chat_id != chat.chat_id
    sessions = await chat_sessions(service, store.driver.space_id)
    assert sorted(s.deleted_at is not None for s in sessions) == [False, True]
    with pytest.raises(Conflict, match="another live chat"):
        await store.restore_chat(chat.chat_id)


async def test_deleted_chats_disappear_after_the_service_ttl() -> None:
    clock = [1000.0]
    service = MemoryService(clock=lambda: clock[0], soft_delete_ttl=3600)
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        await store.delete_chat(chat.chat_id)
        assert (await store.restore_chat(chat.chat_id)).deleted_at is None
        await store.delete_chat(chat.chat_id)
        clock[0] += 3601
        with pytest.raises(ChatNotFound):
            await store.restore_chat(chat.chat_id)


async def test_service_errors_never_escape(store: MemServiceStore, service: MemoryService) -> None:
    chat = await store.create_chat("u", "t")
    service.faults.add(FaultRule("list_events", FaultAction.FAIL))
    with pytest.raises(BackendUnavailable, match="retry"):
        await store.list_messages(chat.chat_id)
    service.faults.clear()
    service.faults.add(FaultRule("get_session", FaultAction.TIMEOUT))
    with pytest.raises(BackendUnavailable):
        await store.get_chat(chat.chat_id)


async def test_filters_scan_only_the_chat(store: MemServiceStore, service: MemoryService) -> None:
    chat = await store.create_chat("u", "t")
    other = await store.create_chat("u", "t2")
    await store.append_messages(other.chat_id, [Message(role="tool") for _ in range(5)])
    await store.append_messages(
        chat.chat_id, [Message(role="user" if i % 3 else "tool", content=f"{i}") for i in range(30)]
    )
    await store.start_over(chat.chat_id)
    service.reset_counts()
    tools = await store.list_messages(chat.chat_id, message_filter=MessageFilter(roles={"tool"}))
    assert [m.content for m in tools.items] == [str(i) for i in range(0, 30, 3)]
    assert "list_sessions" not in service.calls
    boundary = await store.list_messages(
        chat.chat_id, message_filter=MessageFilter(kinds={"boundary"})
    )
    assert len(boundary.items) == 1


async def test_open_store_finds_the_driver_by_scheme() -> None:
    store = open_store("memservice://plugin-test", cache_size=5)
    assert isinstance(store.driver, MemServiceDriver)
    assert store.driver.cache_size == 5
    with pytest.raises(InvalidArgument):
        MemServiceStore("memservice://a/b")
    with pytest.raises(InvalidArgument):
        MemServiceStore("memservice://", cache_size=0)


async def test_two_named_stores_share_one_emulator() -> None:
    async with (
        open_store("memservice://shared-test") as one,
        open_store("memservice://shared-test") as two,
    ):
        assert isinstance(one.driver, MemServiceDriver)
        assert isinstance(two.driver, MemServiceDriver)
        assert one.driver.service is two.driver.service
        chat = await one.create_chat("u", "t")
        await one.append_message(chat.chat_id, Message(role="user", content="hi"))
        assert [m.content for m in (await two.list_messages(chat.chat_id)).items] == ["hi"]
        cursor_from_one = (await one.list_chats(limit=1)).next_cursor
        assert cursor_from_one is None


async def test_the_registry_cache_is_bounded(service: MemoryService) -> None:
    async with MemServiceStore("memservice://", service=service, cache_size=2) as store:
        chats = [await store.create_chat("u", f"t{i}") for i in range(3)]
        service.reset_counts()
        await store.get_chat(chats[2].chat_id)
        assert "find_session" not in service.calls, "a recent chat is cached"
        await store.get_chat(chats[0].chat_id)
        assert service.calls["find_session"] == 1, "the oldest chat was evicted"
