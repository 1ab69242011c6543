"""The bulk load's encoding (``threadkeep._encode_bulk``) gives ``encode_message``'s results.

Every message here takes the fast path or is handed to ``encode_message``; either way the
prepared message (body text and fingerprint) and every refusal (its type and text) must be
exactly ``encode_message``'s. The generated messages of ``test_encode.py`` are checked
against it too.
"""

from __future__ import annotations

import gc
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from threadkeep import (
    ActionPart,
    Boundary,
    CustomPart,
    FilePart,
    InvalidContent,
    Message,
    MessageKind,
    MessageStatus,
    PayloadTooLarge,
    Reasoning,
    ToolCall,
    open_store,
)
from threadkeep._content import (
    ENVELOPE_ALLOWANCE_BYTES,
    MAX_NESTING_DEPTH,
    message_payload_bytes,
)
from threadkeep._encode import encode_message
from threadkeep._encode_bulk import collector_paused, encode_for_load, payload_bytes

LIMIT = 16 * 1024 * 1024


class Inner(BaseModel):
    """A model held in a free-form value."""

    weight: float = 0.5
    name: str = "n"


class Tagged(ToolCall):
    """A tool call of a subclass: the message goes through ``encode_message``."""

    tag: str = "t"


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def _equal(message: Message, limit: int = LIMIT) -> None:
    assert encode_for_load(message, limit) == encode_message(message, limit)
    assert payload_bytes(message) == message_payload_bytes(message)


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
_maybe = st.none() | _text
_status = st.sampled_from(list(MessageStatus))
_calls = st.builds(
    ToolCall,
    agui_id=_maybe,
    name=_text,
    arguments=_text,
    content=_maybe,
    status=_status,
    message_id=st.none() | st.uuids(),
)
_reasonings = st.builds(
    Reasoning, agui_id=_maybe, name=_maybe, content=_text, encrypted_value=_maybe, status=_status
)


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        Message,
        role=st.sampled_from(["user", "assistant", "tool", "system"]),
        agui_id=_maybe,
        content=_text,
        status=_status,
        in_progress=st.booleans(),
        tool_calls=st.lists(_calls, max_size=3),
        reasonings=st.lists(_reasonings, max_size=2),
        tool_call_ref=_maybe,
        run_id=_maybe,
        request_id=_maybe,
        block_id=_maybe,
        step=_maybe,
        tokens=st.none() | st.integers(0, 10**12),
        v=st.integers(0, 3),
        seq=st.none() | st.integers(1, 10**6),
    )
)
def test_messages_of_typed_fields_only_keep_their_fingerprint(message: Message) -> None:
    """The fingerprint built from field values (no body parsed back) is the original's."""
    _equal(message)


@pytest.mark.parametrize(
    "message",
    [
        Message(role="user", agui_id="a", content="plain"),
        Message(role="user", content='ünï \x00 \u2028 "q" \\ 😀', metadata={"é": ["\x1f"]}),
        Message(
            role="assistant",
            tool_calls=[ToolCall(agui_id="c", name="f", arguments='{"a": 1}', x=[1, {"b": 2}])],
            reasonings=[Reasoning(content="think", encrypted_value="sig", extra={"k": None})],
            metadata={"message_id": "kept out", "nested": {"tool_call_id": 1, "z": [True]}},
        ),
        Message(role="user", metadata={"model": Inner(), "f": 1e16, "i": 10**30}),
        Message(role="user", metadata={"f": [0.1, -0.0, 1.5e-300]}, trace={"span": 2.5}),
        Message(
            role="user",
            parts=[
                ActionPart(name="go", payload={"p": [1, 2.25]}),
                CustomPart(name="c", value={"v": Inner(weight=2.0)}),
                FilePart(url="u", size=3, note="x"),
            ],
        ),
        Message(role="user", tool_calls=[Tagged(name="f")]),
        Message(role="user", metadata={"call": Tagged(name="g"), "calls": [ToolCall(name="h")]}),
        Message(
            role="system",
            kind=MessageKind.BOUNDARY,
            boundary=Boundary(reason="compaction", upto_seq=3, why="kept"),
        ),
        Message(role="user", metadata={"d": _deep(MAX_NESTING_DEPTH - 3)}),
        Message(role="user", content="z" * (ENVELOPE_ALLOWANCE_BYTES * 2)),
    ],
    ids=[
        "plain",
        "escapes",
        "nested-ids",
        "model-in-metadata",
        "floats-and-extras",
        "parts",
        "subclass",
        "models-in-metadata",
        "boundary",
        "just-deep-enough",
        "big-payload",
    ],
)
def test_the_prepared_message_is_encode_messages(message: Message) -> None:
    _equal(message)


@pytest.mark.parametrize(
    "message",
    [
        Message(role="user", content="a\ud800b"),
        Message(role="user", metadata={"k\udc00": 1}),
        Message(role="user", metadata={"x": [1.0, math.nan]}),
        Message(role="user", metadata={"m": Inner(weight=math.inf)}),
        Message(role="user", metadata={"m": {2.5: 1, math.nan: 2}}),
        Message(role="user", x={"y": -math.inf}),
        Message(role="user", tool_calls=[ToolCall(name="f", score=math.nan)]),
        Message(role="user", tool_calls=[ToolCall(name="f", arguments="\udfff")]),
        Message(role="user", reasonings=[Reasoning(content="r", s=[math.inf])]),
        Message(role="user", parts=[ActionPart(name="a", payload=[math.nan])]),
        Message(role="user", parts=[CustomPart(name="c", value={"v": math.inf})]),
        Message(role="user", parts=[FilePart(url="\ud800")]),
        Message(
            role="system",
            kind=MessageKind.BOUNDARY,
            boundary=Boundary(reason="start_over", note=math.nan),
        ),
        Message(role="user", metadata={"d": _deep(MAX_NESTING_DEPTH)}),
        Message(role="user", parts=[CustomPart(name="c", value=_deep(MAX_NESTING_DEPTH))]),
        Message(role="user", metadata={"x": object()}),
        Message(role="user", metadata={"x": b"\xff"}),
        Message(role="user", metadata={"x": 10**5000}),
    ],
    ids=[
        "surrogate",
        "surrogate-key",
        "nan",
        "inf-in-model",
        "nan-key",
        "extra",
        "tool-call-extra",
        "tool-call-surrogate",
        "reasoning-extra",
        "action-payload",
        "custom-value",
        "part-field",
        "boundary-extra",
        "too-deep",
        "too-deep-in-part",
        "object",
        "bytes",
        "huge-int",
    ],
)
def test_refusals_are_encode_messages(message: Message) -> None:
    with pytest.raises(InvalidContent) as expected:
        encode_message(message, LIMIT)
    with pytest.raises(InvalidContent) as got:
        encode_for_load(message, LIMIT)
    assert str(got.value) == str(expected.value)


def test_values_put_past_validation_are_refused_as_encode_message_refuses_them() -> None:
    message = Message(role="user", content="ok")
    message.tool_calls.append(ToolCall.model_construct(name="f", arguments="a", score=math.nan))
    with pytest.raises(InvalidContent) as expected:
        encode_message(message, LIMIT)
    with pytest.raises(InvalidContent) as got:
        encode_for_load(message, LIMIT)
    assert str(got.value) == str(expected.value)
    constructed = Message.model_construct(role="user", content="x", metadata={"n": math.nan})
    with pytest.raises(InvalidContent):
        encode_for_load(constructed, LIMIT)


def test_payload_bytes_count_utf8_as_the_original() -> None:
    texts = ["", "ascii", "é", "😀 x", "\ud800 lone", "\x00"]
    for text in texts:
        message = Message.model_construct(
            role="user",
            content=text,
            tool_calls=[ToolCall(arguments=text, content=text)],
            reasonings=[Reasoning.model_construct(content=text, encrypted_value=text)],
        )
        assert payload_bytes(message) == message_payload_bytes(message)


def test_size_limits_are_encode_messages() -> None:
    with pytest.raises(PayloadTooLarge) as expected:
        encode_message(Message(role="user", content="x" * 11), 10)
    with pytest.raises(PayloadTooLarge) as got:
        encode_for_load(Message(role="user", content="x" * 11), 10)
    assert str(got.value) == str(expected.value)
    big = Message(role="user", metadata={"blob": "y" * ENVELOPE_ALLOWANCE_BYTES})
    with pytest.raises(PayloadTooLarge) as expected:
        encode_message(big, LIMIT)
    with pytest.raises(PayloadTooLarge) as got:
        encode_for_load(big, LIMIT)
    assert str(got.value) == str(expected.value)


def test_the_collector_is_paused_only_inside_and_restored_on_error() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), collector_paused():
        _ = 1 / 0
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a collector disabled by the caller stays disabled
    finally:
        gc.enable()


async def test_a_load_leaves_the_collector_running_after_a_refused_batch() -> None:
    def messages() -> Any:
        yield Message(role="user", agui_id="ok", content="fine")
        raise RuntimeError("the caller's generator fails")

    async with open_store("memory://") as store:
        chat = await store.create_chat("u", "t")
        with pytest.raises(RuntimeError):
            await store.load_messages(chat.chat_id, messages())
        assert gc.isenabled()
        bad = [Message(role="user", content="x", metadata={"n": math.nan})]
        with pytest.raises(InvalidContent):
            await store.load_messages(chat.chat_id, bad)
        assert gc.isenabled()
