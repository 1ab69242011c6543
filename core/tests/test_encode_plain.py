"""The plain-message templates (``threadkeep._encode_plain``) give the general path's results.

A plain message (only scalar fields) is encoded from two templates; a plain ``dict`` is
built into a ``Message`` without pydantic's validator. Both must give exactly what the
general path gives: ``encode_message``'s body, fingerprint and refusals, and the model
``Message.model_validate`` returns.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadkeep import InvalidContent, Message, MessageStatus, PayloadTooLarge, Role
from threadkeep._encode import encode_message
from threadkeep._encode_bulk import encode_for_load
from threadkeep._encode_plain import ENABLED, encode_plain, plain_message

LIMIT = 16 * 1024 * 1024
CHAT = UUID("00000000-0000-4000-8000-000000000001")

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
_ascii = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=30)
_any_text = _text | _ascii
_maybe = st.none() | _any_text
_plain_fields = {
    "agui_id": _maybe,
    "content": _any_text,
    "status": st.sampled_from(list(MessageStatus)),
    "in_progress": st.booleans(),
    "tool_call_ref": _maybe,
    "run_id": _maybe,
    "request_id": _maybe,
    "block_id": _maybe,
    "step": _maybe,
    "tokens": st.none() | st.integers(0, 10**15),
    "v": st.integers(-3, 10**6),
    "message_id": st.uuids(),
}


def test_the_templates_are_on() -> None:
    """Derived from the serializer at import and checked against ``encode_message``."""
    assert ENABLED


@settings(max_examples=400, deadline=None)
@given(
    role=st.sampled_from(list(Role)),
    fields=st.fixed_dictionaries({}, optional=_plain_fields),
)
def test_a_plain_message_is_encoded_as_encode_message_encodes_it(
    role: Role, fields: dict[str, Any]
) -> None:
    message = Message(role=role, **fields)
    plain = encode_plain(message, LIMIT)
    assert plain is not None
    assert plain == encode_message(message, LIMIT)
    assert encode_for_load(message, LIMIT) == plain


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "a\ud800b"},
        {"agui_id": "\udc00"},
        {"step": "x\udfff"},
    ],
)
def test_a_lone_surrogate_is_refused_as_encode_message_refuses_it(fields: dict[str, Any]) -> None:
    message = Message(role="user", **fields)
    assert encode_plain(message, LIMIT) is None
    with pytest.raises(InvalidContent) as expected:
        encode_message(message, LIMIT)
    with pytest.raises(InvalidContent) as got:
        encode_for_load(message, LIMIT)
    assert str(got.value) == str(expected.value)


def test_size_limits_are_encode_messages() -> None:
    for content in ("x" * 11, "é" * 6):
        message = Message(role="user", content=content)
        with pytest.raises(PayloadTooLarge) as expected:
            encode_message(message, 10)
        with pytest.raises(PayloadTooLarge) as got:
            encode_plain(message, 10)
        assert str(got.value) == str(expected.value)
    long = Message(role="user", content="y" * (LIMIT // 64))  # near the envelope check
    assert encode_plain(long, LIMIT) is None
    assert encode_for_load(long, LIMIT) == encode_message(long, LIMIT)


@pytest.mark.parametrize(
    "fields",
    [
        {"role": "user"},  # a string where the enum member belongs
        {"role": Role.USER, "tokens": "3"},
        {"role": Role.USER, "tokens": True},
        {"role": Role.USER, "in_progress": 1},
        {"role": Role.USER, "agui_id": 5},
        {"role": Role.USER, "message_id": "not a uuid"},
        {"role": Role.USER, "parts": ()},
        {"role": Role.USER, "metadata": {"k": 1}},
    ],
)
def test_values_put_past_validation_take_the_general_path(fields: dict[str, Any]) -> None:
    message = Message.model_construct(**fields)
    assert encode_plain(message, LIMIT) is None


def test_messages_that_are_not_plain_take_the_general_path() -> None:
    assert encode_plain(Message(role="user", metadata={"a": 1}), LIMIT) is None
    assert encode_plain(Message(role="user", extra_field=1), LIMIT) is None
    assert encode_plain(Message(role="user", tool_calls=[{"name": "f"}]), LIMIT) is None


def _validated(data: dict[str, Any]) -> Message:
    return Message.model_validate({**data, "chat_id": CHAT, "revision": 0})


@settings(max_examples=300, deadline=None)
@given(
    role=st.sampled_from([*Role, *(r.value for r in Role)]),
    fields=st.fixed_dictionaries(
        {},
        optional={
            **_plain_fields,
            "status": st.sampled_from([*MessageStatus, *(s.value for s in MessageStatus)]),
            "kind": st.just("message"),
            "parts": st.just([]),
            "metadata": st.just({}),
        },
    ),
)
def test_a_plain_dict_is_the_message_validation_gives(role: Any, fields: dict[str, Any]) -> None:
    data = {"role": role, "message_id": uuid4(), **fields}
    built = plain_message(data, CHAT)
    assert built is not None
    expected = _validated(data)
    assert built == expected
    assert built.__pydantic_fields_set__ == expected.__pydantic_fields_set__
    assert list(built.__dict__) == list(expected.__dict__)
    assert encode_message(built, LIMIT) == encode_message(expected, LIMIT)


def test_a_plain_dict_without_a_message_id_gets_a_new_one() -> None:
    first = plain_message({"role": "user"}, CHAT)
    second = plain_message({"role": "user"}, CHAT)
    assert first is not None
    assert second is not None
    assert first.message_id.version == 4
    assert first.message_id != second.message_id
    assert first.model_dump(exclude={"message_id"}) == second.model_dump(exclude={"message_id"})


@pytest.mark.parametrize(
    "data",
    [
        {"content": "no role"},
        {"role": "nobody"},
        {"role": "user", "kind": "boundary"},
        {"role": "user", "status": "unknown"},
        {"role": "user", "parts": None},
        {"role": "user", "tool_calls": [{"name": "f"}]},
        {"role": "user", "metadata": {"k": 1}},
        {"role": "user", "content": None},
        {"role": "user", "content": b"bytes"},
        {"role": "user", "tokens": -1},
        {"role": "user", "tokens": True},
        {"role": "user", "in_progress": 1},
        {"role": "user", "message_id": None},
        {"role": "user", "message_id": str(uuid4())},
        {"role": "user", "created_at": "2026-01-01T00:00:00Z"},
        {"role": "user", "seq": 3},
        {"role": "user", "extra": 1},
        {"role": "user", "agui_id": 7},
    ],
)
def test_other_dicts_are_left_to_validation(data: dict[str, Any]) -> None:
    assert plain_message(data, CHAT) is None
