"""The memory-service emulator on its own: the rules the driver has to live with."""

from __future__ import annotations

import asyncio

import pytest

from threadkeep_memservice.emulator import (
    MAX_BATCH,
    MAX_DOCUMENT_BYTES,
    ConflictError,
    DedupKeyTaken,
    DocumentTooLarge,
    DuplicateEventKey,
    EventPatch,
    FaultAction,
    FaultRule,
    MemoryService,
    NewEvent,
    NotFoundError,
    ServiceTimeout,
    ServiceUnavailable,
    ValidationError,
    document_size,
    named_service,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def _space(service: MemoryService) -> str:
    return (await service.create_space(dedup_key="app")).space_id


def _event(text: str = "x", key: str | None = None) -> NewEvent:
    return NewEvent(event_type="message", body={"text": text}, dedup_key=key)


async def test_create_with_a_known_dedup_key_adopts_the_session() -> None:
    service = MemoryService()
    space = await _space(service)
    first, created = await service.create_session(space, dedup_key="k", metadata={"n": 1})
    again, created_again = await service.create_session(space, dedup_key="k", metadata={"n": 2})
    assert (created, created_again) == (True, False)
    assert again.session_id == first.session_id
    assert again.metadata == {"n": 1}, "adoption must not change the stored session"
    assert (await service.find_session(space, dedup_key="k")).session_id == first.session_id
    assert (await service.create_space(dedup_key="app")).space_id == space


async def test_soft_delete_frees_the_key_and_undelete_refuses_a_taken_key() -> None:
    service = MemoryService()
    space = await _space(service)
    old, _ = await service.create_session(space, dedup_key="k")
    await service.delete_session(space, old.session_id)
    with pytest.raises(NotFoundError):
        await service.find_session(space, dedup_key="k")
    with pytest.raises(NotFoundError):
        await service.get_session(space, old.session_id)
    assert (await service.get_session(space, old.session_id, include_deleted=True)).deleted_at
    new, created = await service.create_session(space, dedup_key="k")
    assert created
    assert new.session_id != old.session_id
    with pytest.raises(DedupKeyTaken):
        await service.undelete_session(space, old.session_id)
    await service.delete_session(space, new.session_id)
    restored = await service.undelete_session(space, old.session_id)
    assert restored.deleted_at is None
    assert (await service.find_session(space, dedup_key="k")).session_id == old.session_id


@pytest.mark.parametrize(
    "metadata",
    [{"name": ""}, {"nested": {"list": ["a", ""]}}, {"": "empty key"}],
    ids=["value", "nested-list", "key"],
)
async def test_empty_strings_are_rejected_in_metadata(metadata: dict[str, object]) -> None:
    service = MemoryService()
    space = await _space(service)
    with pytest.raises(ValidationError, match="at least 1 character"):
        await service.create_session(space, description="//x/", metadata=metadata)
    assert not await service.list_sessions(space, description_prefix="//x/")


async def test_empty_strings_are_rejected_everywhere_else() -> None:
    service = MemoryService()
    space = await _space(service)
    for kwargs in ({"dedup_key": ""}, {"description": ""}, {"participants": [""]}):
        with pytest.raises(ValidationError):
            await service.create_session(space, **kwargs)  # type: ignore[arg-type]
    session, _ = await service.create_session(space, description="//s/")
    with pytest.raises(ValidationError, match="at least 1 character"):
        await service.create_events(space, session.session_id, [_event("ok"), _event("")])
    with pytest.raises(ValidationError):
        await service.create_events(space, session.session_id, [NewEvent("", {"a": "b"})])
    assert await service.list_events(space, session.session_id) == [], "a rejected batch wrote"


async def test_session_versions_are_checked_on_update() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/", metadata={"n": 1})
    updated = await service.update_session(
        space, session.session_id, if_match=session.version, metadata={"n": 2}
    )
    assert updated.version == session.version + 1
    with pytest.raises(ConflictError):
        await service.update_session(
            space, session.session_id, if_match=session.version, metadata={"n": 3}
        )
    assert (await service.get_session(space, session.session_id)).metadata == {"n": 2}


async def test_event_writes_grow_the_session_version_and_guard_conditional_writes() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    _, version = await service.create_events(
        space, session.session_id, [_event()], if_match=session.version
    )
    assert version == session.version + 1
    with pytest.raises(ConflictError):
        await service.create_events(space, session.session_id, [_event()], if_match=session.version)
    with pytest.raises(ConflictError):
        await service.update_session(space, session.session_id, if_match=session.version)
    assert len(await service.list_events(space, session.session_id)) == 1


async def test_event_version_tokens_are_checked_on_patch() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    (event,), _ = await service.create_events(space, session.session_id, [_event("a")])
    (patched,), _ = await service.patch_events(
        space,
        session.session_id,
        [EventPatch(event.event_id, {"text": "b"}, if_match=event.version)],
    )
    assert patched.version != event.version
    stale = EventPatch(event.event_id, {"text": "c"}, if_match=event.version)
    with pytest.raises(ConflictError):
        await service.patch_events(space, session.session_id, [stale])
    (read,) = await service.get_events(space, session.session_id, event_ids=[event.event_id])
    assert read.body == {"text": "b"}


async def test_sequence_ids_follow_commit_order_and_batches_are_consecutive() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")

    async def write(n: int) -> list[int]:
        created, _ = await service.create_events(
            space, session.session_id, [_event(f"{n}-{i}") for i in range(3)]
        )
        return [e.sequence_id for e in created]

    batches = await asyncio.gather(*(write(n) for n in range(10)))
    for ids in batches:
        assert ids == list(range(ids[0], ids[0] + 3)), "a batch got non-consecutive ids"
    listed = [e.sequence_id for e in await service.list_events(space, session.session_id)]
    assert listed == sorted(listed) == list(range(1, 31))


async def test_explicit_sequence_ids_import_history() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    imported = [NewEvent("message", {"i": i}, sequence_id=s) for i, s in enumerate((4, 9))]
    await service.create_events(space, session.session_id, imported)
    with pytest.raises(ConflictError, match="in use"):
        await service.create_events(
            space, session.session_id, [NewEvent("message", {"i": 3}, sequence_id=9)]
        )
    (after,), _ = await service.create_events(space, session.session_id, [_event()])
    assert after.sequence_id == 10


async def test_duplicate_event_keys_reject_the_whole_batch() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    await service.create_events(space, session.session_id, [_event("a", key="k1")])
    with pytest.raises(DuplicateEventKey) as info:
        await service.create_events(
            space, session.session_id, [_event("b", key="k2"), _event("c", key="k1")]
        )
    assert info.value.keys == ("k1",)
    with pytest.raises(DuplicateEventKey):
        await service.create_events(
            space, session.session_id, [_event("d", key="k3"), _event("e", key="k3")]
        )
    assert [e.dedup_key for e in await service.list_events(space, session.session_id)] == ["k1"]


async def test_soft_deleted_records_expire_after_the_ttl() -> None:
    clock = FakeClock()
    service = MemoryService(clock=clock, soft_delete_ttl=60)
    space = await _space(service)
    session, _ = await service.create_session(space, dedup_key="k", description="//s/")
    created, _ = await service.create_events(space, session.session_id, [_event("a"), _event("b")])
    await service.delete_events(space, session.session_id, [created[0].event_id])
    await service.delete_session(space, session.session_id)
    clock.now += 59
    kept = await service.get_session(space, session.session_id, include_deleted=True)
    assert kept.deleted_at is not None
    assert len(await service.list_events(space, session.session_id, include_deleted=True)) == 2
    clock.now += 2
    with pytest.raises(NotFoundError):
        await service.get_session(space, session.session_id, include_deleted=True)
    with pytest.raises(NotFoundError):
        await service.undelete_session(space, session.session_id)
    assert not await service.list_sessions(space, description_prefix="//s/", include_deleted=True)


async def test_a_soft_deleted_event_expires_while_its_session_lives() -> None:
    clock = FakeClock()
    service = MemoryService(clock=clock, soft_delete_ttl=60)
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    (event,), _ = await service.create_events(space, session.session_id, [_event("a", key="k")])
    await service.delete_events(space, session.session_id, [event.event_id])
    assert await service.list_events(space, session.session_id) == []
    assert await service.get_events(space, session.session_id, dedup_keys=["k"]) == []
    clock.now += 61
    assert await service.list_events(space, session.session_id, include_deleted=True) == []


async def test_batches_hold_at_most_200() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    with pytest.raises(ValidationError, match="batch limit"):
        await service.create_events(space, session.session_id, [_event() for _ in range(201)])
    assert await service.list_events(space, session.session_id) == []
    created, _ = await service.create_events(
        space, session.session_id, [_event() for _ in range(MAX_BATCH)]
    )
    with pytest.raises(ValidationError, match="batch limit"):
        await service.get_events(space, session.session_id, event_ids=["x"] * 201)
    patches = [EventPatch(e.event_id, {"text": "y"}) for e in created] + [
        EventPatch("extra", {"text": "z"})
    ]
    with pytest.raises(ValidationError, match="batch limit"):
        await service.patch_events(space, session.session_id, patches)
    with pytest.raises(ValidationError):
        await service.list_events(space, session.session_id, limit=201)


async def test_documents_over_one_mebibyte_are_refused() -> None:
    service = MemoryService()
    space = await _space(service)
    session, _ = await service.create_session(space, description="//s/")
    body = {"text": "x" * (MAX_DOCUMENT_BYTES - 11)}
    assert document_size(body) == MAX_DOCUMENT_BYTES
    await service.create_events(space, session.session_id, [NewEvent("message", body)])
    with pytest.raises(DocumentTooLarge):
        await service.create_events(
            space, session.session_id, [NewEvent("message", {"text": body["text"] + "y"})]
        )
    with pytest.raises(DocumentTooLarge):
        await service.update_session(space, session.session_id, metadata=body | {"more": "y"})


async def test_there_is_no_query_across_sessions() -> None:
    service = MemoryService()
    space = await _space(service)
    one, _ = await service.create_session(space, description="//a/")
    two, _ = await service.create_session(space, description="//b/")
    await service.create_events(space, one.session_id, [_event("a", key="k")])
    assert await service.get_events(space, two.session_id, dedup_keys=["k"]) == []
    assert await service.list_events(space, two.session_id) == []
    with pytest.raises(ValidationError, match="description_prefix or participant"):
        await service.list_sessions(space)


async def test_listing_filters_by_description_prefix_and_participant() -> None:
    service = MemoryService()
    space = await _space(service)
    made = []
    for description, who in [("//chat/1/", "p1"), ("//chat/2/", "p2"), ("//loc/1/", "p1")]:
        made.append(
            (await service.create_session(space, description=description, participants=[who]))[0]
        )
    chats = await service.list_sessions(space, description_prefix="//chat/")
    assert [s.session_id for s in chats] == [made[1].session_id, made[0].session_id]
    mine = await service.list_sessions(space, description_prefix="//chat/", participant="p1")
    assert [s.session_id for s in mine] == [made[0].session_id]
    older = await service.list_sessions(space, participant="p1", before=made[2].sequence_id)
    assert [s.session_id for s in older] == [made[0].session_id]


async def test_a_fail_rule_fails_the_call_before_it_happens() -> None:
    service = MemoryService()
    space = await _space(service)
    rule = FaultRule("create_session", FaultAction.FAIL, when=lambda a: a["dedup_key"] == "bad")
    service.faults.add(rule)
    await service.create_session(space, dedup_key="good")
    with pytest.raises(ServiceUnavailable):
        await service.create_session(space, dedup_key="bad")
    with pytest.raises(NotFoundError):
        await service.find_session(space, dedup_key="bad")
    assert rule.fired == 1
    assert service.calls["create_session"] == 2
    assert [c.args["dedup_key"] for c in service.call_log if c.operation == "create_session"] == [
        "good",
        "bad",
    ]


async def test_a_timeout_may_have_happened() -> None:
    service = MemoryService()
    space = await _space(service)
    service.faults.add(FaultRule("create_session", FaultAction.TIMEOUT, applied=True, times=1))
    with pytest.raises(ServiceTimeout):
        await service.create_session(space, dedup_key="lost-answer")
    assert (await service.find_session(space, dedup_key="lost-answer")).dedup_key == "lost-answer"
    service.faults.add(FaultRule("create_session", FaultAction.TIMEOUT, times=1))
    with pytest.raises(ServiceTimeout):
        await service.create_session(space, dedup_key="never-arrived")
    with pytest.raises(NotFoundError):
        await service.find_session(space, dedup_key="never-arrived")


async def test_a_slow_call_still_happens() -> None:
    service = MemoryService()
    space = await _space(service)
    service.faults.add(FaultRule("*", FaultAction.SLOW, delay=0.001, times=2))
    session, _ = await service.create_session(space, description="//s/")
    assert (await service.get_session(space, session.session_id)).session_id == session.session_id


async def test_probabilities_are_reproducible_for_a_seed() -> None:
    async def decisions(seed: int) -> list[bool]:
        service = MemoryService(seed=seed)
        space = await _space(service)
        service.faults.add(FaultRule("create_session", probability=0.3))
        outcomes = []
        for i in range(60):
            try:
                await service.create_session(space, dedup_key=f"k{i}")
                outcomes.append(True)
            except ServiceUnavailable:
                outcomes.append(False)
        return outcomes

    first, second, other = await decisions(7), await decisions(7), await decisions(8)
    assert first == second
    assert first != other
    assert 5 < first.count(False) < 35


async def test_rules_installed_twice_stay_until_both_holders_remove_them() -> None:
    service = MemoryService()
    rule = FaultRule("get_space")
    service.faults.add(rule)
    service.faults.add(rule)
    assert service.faults.rules == (rule,)
    service.faults.remove(rule)
    assert service.faults.rules == (rule,)
    service.faults.remove(rule)
    assert service.faults.rules == ()


def test_fault_rules_check_their_numbers() -> None:
    with pytest.raises(ValueError, match="probability"):
        FaultRule("x", probability=1.5)
    with pytest.raises(ValueError, match="delay"):
        FaultRule("x", delay=-1)


def test_named_services_are_process_wide() -> None:
    assert named_service("emulator-test") is named_service("emulator-test")
    assert named_service("emulator-test") is not named_service("emulator-test-2")
