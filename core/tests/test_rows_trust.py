"""Page rebuilds on the fast path (``threadkeep._rows``) still catch every damaged body.

A page is validated as one JSON array by a compiled validator that leaves the boundary
rule to a check over the whole page; damage of every kind a trusted read could let
through (a wrong type, a missing required field, a bad nested part or tool call, a kind
without its boundary) must still end as ``CorruptRecord`` naming the row, or be left out
and reported under ``corrupt_records="skip"``, and good pages (subclasses included) must
read back equal to what was written.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from pydantic import field_validator

from threadkeep import (
    Boundary,
    CorruptRecord,
    ImagePart,
    Message,
    MessageKind,
    Store,
    ToolCall,
    open_store,
)
from threadkeep._corrupt import collecting
from threadkeep._encode_lean import fill_defaults
from threadkeep.driver import Records

NOW = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
CHAT = uuid4()


class Tagged(Message):
    """A message subclass with a declared field and a field validator of its own."""

    tag: str = "t"

    @field_validator("tag")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class Plain(Message):
    """A subclass with a declared field and no validators (it takes the fast path)."""

    score: int = 0


@pytest.fixture
async def store(memory_url: str) -> AsyncIterator[Store]:
    async with open_store(memory_url) as opened:
        yield opened


def _row(seq: int, body: str) -> tuple[Any, ...]:
    return (CHAT, seq, 0, NOW, NOW, None, body)


def _body(**fields: Any) -> str:
    message = Message(role="user", content=f"m{fields.get('seq', 0)}", **fields)
    return Records.message_body(message)


DAMAGED: dict[str, str] = {
    "wrong type": json.dumps({"role": "user", "tokens": "many"}),
    "missing required field": json.dumps({"content": "no role"}),
    "bad nested part": json.dumps({"role": "user", "parts": [{"type": "image", "url": 5}]}),
    "unknown part type": json.dumps({"role": "user", "parts": [{"type": "video"}]}),
    "bad tool call": json.dumps({"role": "assistant", "tool_calls": [{"tool_call_id": "x"}]}),
    "kind without boundary": json.dumps({"role": "user", "kind": "boundary"}),
    "boundary without kind": json.dumps({"role": "user", "boundary": {"reason": "start_over"}}),
    "negative tokens": json.dumps({"role": "user", "tokens": -1}),
    "two bodies in one": _body() + "," + _body(),
}


@pytest.mark.parametrize("damage", list(DAMAGED), ids=list(DAMAGED))
def test_damaged_body_in_a_page_raises_corrupt_record(store: Store, damage: str) -> None:
    rows = [_row(1, _body()), _row(2, DAMAGED[damage]), _row(3, _body())]
    with pytest.raises(CorruptRecord) as caught:
        Records(store.message_model).messages_from_rows(rows)
    assert (caught.value.kind, caught.value.chat_id, caught.value.seq) == ("message", CHAT, 2)
    assert caught.value.column == "body"


@pytest.mark.parametrize("damage", list(DAMAGED), ids=list(DAMAGED))
def test_damaged_body_is_left_out_when_skipping(store: Store, damage: str) -> None:
    rows = [_row(1, _body()), _row(2, DAMAGED[damage]), _row(3, _body())]
    with collecting("skip") as skipped:
        page = Records(store.message_model).messages_from_rows(rows)
    assert [m.seq for m in page] == [1, 3]
    assert [(c.seq, c.column) for c in skipped] == [(2, "body")]


def test_good_pages_read_back_as_written(store: Store) -> None:
    written = [
        Message(role="user", content="hello", metadata={"k": [1, 2.5, None]}),
        Message(role="assistant", tool_calls=[ToolCall(name="f", arguments="{}")]),
        Message(role="user", parts=[ImagePart(url="https://example.com/a.png")]),
        Message(role="system", kind=MessageKind.BOUNDARY, boundary=Boundary(reason="start_over")),
        Message(role="user", extra_field={"x": 1}),
    ]
    rows = [_row(seq, Records.message_body(m)) for seq, m in enumerate(written, start=1)]
    page = Records(store.message_model).messages_from_rows(rows)
    columns = {"chat_id": CHAT, "revision": 0, "created_at": NOW, "updated_at": NOW}
    expected = [
        m.model_copy(update={**columns, "seq": seq}) for seq, m in enumerate(written, start=1)
    ]
    assert page == expected
    validated = [  # every field validated together, as the general path does (the left-out
        # defaults of a lean body put back: threadkeep._encode_lean)
        Message.model_validate(
            {**fill_defaults(json.loads(row[6])), **columns, "seq": row[1], "deleted_at": None}
        )
        for row in rows
    ]
    assert page == validated
    assert [m.model_fields_set for m in page] == [m.model_fields_set for m in validated]
    one_by_one = [
        Records(store.message_model).message_from_row(
            row[6], chat_id=CHAT, seq=row[1], revision=0, created_at=NOW, updated_at=NOW
        )
        for row in rows
    ]
    assert page == one_by_one


@pytest.mark.parametrize("model", [Tagged, Plain], ids=["with-validator", "plain"])
async def test_subclassed_message_models_round_trip(memory_url: str, model: type[Message]) -> None:
    async with open_store(memory_url, message_model=model) as store:
        chat = await store.create_chat("u", "sub")
        given = model(role="user", content="a", **({"tag": "UP"} if model is Tagged else {}))
        stored = await store.append_message(chat.chat_id, given)
        (read,) = (await store.list_messages(chat.chat_id)).items
        assert type(read) is model
        assert read == stored
        rows = [_row(1, Records.message_body(stored)), _row(2, '{"role": 5}')]
        with pytest.raises(CorruptRecord):
            Records(store.message_model).messages_from_rows(rows)
