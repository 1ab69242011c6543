"""Models: subclass fields round-trip, times are UTC, naive datetimes are refused (SPEC 2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import Field, ValidationError

from threadkeep import (
    Boundary,
    Chat,
    ImagePart,
    Message,
    MessageKind,
    Role,
    ToolCall,
    open_store,
)


class TimedToolCall(ToolCall):
    duration_ms: int | None = None


class TaggedMessage(Message):
    tags: list[str] = Field(default_factory=list)
    priority: int = 0
    tool_calls: list[TimedToolCall] = Field(default_factory=list)


def test_subclass_declares_fields():
    message = TaggedMessage(role="user", content="hi", tags=["a"], priority=2)
    assert message.role is Role.USER
    assert message.model_dump()["tags"] == ["a"]


async def test_subclass_fields_round_trip_through_a_store(memory_url: str):
    async with open_store(memory_url, message_model=TaggedMessage) as store:
        chat = await store.create_chat("u", "t")
        sent = TaggedMessage(
            role="assistant",
            content="done",
            tags=["x", "y"],
            priority=3,
            tool_calls=[TimedToolCall(agui_id="c1", name="f", arguments="{}", duration_ms=12)],
            undeclared={"kept": True},
        )
        await store.append_message(chat.chat_id, sent)
        (stored,) = (await store.list_messages(chat.chat_id)).items
    assert isinstance(stored, TaggedMessage)
    assert (stored.tags, stored.priority) == (["x", "y"], 3)
    assert stored.model_extra == {"undeclared": {"kept": True}}
    assert isinstance(stored.tool_calls[0], TimedToolCall)
    assert stored.tool_calls[0].duration_ms == 12


async def test_nested_subclass_fields_survive_in_a_plain_message(memory_url: str):
    # A plain Message holding a ToolCall subclass: the subclass's fields are stored too
    # (read back as extra fields of ToolCall), never silently dropped.
    async with open_store(memory_url) as store:
        chat = await store.create_chat("u", "t")
        call = TimedToolCall(name="f", duration_ms=7)
        sent = Message(role="assistant", agui_id="m1", tool_calls=[call])
        first = await store.append_message(chat.chat_id, sent)
        retried = await store.append_message(chat.chat_id, sent)  # equal payload: no conflict
        page = await store.list_messages(chat.chat_id)
    assert retried.message_id == first.message_id
    assert len(page.items) == 1
    assert page.items[0].tool_calls[0].model_dump()["duration_ms"] == 7


def test_times_are_normalised_to_utc():
    plus_two = timezone(timedelta(hours=2))
    message = Message(role="user", created_at=datetime(2024, 5, 1, 12, 0, tzinfo=plus_two))
    assert message.created_at == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert message.created_at is not None
    assert message.created_at.utcoffset() == timedelta(0)
    chat = Chat(user_id="u", thread_id="t", updated_at="2024-05-01T12:00:00-03:00")
    assert chat.updated_at == datetime(2024, 5, 1, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize("field", ["created_at", "updated_at", "deleted_at"])
def test_naive_datetimes_are_rejected(field: str):
    with pytest.raises(ValidationError, match="timezone"):
        Message(role="user", **{field: datetime(2024, 5, 1, 12, 0)})
    with pytest.raises(ValidationError, match="timezone"):
        Chat(user_id="u", thread_id="t", **{field: datetime(2024, 5, 1, 12, 0)})


@pytest.mark.parametrize(
    "value",
    [
        datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-14))),  # year 10000 in UTC
        datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=14))),  # year 0 in UTC
        "9999-12-31T23:00:00-14:00",
    ],
)
def test_a_time_out_of_range_in_utc_is_a_validation_error(value: object):
    # It was OverflowError from datetime.astimezone, which pydantic does not wrap.
    with pytest.raises(ValidationError, match="out of range"):
        Message(role="user", created_at=value)
    with pytest.raises(ValidationError, match="out of range"):
        Chat(user_id="u", thread_id="t", updated_at=value)


def test_assignment_is_validated_too():
    message = Message(role="user")
    with pytest.raises(ValidationError):
        message.created_at = datetime(2024, 5, 1)  # naive


def test_unknown_role_is_rejected():
    with pytest.raises(ValidationError):
        Message(role="robot")


def test_parts_are_discriminated_by_type():
    message = Message(role="user", parts=[{"type": "image", "url": "https://x/y.png"}])
    assert isinstance(message.parts[0], ImagePart)
    with pytest.raises(ValidationError):
        Message(role="user", parts=[{"type": "video"}])


def test_boundary_and_kind_go_together():
    Message(role="system", kind=MessageKind.BOUNDARY, boundary=Boundary(reason="start_over"))
    with pytest.raises(ValidationError, match="boundary"):
        Message(role="system", kind=MessageKind.BOUNDARY)
    with pytest.raises(ValidationError, match="boundary"):
        Message(role="system", boundary=Boundary(reason="start_over"))


def test_chat_ids_must_not_be_empty():
    with pytest.raises(ValidationError):
        Chat(user_id="", thread_id="t")


def test_as_utc_normalizes_naive_aware_and_iso_text():
    from datetime import UTC, datetime, timedelta, timezone

    from threadkeep import as_utc

    instant = datetime(2026, 1, 1, tzinfo=UTC)
    assert as_utc(None) is None
    assert as_utc(datetime(2026, 1, 1)) == instant
    assert as_utc(datetime(2026, 1, 1, 5, tzinfo=timezone(timedelta(hours=5)))) == instant
    assert as_utc("2026-01-01T05:00:00+05:00") == instant
    assert as_utc("2026-01-01T00:00:00").tzinfo is UTC  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="isoformat"):
        as_utc("yesterday")
