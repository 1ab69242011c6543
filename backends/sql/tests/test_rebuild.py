"""Rebuilding models from rows: the fast paths give exactly what validating everything gives.

``Store.messages_from_rows`` / ``records_from_rows`` (and the single-row helpers) validate the
JSON body in pydantic-core and set the store's column values without validating them again,
when nothing could tell the difference. Here every result is compared with the general path
(``model_validate`` of the decoded body plus the columns): values, their types, the set of
fields set and extra fields; models whose validators could see the difference take the
general path.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from threadkeep import (
    Chat,
    CorruptRecord,
    Message,
    Reasoning,
    ToolCall,
    as_utc,
    open_store,
)
from threadkeep._encode_lean import fill_defaults
from threadkeep.driver import Records
from threadkeep_sql import SqlStore
from threadkeep_sql._messages import _NO_SEQ, _PAGE

NOW = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


class Tagged(Message):
    mood: str = "calm"
    score: float = 0.5


class Call(ToolCall):
    cost: int = 3


class SeesSeq(Message):
    """Its validator reads a store-assigned field, so it must see the real one."""

    seen_seq: int | None = None

    @model_validator(mode="after")
    def _record_seq(self) -> SeesSeq:
        object.__setattr__(self, "seen_seq", self.seq)
        return self


class Private(Message):
    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)


class Constrained(Message):
    revision: int = Field(default=0, ge=0, le=10)


class Checked(Message):
    @field_validator("content")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


def general(model: type[Message], body: str, columns: dict[str, Any]) -> Message:
    """The general path: every field validated (naive times taken as UTC, as before)."""
    utc = {k: as_utc(v) if isinstance(v, datetime) else v for k, v in columns.items()}
    return model.model_validate({**fill_defaults(json.loads(body)), **utc})


def same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    for name in type(a).model_fields:
        assert type(getattr(a, name)) is type(getattr(b, name)), name


def rows_of(model: type[Message], messages: list[Message], **overrides: Any) -> list[tuple]:
    chat_id = uuid.uuid4()
    rows = []
    for seq, message in enumerate(messages, start=1):
        body = Records.message_body(message)
        columns = {
            "chat_id": chat_id,
            "seq": seq,
            "revision": seq % 3,
            "created_at": NOW,
            "updated_at": NOW + timedelta(seconds=seq),
            "deleted_at": None,
            **overrides,
        }
        rows.append((*columns.values(), body, "fingerprint"))
    return rows


def columns_of(row: tuple) -> dict[str, Any]:
    names = ("chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at")
    return dict(zip(names, row, strict=False))


def sample(model: type[Message]) -> list[Message]:
    return [
        model(role="user", content=" hi \x00 ", metadata={"n": 1, "f": 0.1, "big": 10**30}),
        model(
            role="assistant",
            agui_id="a\x00",
            extra_thing={"nested": [1, None, "x"]},
            tool_calls=[Call(name="f", arguments='{"x": 1}', cost=9), ToolCall(name="g")],
            reasonings=[Reasoning(content="think")],
        ),
        model(role="assistant", kind="boundary", boundary={"reason": "compaction", "upto_seq": 1}),
    ]


@pytest.mark.parametrize("model", [Message, Tagged, SeesSeq, Private, Constrained, Checked])
def test_message_pages_equal_the_general_path(model: type[Message]) -> None:
    store = open_store("memory://", message_model=model)
    rows = rows_of(model, sample(model))
    page = Records(store.message_model).messages_from_rows(rows)
    assert len(page) == len(rows)
    for built, row in zip(page, rows, strict=True):
        expected = general(model, row[6], {**columns_of(row)})
        same(built, expected)
        one = Records(store.message_model).message_from_row(row[6], **columns_of(row))
        same(one, expected)
    if model is SeesSeq:
        assert [m.seen_seq for m in page] == [1, 2, 3]


def test_naive_and_foreign_zone_times_become_utc() -> None:
    store = open_store("memory://")
    naive = NOW.replace(tzinfo=None)
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    rows = rows_of(Message, sample(Message), created_at=naive, updated_at=plus_two)
    for built in [
        *Records(store.message_model).messages_from_rows(rows),
        Records(store.message_model).message_from_row(rows[0][6], **columns_of(rows[0])),
    ]:
        assert built.created_at == NOW
        assert built.created_at.tzinfo is UTC
        assert built.updated_at == NOW
        assert built.updated_at.tzinfo is UTC


def test_columns_the_model_would_convert_take_the_general_path() -> None:
    store = open_store("memory://")
    rows = rows_of(Message, sample(Message), chat_id=str(uuid.uuid4()), revision=True)
    for built, row in zip(Records(store.message_model).messages_from_rows(rows), rows, strict=True):
        same(built, general(Message, row[6], columns_of(row)))
        assert isinstance(built.chat_id, uuid.UUID)
        assert type(built.revision) is int


def test_a_large_page_is_validated_body_by_body() -> None:
    store = open_store("memory://")
    big = [Message(role="user", content="x" * 600_000) for _ in range(3)]
    rows = rows_of(Message, big)
    for built, row in zip(Records(store.message_model).messages_from_rows(rows), rows, strict=True):
        same(built, general(Message, row[6], columns_of(row)))


def test_bad_bodies_raise_corrupt_record() -> None:
    """Damaged rows are ``CorruptRecord`` naming the column, never a raw error (issue 12)."""
    store = open_store("memory://")
    (row,) = rows_of(Message, [Message(role="user")])
    bad = (*row[:6], '{"role": "nobody"}', "fp")
    with pytest.raises(CorruptRecord, match="does not validate") as caught:
        Records(store.message_model).messages_from_rows([row, bad])
    assert caught.value.column == "body"
    assert isinstance(caught.value.__cause__, ValidationError)
    with pytest.raises(CorruptRecord, match="is not JSON") as caught:
        Records(store.message_model).messages_from_rows([row, (*row[:6], "{not json", "fp")])
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)
    with pytest.raises(CorruptRecord) as caught:
        Records(store.message_model).records_from_rows(Chat, ("seq",), [(1, '{"user_id": ""}')])
    assert (caught.value.kind, caught.value.seq) == ("chat", 1)


def test_chat_pages_equal_the_general_path() -> None:
    chats = [
        Chat(user_id="u\x00", thread_id=f"t{i}", created_at=NOW, metadata={"i": i}, note="x")
        for i in range(4)
    ]
    names = ("seq", "revision", "updated_at", "last_message_at")
    rows = [
        (i + 1, i, NOW.replace(tzinfo=None), None if i % 2 else NOW, Records.record_body(c), "x")
        for i, c in enumerate(chats)
    ]
    page = Records.records_from_rows(Chat, names, rows)
    for built, row in zip(page, rows, strict=True):
        columns = dict(zip(names, row, strict=False))
        expected = Records.record_from_body(Chat, row[4], **columns)
        same(built, expected)
        data = {**json.loads(row[4]), **columns, "updated_at": NOW}
        same(built, Chat.model_validate(data))


async def test_a_subclass_store_round_trips_on_both_engines(open_sql_store) -> None:
    """Rows as each engine returns them (asyncpg's UUIDs, SQLite's naive times) rebuild
    exactly as the general path rebuilds them."""
    store: SqlStore = await open_sql_store(message_model=Tagged)
    chat = await store.create_chat("u", "t")
    messages = sample(Tagged)
    # A compaction boundary covers messages stored before its batch: two appends.
    await store.append_messages(chat.chat_id, messages[:-1])
    await store.append_messages(chat.chat_id, messages[-1:])
    params = {"chat_id": chat.chat_id, "before": _NO_SEQ, "limit": 10}
    async with store.driver.db.runner() as run:
        rows = await run.all(_PAGE, params)
    expected = [general(Tagged, row[6], columns_of(row)) for row in rows][::-1]
    page = await store.list_messages(chat.chat_id)
    assert len(page.items) == 3
    for read, wanted in zip(page.items, expected, strict=True):
        same(read, wanted)
    assert page.items[1].extra_thing == {"nested": [1, None, "x"]}
    assert page.items[1].tool_calls[0].cost == 9
    last = await store.get_last_messages([chat.chat_id])
    same(last[chat.chat_id], expected[-1])
    (listed,) = (await store.list_chats()).items
    same(listed, await store.get_chat(chat.chat_id))
