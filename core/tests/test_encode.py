"""The one-pass message encoding (``threadkeep._encode``) against the original algorithm.

Fingerprints are stored with every message and compared on every retried append, so the new
encoding must give, for every message, exactly the fingerprint the original code gives
(``message_fingerprint`` of ``model_dump(mode="json")``, kept in ``_content`` as the
reference); the body may be spelt differently but must hold the same JSON data.
"""

from __future__ import annotations

import json
import math
from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from threadkeep import (
    ActionPart,
    Boundary,
    CustomPart,
    ImagePart,
    InvalidContent,
    Message,
    MessageKind,
    PayloadTooLarge,
    Reasoning,
    ToolCall,
    _content,
)
from threadkeep._content import ENVELOPE_ALLOWANCE_BYTES, MAX_NESTING_DEPTH
from threadkeep._encode import encode_message, fingerprint_of, message_body_of
from threadkeep._encode_bulk import encode_for_load
from threadkeep._encode_lean import fill_defaults
from threadkeep._store_messages import _plain_records
from threadkeep.driver import Records

LIMIT = 16 * 1024 * 1024


class Scored(ToolCall):
    """A tool-call subclass with declared fields of its own."""

    score: float = 0.0
    labels: list[str] = Field(default_factory=list)


class Note(BaseModel):
    """A nested model held by a message subclass."""

    text: str
    weight: float | None = None
    tags: dict[str, int] = Field(default_factory=dict)


class Annotated(Message):
    """A message subclass: declared fields of several kinds, extras allowed (``_Record``)."""

    rating: float | None = None
    note: Note | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)


def _old_prepare(message: Message) -> tuple[str, str]:
    """The original ``prepare_message`` body and fingerprint (before the one-pass encoding)."""
    _content.check_payload_size(message, LIMIT)
    _content.check_content(message, "message")
    data = _content.json_data(
        message,
        "message",
        exclude=set(_content.STORE_ASSIGNED_MESSAGE_FIELDS),
        serialize_as_any=True,
    )
    body = _content.dump_json(data)
    if len(body) * 4 > ENVELOPE_ALLOWANCE_BYTES:
        _content.envelope_problem(data)
    return body, _content.message_fingerprint(data)


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_leaf = st.none() | st.booleans() | st.integers(-(10**30), 10**30) | _floats | _text
_json = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_id_keys = st.sampled_from(["message_id", "tool_call_id", "reasoning_id", "x"])
_meta = st.dictionaries(_text | _id_keys, _json, max_size=5)

_tool_calls = st.builds(
    ToolCall, name=_text, arguments=_text, content=st.none() | _text, agui_id=st.none() | _text
) | st.builds(Scored, name=_text, score=_floats, labels=st.lists(_text, max_size=3))
_reasonings = st.builds(Reasoning, content=_text, encrypted_value=st.none() | _text)
_parts = st.one_of(
    st.builds(ImagePart, url=st.none() | _text),
    st.builds(ActionPart, name=_text, payload=_json),
    st.builds(CustomPart, name=_text, value=_json),
)
_extras = st.dictionaries(
    st.sampled_from(["extra_a", "extra_b", "trace", "score"]), _json, max_size=3
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Messages of the base model and of a subclass, with nested subclasses and extras."""
    fields: dict[str, Any] = {
        "role": draw(st.sampled_from(["user", "assistant", "tool", "system"])),
        "content": draw(_text),
        "agui_id": draw(st.none() | _text),
        "metadata": draw(_meta),
        "tool_calls": draw(st.lists(_tool_calls, max_size=2)),
        "reasonings": draw(st.lists(_reasonings, max_size=2)),
        "parts": draw(st.lists(_parts, max_size=2)),
        "tokens": draw(st.none() | st.integers(0, 10**6)),
        "chat_id": uuid4(),
        "seq": draw(st.none() | st.integers(1, 10**9)),
        **draw(_extras),
    }
    if draw(st.booleans()):
        fields.update(kind=MessageKind.BOUNDARY, boundary=Boundary(reason="start_over"))
    if draw(st.booleans()):
        note = draw(st.none() | st.builds(Note, text=_text, weight=st.none() | _floats))
        return Annotated(
            rating=draw(st.none() | _floats),
            note=note,
            history=draw(st.lists(st.dictionaries(_text, _json, max_size=3), max_size=2)),
            **fields,
        )
    return Message(**fields)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_fingerprint_and_body_equal_the_original_encoding(message: Message) -> None:
    old_body, old_fingerprint = _old_prepare(message)
    prepared = encode_message(message, LIMIT)
    assert prepared.fingerprint == old_fingerprint
    assert fingerprint_of(message) == old_fingerprint
    assert Records.fingerprint(message) == old_fingerprint
    # The stored body is lean (docs/performance.md, "lean bodies"): with the left-out
    # defaults put back it is the original full body.
    assert fill_defaults(json.loads(prepared.body)) == json.loads(old_body)
    assert message_body_of(message) == prepared.body
    assert prepared.message is message
    assert encode_for_load(message, LIMIT) == prepared  # the bulk load's encoding


@settings(max_examples=200, deadline=None)
@given(st.lists(_floats, min_size=1, max_size=5), st.integers(-(10**40), 10**40))
def test_floats_and_big_integers_keep_their_fingerprint(values: list[float], big: int) -> None:
    message = Message(role="user", metadata={"f": values, "big": big, "one": 1.0, "e": 1e16})
    assert encode_message(message, LIMIT).fingerprint == _old_prepare(message)[1]


def test_ids_anywhere_are_left_out_of_the_fingerprint() -> None:
    nested = {"message_id": "a", "keep": {"tool_call_id": "b", "reasoning_id": "c", "k": 1}}
    first = Message(role="user", metadata={"n": nested}, tool_calls=[ToolCall(name="f")])
    other = {"message_id": "z", "keep": {"tool_call_id": "y", "reasoning_id": "x", "k": 1}}
    second = Message(role="user", metadata={"n": other}, tool_calls=[ToolCall(name="f")])
    assert encode_message(first, LIMIT).fingerprint == encode_message(second, LIMIT).fingerprint
    assert encode_message(first, LIMIT).fingerprint == _old_prepare(first)[1]


@pytest.mark.parametrize(
    "message",
    [
        Message(role="user", content="a\ud800b"),
        Message(role="user", metadata={"k\udc00": 1}),
        Message(role="user", metadata={"x": [1.0, math.nan]}),
        Message(role="user", metadata={"x": math.inf}),
        Message(role="user", metadata={"x": object()}),
        Message(role="user", metadata={"x": b"\xff"}),
        Message(role="user", metadata={"x": 10**5000}),
    ],
    ids=["surrogate", "surrogate-key", "nan", "infinity", "object", "bytes", "huge-int"],
)
def test_refusals_are_those_of_the_original_encoding(message: Message) -> None:
    with pytest.raises(InvalidContent) as old:
        _old_prepare(message)
    with pytest.raises(InvalidContent) as new:
        encode_message(message, LIMIT)
    assert str(new.value) == str(old.value)


def test_too_deep_content_is_refused() -> None:
    deep: Any = "leaf"
    for _ in range(MAX_NESTING_DEPTH + 1):
        deep = [deep]
    with pytest.raises(InvalidContent, match="nested more than"):
        encode_message(Message(role="user", metadata={"d": deep}), LIMIT)


def test_size_limits_are_those_of_the_original_encoding() -> None:
    with pytest.raises(PayloadTooLarge, match="max_message_bytes of 10"):
        encode_message(Message(role="user", content="x" * 11), 10)
    big = Message(role="user", metadata={"blob": "y" * ENVELOPE_ALLOWANCE_BYTES})
    with pytest.raises(PayloadTooLarge, match="bytes a message may hold beside"):
        encode_message(big, LIMIT)
    # Just over the allowance, made of floats (spelt by json.dumps when it is measured)
    floats = Message(role="user", metadata={"f": [1e16] * (ENVELOPE_ALLOWANCE_BYTES // 6 + 10)})
    with pytest.raises(PayloadTooLarge) as new:
        encode_message(floats, LIMIT)
    with pytest.raises(PayloadTooLarge) as old:
        _old_prepare(floats)
    assert str(new.value) == str(old.value)
    fits = Message(role="user", content="z" * (ENVELOPE_ALLOWANCE_BYTES * 2))
    assert encode_message(fits, LIMIT).fingerprint == _old_prepare(fits)[1]


class _Inner(BaseModel):
    x: int = 1


class _Wider(_Inner):
    y: int = 2


class _Holder(BaseModel):
    inner: _Inner


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_the_appends_plain_dump_equals_serialize_as_any(message: Message) -> None:
    # append_message copies its input with a plain model_dump when _plain_records says it
    # gives what serialize_as_any gives (which costs about as much as the dump itself).
    if _plain_records(message):
        assert message.model_dump() == message.model_dump(serialize_as_any=True)


@pytest.mark.parametrize(
    "message",
    [
        Message(role="user", metadata={"k": _Holder(inner=_Wider())}),
        Message(role="user", note=_Holder(inner=_Wider())),
        Message(role="user", tool_calls=[Scored(name="f", score=1.0)]),
        Message(role="user", parts=[ActionPart(name="a", payload=[_Holder(inner=_Wider())])]),
        Message(role="user", metadata={"deep": [[[{"x": [1]}]]], "t": (1, 2)}),
        Annotated(role="user"),
    ],
    ids=["model-in-metadata", "model-extra", "tool-call-subclass", "model-payload", "tuple", "sub"],
)
def test_subclasses_and_models_inside_free_values_keep_serialize_as_any(message: Message) -> None:
    assert not _plain_records(message)
