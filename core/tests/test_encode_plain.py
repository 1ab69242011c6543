"""The plain-message templates (``threadkeep._encode_plain``) give the general path's results.

A plain message (only scalar fields) is encoded from two templates; it must give exactly
what the general path gives: ``encode_message``'s body, fingerprint and refusals.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadkeep import InvalidContent, Message, MessageStatus, PayloadTooLarge, Role
from threadkeep._encode import encode_message
from threadkeep._encode_bulk import encode_for_load
from threadkeep._encode_plain import ENABLED, encode_plain

LIMIT = 16 * 1024 * 1024

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
