"""Small pieces: surrogate repair, JSON Patch, AG-UI <-> stored message translation, SSE."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DeveloperMessage,
    FunctionCall,
    ReasoningMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from threadkeep import InvalidArgument
from threadkeep.agui import (
    ThinkingStartEvent,
    apply_patch,
    message_from_agui,
    parse_event,
    read_event_text,
    repair_surrogates,
    translate_messages,
)


@pytest.mark.parametrize(
    ("text", "repaired", "count"),
    [
        ("plain", "plain", 0),
        ("\ud83d\ude80", "\U0001f680", 0),
        ("a\ud83d", "a\ufffd", 1),
        ("\udc00\ud800x", "\ufffd\ufffdx", 2),
        ("kept \ufffd", "kept \ufffd", 0),
    ],
)
def test_repair_surrogates(text, repaired, count):
    assert repair_surrogates(text) == (repaired, count)
    repaired.encode("utf-8")


def test_json_patch_operations():
    doc = {"a": {"b": [1, 2]}, "c": 1}
    patched = apply_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "replace", "path": "/c", "value": 2},
            {"op": "copy", "from": "/a/b", "path": "/d"},
            {"op": "move", "from": "/c", "path": "/e"},
            {"op": "remove", "path": "/a/b/0"},
            {"op": "test", "path": "/e", "value": 2},
            {"op": "add", "path": "/k~1x", "value": True},
        ],
    )
    assert patched == {"a": {"b": [2, 3]}, "d": [1, 2, 3], "e": 2, "k/x": True}
    assert doc == {"a": {"b": [1, 2]}, "c": 1}
    with pytest.raises(InvalidArgument):
        apply_patch(doc, [{"op": "test", "path": "/c", "value": 9}])
    with pytest.raises(InvalidArgument):
        apply_patch(doc, [{"op": "remove", "path": "/missing"}])
    with pytest.raises(InvalidArgument):
        apply_patch(doc, [{"op": "jump", "path": "/c"}])


def test_messages_round_trip_through_storage_shape():
    image = {
        "type": "image",
        "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"},
    }
    messages = [
        SystemMessage(id="s", content="be brief"),
        DeveloperMessage(id="d", content="dev"),
        UserMessage(id="u", content=[{"type": "text", "text": "look"}, image]),
        AssistantMessage(
            id="a",
            content="calling",
            tool_calls=[ToolCall(id="c", function=FunctionCall(name="f", arguments='{"x": 1}'))],
        ),
        ToolMessage(id="t", tool_call_id="c", content="done", error="partial"),
        ReasoningMessage(id="r", content="thinking", encrypted_value="enc"),
        ActivityMessage(id="act", activity_type="plan", content={"steps": [1]}),
    ]
    stored = [message_from_agui(m, run_id="run") for m in messages]
    back = translate_messages(stored)
    assert [m.model_dump(by_alias=True) for m in back] == [
        m.model_dump(by_alias=True) for m in messages
    ]


def test_sse_reading_and_event_parsing():
    text = (
        '\ufeff: comment\nevent: message\ndata: {"type":"THINKING_START",\n'
        'data: "title":"t"}\n\ndata: nope\n\n'
    )
    parsed = read_event_text(text)
    assert len(parsed.items) == 1
    assert parsed.problems == ["line 6: data is not JSON (Expecting value)"]
    event = parse_event(parsed.items[0])
    assert isinstance(event, ThinkingStartEvent)
    assert event.title == "t"
    with pytest.raises(InvalidArgument, match="TOOL_CALL_START"):
        parse_event({"type": "TOOL_CALL_START"})
