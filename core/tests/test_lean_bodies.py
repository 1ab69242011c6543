"""Lean stored message bodies (``threadkeep._encode_lean``): same fingerprints, same reads.

A stored body leaves out the top-level scalar fields at ``Message``'s default. These tests
hold it to what the full body gave: the fingerprint of the full payload, and a read of the
lean body equal to the read of the full one (``==``, ``model_fields_set``, ``model_dump``,
``model_dump_json``), on the page path and the row path, for the base model and for
subclasses (declared fields, another default, validators of their own).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import model_validator

from threadkeep import Message, MessageKind, MessageStatus, Role, ToolCall
from threadkeep._content import STORE_ASSIGNED_MESSAGE_FIELDS, message_fingerprint
from threadkeep._encode import encode_message, message_body_of
from threadkeep._encode_bulk import encode_for_load
from threadkeep._encode_lean import LEAN_DEFAULTS, LEAN_FIELDS, fill_defaults, lean_fields
from threadkeep.driver import Records

LIMIT = 16 * 1024 * 1024
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CHAT = uuid4()


class Interrupted(Message):
    """A subclass whose ``status`` default differs from ``Message``'s."""

    status: MessageStatus = MessageStatus.INTERRUPTED
    score: float | None = None


class Checked(Message):
    """A subclass with a validator that reads the raw data (a full body's keys)."""

    @model_validator(mode="before")
    @classmethod
    def _needs_status(cls, data: Any) -> Any:
        if isinstance(data, dict) and "status" not in data:
            raise ValueError("status missing from the data")
        return data


def _full_body(message: Message) -> str:
    """The body as stored before lean bodies: every field but the store-assigned ones."""
    exclude = set(STORE_ASSIGNED_MESSAGE_FIELDS)
    raw = message.__pydantic_serializer__.to_json(message, exclude=exclude, serialize_as_any=True)
    return raw.decode("utf-8")


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
_maybe_text = st.none() | _text


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Messages whose scalar fields are often at their default, of three classes."""
    model = draw(st.sampled_from([Message, Message, Interrupted]))
    fields: dict[str, Any] = {"role": draw(st.sampled_from(list(Role)))}
    optional = {
        "content": _text,
        "agui_id": _maybe_text,
        "status": st.sampled_from(list(MessageStatus)),
        "in_progress": st.booleans(),
        "tool_call_ref": _maybe_text,
        "run_id": _maybe_text,
        "request_id": _maybe_text,
        "block_id": _maybe_text,
        "step": _maybe_text,
        "tokens": st.none() | st.integers(0, 10**12),
        "v": st.integers(0, 3),
        "metadata": st.dictionaries(_text, st.none() | st.integers() | _text, max_size=2),
        "tool_calls": st.lists(st.builds(ToolCall, name=_text), max_size=2),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            fields[name] = draw(strategy)
    if draw(st.booleans()):
        fields["extra_field"] = draw(st.none() | _text | st.booleans())
    return model(**fields)


def _same(a: Message, b: Message) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump() == b.model_dump()
    assert a.model_dump_json() == b.model_dump_json()


def _row(seq: int, body: str) -> tuple[Any, ...]:
    return (CHAT, seq, 0, NOW, NOW, None, body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=6))
def test_lean_bodies_fingerprint_and_read_as_the_full_ones(items: list[Message]) -> None:
    full = [_full_body(m) for m in items]
    prepared = [encode_message(m, LIMIT) for m in items]
    for message, body, item in zip(items, full, prepared, strict=True):
        data = json.loads(body)
        assert item.fingerprint == message_fingerprint(data)  # of the full payload
        assert encode_for_load(message, LIMIT) == item
        assert message_body_of(message) == item.body
        lean = json.loads(item.body)
        assert fill_defaults(dict(lean)) == data
        left_out = set(data) - set(lean)
        assert left_out <= lean_fields(type(message))
        assert all(data[key] == LEAN_DEFAULTS[key] for key in left_out)
    for model in (Message, Interrupted, Checked):
        records = Records(message_model=model)
        old = records.messages_from_rows([_row(i, b) for i, b in enumerate(full, 1)])
        new = records.messages_from_rows([_row(i, p.body) for i, p in enumerate(prepared, 1)])
        for a, b in zip(old, new, strict=True):
            _same(a, b)
        for seq, (body, item) in enumerate(zip(full, prepared, strict=True), 1):
            columns = {"chat_id": CHAT, "seq": seq, "revision": 0}
            times = {"created_at": NOW, "updated_at": NOW}
            _same(
                records.message_from_row(body, **columns, **times),
                records.message_from_row(item.body, **columns, **times),
            )
            mapping = json.loads(item.body)  # a driver passing the decoded body
            _same(
                records.message_from_row(body, **columns, **times),
                records.message_from_row(mapping, **columns, **times),
            )


def test_a_short_message_body_leaves_its_default_scalars_out() -> None:
    message = Message(role="assistant", content="message number 7")
    body = json.loads(encode_message(message, LIMIT).body)
    assert body == {
        "message_id": str(message.message_id),
        "role": "assistant",
        "content": "message number 7",
        "parts": [],
        "tool_calls": [],
        "reasonings": [],
        "metadata": {},
    }
    assert set(LEAN_DEFAULTS) == LEAN_FIELDS
    assert {"parts", "tool_calls", "reasonings", "metadata", "message_id", "role"}.isdisjoint(
        LEAN_FIELDS
    )


def test_a_subclass_default_is_written_when_it_differs() -> None:
    """``Interrupted``'s status is written even at its own default, and ``complete`` too."""
    mine = json.loads(encode_message(Interrupted(role="user"), LIMIT).body)
    assert mine["status"] == "interrupted"
    done = Interrupted(role="user", status=MessageStatus.COMPLETE)
    assert json.loads(encode_message(done, LIMIT).body)["status"] == "complete"
    # A plain message stored lean and read as the subclass keeps Message's default.
    plain = encode_message(Message(role="user"), LIMIT).body
    assert "status" not in json.loads(plain)
    read = Records(message_model=Interrupted).message_from_row(
        plain, chat_id=CHAT, seq=1, revision=0, created_at=NOW, updated_at=NOW
    )
    assert read.status is MessageStatus.COMPLETE
    assert "status" in read.model_fields_set


def test_a_validator_of_the_model_sees_the_full_data() -> None:
    body = encode_message(Message(role="user", kind=MessageKind.MESSAGE), LIMIT).body
    assert "status" not in json.loads(body)
    (read,) = Records(message_model=Checked).messages_from_rows([_row(1, body)])
    assert isinstance(read, Checked)
    assert read.status is MessageStatus.COMPLETE
