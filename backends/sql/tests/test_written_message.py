"""``written_message``: the stored form of an appended message, equal to ``model_copy``'s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from uuid import uuid4

import pytest
from pydantic import PrivateAttr

from threadkeep import Message, ToolCall
from threadkeep_sql._base import SqlBase
from threadkeep_sql._pg_append import written_message


class Tagged(Message):
    """A subclass with a field of its own."""

    tag: str = "t"


class Private(Message):
    """A subclass with a private attribute (copied by ``model_copy`` itself)."""

    _cache: dict[str, int] = PrivateAttr(default_factory=dict)


NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)
GIVEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))

CASES = [
    Message(role="user", content="plain", agui_id="a"),
    Message(role="user", content="given", created_at=GIVEN, run_id="r", metadata={"k": [1]}),
    Message.model_validate({"role": "user", "content": "extra", "color": "blue"}),
    Message(role="assistant", tool_calls=[ToolCall(name="f", arguments="{}")]),
    Tagged(role="user", content="sub", tag="x"),
]


def _private() -> Private:
    message = Private(role="user", content="private")
    message._cache["n"] = 1
    return message


@pytest.mark.parametrize("message", [*CASES, _private()], ids=lambda m: str(m.content))
def test_written_message_equals_the_model_copy_and_leaves_the_input_alone(
    message: Message,
) -> None:
    before = message.model_copy(deep=True)
    fields_set = set(message.model_fields_set)
    chat_id = uuid4()
    created = message.created_at or NOW
    expected = SqlBase._stored(
        _Item(message), chat_id, 7, revision=0, created_at=created, updated_at=NOW
    )
    got = written_message(message, chat_id, 7, NOW)
    assert type(got) is type(message)
    assert got == expected
    assert got.model_fields_set == expected.model_fields_set
    assert got.__pydantic_extra__ == expected.__pydantic_extra__
    assert got.__pydantic_private__ == expected.__pydantic_private__
    assert got.model_dump() == expected.model_dump()
    assert (got.seq, got.revision, got.chat_id, got.deleted_at) == (7, 0, chat_id, None)
    assert got.created_at == created.astimezone(UTC)
    assert got.created_at is not None
    assert got.created_at.tzinfo is UTC
    # The input is untouched, and changing the copy's fields does not change it.
    assert message == before
    assert set(message.model_fields_set) == fields_set
    got.content = "changed"
    if got.__pydantic_extra__ is not None:
        got.__pydantic_extra__["new"] = 1
    assert message == before


class _Item:
    """The part of a ``PreparedMessage`` that ``SqlBase._stored`` reads."""

    def __init__(self, message: Message) -> None:
        self.message = message
