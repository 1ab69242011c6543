"""Issue 6, "Done when": best-effort locators under injected faults, cold replicas, counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import UUID, uuid4

import pytest

from threadkeep import Message, MessageNotFound, Reasoning, ToolCall
from threadkeep_memservice import MemServiceStore, locator_write_fault
from threadkeep_memservice.emulator import FaultRule, MemoryService, NotFoundError

READS = {"find_session", "get_session", "get_events"}


@pytest.fixture
def service() -> MemoryService:
    return MemoryService(seed=6)


@pytest.fixture
async def writer(service: MemoryService) -> AsyncIterator[MemServiceStore]:
    """The replica that writes, losing 20 % of its locator writes (seeded)."""
    store = MemServiceStore("memservice://", service=service, faults=[locator_write_fault(0.2)])
    async with store:
        yield store


def cold_replica(service: MemoryService) -> MemServiceStore:
    """Another application instance on the same service: empty caches, no faults."""
    return MemServiceStore("memservice://", service=service)


def _messages(count: int) -> list[Message]:
    return [
        Message(
            role="assistant",
            agui_id=f"m{i}",
            content=f"message {i}",
            tool_calls=[ToolCall(agui_id=f"c{i}", name="f", arguments=f'{{"i": {i}}}')],
            reasonings=[Reasoning(agui_id=f"r{i}", content=f"thought {i}")],
        )
        for i in range(count)
    ]


async def _has_locator(store: MemServiceStore, kind: str, item_id: UUID) -> bool:
    try:
        await store.driver.service.find_session(
            store.driver.space_id, dedup_key=f"{kind}:{item_id}"
        )
    except NotFoundError:
        return False
    return True


async def _append_all(writer: MemServiceStore, chat_id: UUID) -> list[Message]:
    sent = _messages(60)
    stored = [await writer.append_message(chat_id, m) for m in sent[:30]]
    for start in range(30, 60, 10):
        stored += await writer.append_messages(chat_id, sent[start : start + 10])
    return stored


async def test_every_append_succeeds_and_every_message_is_listed(
    writer: MemServiceStore, service: MemoryService
) -> None:
    chat = await writer.create_chat("u", "t")
    stored = await _append_all(writer, chat.chat_id)
    (rule,) = writer.driver._fault_rules
    assert rule.fired > 10, "the fault rule should have cost some locator writes"
    for store in (writer, cold_replica(service)):
        async with store:
            page = await store.list_messages(chat.chat_id, limit=200)
            assert [m.message_id for m in page.items] == [m.message_id for m in stored]
            assert [m.seq for m in page.items] == sorted(m.seq or 0 for m in stored)


async def test_the_writer_finds_everything_it_wrote(writer: MemServiceStore) -> None:
    chat = await writer.create_chat("u", "t")
    for message in await _append_all(writer, chat.chat_id):
        assert await writer.get_message(message.message_id) == message
        assert (
            await writer.get_tool_call(message.tool_calls[0].tool_call_id) == message.tool_calls[0]
        )
        assert (
            await writer.get_reasoning(message.reasonings[0].reasoning_id) == message.reasonings[0]
        )


async def test_a_cold_replica_misses_only_what_lost_its_locator(
    writer: MemServiceStore, service: MemoryService
) -> None:
    chat = await writer.create_chat("u", "t")
    stored = await _append_all(writer, chat.chat_id)
    misses = hits = 0
    async with cold_replica(service) as replica:
        assert (await replica.get_chat(chat.chat_id)).chat_id == chat.chat_id
        for message in stored:
            call, reasoning = message.tool_calls[0], message.reasonings[0]
            lookups = [
                ("message", message.message_id, replica.get_message, message),
                ("tool_call", call.tool_call_id, replica.get_tool_call, call),
                ("reasoning", reasoning.reasoning_id, replica.get_reasoning, reasoning),
            ]
            for kind, item_id, lookup, expected in lookups:
                if await _has_locator(writer, kind, item_id):
                    assert await lookup(item_id) == expected, f"{kind} {item_id} not found"
                    hits += 1
                else:
                    with pytest.raises(MessageNotFound):
                        await lookup(item_id)
                    misses += 1
    assert misses > 0
    assert hits > misses


async def test_an_update_through_a_cold_replica_never_reaches_another_message(
    writer: MemServiceStore, service: MemoryService
) -> None:
    chat = await writer.create_chat("u", "t")
    stored = await _append_all(writer, chat.chat_id)
    async with cold_replica(service) as replica:
        for message in stored[:20]:
            try:
                updated = await replica.update_message(message.message_id, content="edited")
            except MessageNotFound:
                assert not await _has_locator(writer, "message", message.message_id)
                continue
            assert updated.message_id == message.message_id
    page = await writer.list_messages(chat.chat_id, limit=200)
    edited = {m.message_id for m in page.items if m.content == "edited"}
    assert edited <= {m.message_id for m in stored[:20]}


async def test_a_locator_pointing_at_a_deleted_entity_resolves_to_not_found(
    service: MemoryService,
) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        hidden, kept = await store.append_messages(chat.chat_id, _messages(2))
        await store.delete_messages(chat.chat_id, [hidden.message_id])
        gone = await store.create_chat("u", "t-gone")
        (in_deleted_chat,) = await store.append_messages(gone.chat_id, _messages(1))
        await store.delete_chat(gone.chat_id)
    async with cold_replica(service) as replica:
        for message in (hidden, in_deleted_chat):
            assert await _has_locator(replica, "message", message.message_id)
            with pytest.raises(MessageNotFound):
                await replica.get_message(message.message_id)
            with pytest.raises(MessageNotFound):
                await replica.get_tool_call(message.tool_calls[0].tool_call_id)
        assert (await replica.get_message(kept.message_id)).content == kept.content


async def _point(
    store: MemServiceStore, kind: str, item_id: UUID, metadata: dict[str, str]
) -> None:
    """Overwrite a locator's target through the back door."""
    service, space = store.driver.service, store.driver.space_id
    session = await service.find_session(space, dedup_key=f"{kind}:{item_id}")
    await service.update_session(space, session.session_id, metadata={"kind": kind, **metadata})


async def test_a_locator_pointing_at_nothing_or_elsewhere_resolves_to_not_found(
    service: MemoryService,
) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        first, second, third = await store.append_messages(chat.chat_id, _messages(3))
        session_id = store.driver.registry.get_session_id(chat.chat_id)
        assert session_id is not None
        where = {"chat_id": str(chat.chat_id), "session_id": session_id}
        await _point(store, "message", first.message_id, where | {"event_key": "m:" + str(uuid4())})
        await _point(
            store, "message", second.message_id, where | {"session_id": "0" * 24, "event_key": "x"}
        )
        other = await store.driver.locators.read("message", third.message_id)
        assert other is not None
        assert other.event_key is not None
        await _point(store, "message", third.message_id, where | {"event_key": "a:" + "0" * 64})
        call = first.tool_calls[0].tool_call_id
        await _point(store, "tool_call", call, where | {"event_key": other.event_key})
    async with cold_replica(service) as replica:
        for message in (first, second, third):
            with pytest.raises(MessageNotFound):
                await replica.get_message(message.message_id)
        with pytest.raises(MessageNotFound):
            await replica.get_tool_call(call)
        assert [m.message_id for m in (await replica.list_messages(chat.chat_id)).items] == [
            first.message_id,
            second.message_id,
            third.message_id,
        ]


async def test_a_locator_repointed_at_another_message_never_returns_it(
    service: MemoryService,
) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        victim, other = await store.append_messages(chat.chat_id, _messages(2))
        target = await store.driver.locators.read("message", other.message_id)
        assert target is not None
        assert target.event_key is not None
        where = {"chat_id": str(chat.chat_id), "session_id": target.session_id}
        await _point(store, "message", victim.message_id, where | {"event_key": target.event_key})
    async with cold_replica(service) as replica:
        with pytest.raises(MessageNotFound):
            await replica.get_message(victim.message_id)
        with pytest.raises(MessageNotFound):
            await replica.update_message(victim.message_id, content="must not land anywhere")
        assert (await replica.get_message(other.message_id)).content == other.content


@pytest.mark.parametrize("history", [3, 450])
async def test_a_cold_lookup_by_uuid_is_three_point_reads(
    service: MemoryService, history: int
) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        sent = _messages(history)
        stored = []
        for start in range(0, history, 150):
            stored += await store.append_messages(chat.chat_id, sent[start : start + 150])
    target = stored[history // 2]
    async with cold_replica(service) as replica:
        for lookup, item_id in [
            (replica.get_message, target.message_id),
            (replica.get_tool_call, target.tool_calls[0].tool_call_id),
            (replica.get_reasoning, target.reasonings[0].reasoning_id),
        ]:
            service.reset_counts()
            await lookup(item_id)
            assert dict(service.calls) == {"find_session": 1, "get_session": 1, "get_events": 1}
            assert not [c for c in service.call_log if c.operation.startswith("list_")]


async def test_a_cold_chat_lookup_is_a_point_read_even_when_its_locator_was_lost(
    service: MemoryService,
) -> None:
    lose_chat_locators = FaultRule(
        "create_session", when=lambda a: str(a.get("description")).endswith("/chat/")
    )
    async with MemServiceStore(
        "memservice://", service=service, faults=[lose_chat_locators]
    ) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="hi"))
    assert lose_chat_locators.fired == 1
    async with cold_replica(service) as replica:
        service.reset_counts()
        assert (await replica.get_chat(chat.chat_id)).chat_id == chat.chat_id
        listings = [c for c in service.call_log if c.operation == "list_sessions"]
        assert [c.args["description_prefix"] for c in listings] == [f"//chat/{chat.chat_id}/"]
        assert service.calls["find_session"] == 1
        assert service.calls["get_session"] == 1
        assert service.calls["create_session"] == 1, "the lost locator is written again"
    async with cold_replica(service) as again:
        service.reset_counts()
        assert [m.content for m in (await again.list_messages(chat.chat_id)).items] == ["hi"]
        assert "list_sessions" not in service.calls, "the repaired locator answers now"


async def test_locators_never_appear_in_chat_listings(writer: MemServiceStore) -> None:
    chats = [await writer.create_chat("u", f"t{i}") for i in range(3)]
    for chat in chats:
        await writer.append_messages(chat.chat_id, _messages(5))
    listed = await writer.list_chats()
    assert sorted(c.chat_id for c in listed.items) == sorted(c.chat_id for c in chats)


async def test_purge_removes_the_chat_with_its_locators(service: MemoryService) -> None:
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        (message,) = await store.append_messages(chat.chat_id, _messages(1))
        await store.delete_chat(chat.chat_id)
        receipt = await store.erase_user("u")
        assert receipt.stores["hot"]["chats"] == 1
        assert receipt.stores["hot"]["messages"] == 1
        assert receipt.stores["hot"]["locators"] == 4
        for kind, item_id in [
            ("chat", chat.chat_id),
            ("message", message.message_id),
            ("tool_call", message.tool_calls[0].tool_call_id),
        ]:
            assert not await _has_locator(store, kind, item_id)


async def test_erasing_a_user_removes_locators_that_outlived_their_chat() -> None:
    clock = [1000.0]
    service = MemoryService(clock=lambda: clock[0], soft_delete_ttl=60)
    async with MemServiceStore("memservice://", service=service) as store:
        chat = await store.create_chat("u", "t")
        (message,) = await store.append_messages(chat.chat_id, _messages(1))
        await store.delete_chat(chat.chat_id)
        clock[0] += 61
        assert await _has_locator(store, "message", message.message_id)
        receipt = await store.erase_user("u")
        hot = receipt.stores["hot"]
        assert {kind: count for kind, count in hot.items() if count} == {"locators": 4}
        assert receipt.stores["archive"] == {"bundles": 0, "messages": 0, "steps": 0}
        assert not await _has_locator(store, "message", message.message_id)
        assert not await _has_locator(store, "chat", chat.chat_id)


async def test_a_nested_update_on_a_cold_replica_needs_no_message_locator(
    service: MemoryService,
) -> None:
    # Regression: a tool call found through its own locator, in a message whose `message:`
    # locator was lost, could never be updated: the compare-and-set looked the message up
    # again by that locator, got "changed" 16 times and raised Conflict with no writer about.
    lose_message_locators = FaultRule(
        "create_session", when=lambda a: str(a.get("description")).endswith("/message/")
    )
    with_agui, without_agui = _messages(2)
    without_agui.agui_id = None  # its head event is keyed by message_id instead
    async with MemServiceStore(
        "memservice://", service=service, faults=[lose_message_locators]
    ) as store:
        chat = await store.create_chat("u", "t")
        stored = await store.append_messages(chat.chat_id, [with_agui, without_agui])
    assert lose_message_locators.fired == 2
    async with cold_replica(service) as replica:
        for message in stored:
            assert not await _has_locator(replica, "message", message.message_id)
            call, reasoning = message.tool_calls[0], message.reasonings[0]
            done = await replica.update_tool_call(call.tool_call_id, content="", status="complete")
            assert (done.content, done.status) == ("", "complete")
            thought = await replica.update_reasoning(reasoning.reasoning_id, content="revised")
            assert thought.content == "revised"
    async with cold_replica(service) as reader:
        for message in stored:
            assert (await reader.get_tool_call(message.tool_calls[0].tool_call_id)).content == ""
            reasoning = await reader.get_reasoning(message.reasonings[0].reasoning_id)
            assert reasoning.content == "revised"
