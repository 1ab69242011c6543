"""Mastra's AG-UI bridge (``@ag-ui/mastra``, TypeScript only), its shapes written from its source.

The bridge's own regression tests (``integrations/mastra/typescript/src/__tests__`` of the
AG-UI repository: message id alignment, tool result content) fix what it sends: text as
``TEXT_MESSAGE_CHUNK`` under the id Mastra gives the whole assistant turn (announced on
``start``/``step-start``), tool calls parented to that id with ``JSON.stringify`` of the
arguments in one ``TOOL_CALL_ARGS``, ``TOOL_CALL_RESULT`` content that is
``JSON.stringify(result)``, and text after a tool result moved to a continuation id
``<turn>-agui-text`` (then ``-agui-text-2``...). On the next turn the client sends the turn
back under both ids. Live and imported, on every driver; the records are stated literally.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "_agui_stack_shapes_mastra", Path(__file__).with_name("test_stack_shapes.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
shapes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(shapes)

TURN = "mastra-turn-1"
CALL = {
    "id": "call-1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"SF"}'},
}


def chunk(message_id: str, delta: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CHUNK", "messageId": message_id, "delta": delta, **extra}


MASTRA_TURN = [
    shapes.started(),
    chunk(TURN, "Let me check ", role="assistant"),
    chunk(TURN, "the weather."),
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-1",
        "toolCallName": "get_weather",
        "parentMessageId": TURN,
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": '{"city":"SF"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "call-1"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "r-9f1",
        "toolCallId": "call-1",
        "content": '{"t":20}',
        "role": "tool",
    },
    chunk(f"{TURN}-agui-text", "It is sunny."),
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-2",
        "toolCallName": "get_weather",
        "parentMessageId": TURN,
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call-2", "delta": '{"city":"LA"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "call-2"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "r-9f2",
        "toolCallId": "call-2",
        "content": '{"t":25}',
        "role": "tool",
    },
    chunk(f"{TURN}-agui-text-2", "LA is warmer."),
    shapes.finished(),
]

TURN_RECORDS = [
    shapes.PROMPT_RECORD,
    # the turn id holds the text before the first call and every call parented to it
    (
        "assistant",
        TURN,
        "Let me check the weather.",
        "complete",
        None,
        [("call-1", "get_weather", '{"city":"SF"}'), ("call-2", "get_weather", '{"city":"LA"}')],
    ),
    ("tool", "r-9f1", '{"t":20}', "complete", "call-1", []),
    ("assistant", f"{TURN}-agui-text", "It is sunny.", "complete", None, []),
    ("tool", "r-9f2", '{"t":25}', "complete", "call-2", []),
    ("assistant", f"{TURN}-agui-text-2", "LA is warmer.", "complete", None, []),
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_a_mastra_turn_with_continuation_ids(every_store, tmp_path, path):
    chat = await shapes.fold(path, every_store, tmp_path, MASTRA_TURN)
    assert await shapes.records(every_store, chat) == TURN_RECORDS


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_the_next_turn_sending_the_split_turn_back_stores_only_the_new_prompt(
    store, tmp_path, path
):
    await shapes.fold(path, store, tmp_path, MASTRA_TURN)
    two = dict(CALL, id="call-2", function={"name": "get_weather", "arguments": '{"city":"LA"}'})
    history = [
        shapes.PROMPT,
        {
            "id": TURN,
            "role": "assistant",
            "content": "Let me check the weather.",
            "toolCalls": [CALL, two],
        },
        {"id": "r-9f1", "role": "tool", "content": '{"t":20}', "toolCallId": "call-1"},
        {"id": f"{TURN}-agui-text", "role": "assistant", "content": "It is sunny."},
        {"id": "r-9f2", "role": "tool", "content": '{"t":25}', "toolCallId": "call-2"},
        {"id": f"{TURN}-agui-text-2", "role": "assistant", "content": "LA is warmer."},
        {"id": "user-2", "role": "user", "content": "And tomorrow?"},
    ]
    answer = [shapes.started("r-2"), chunk("mastra-turn-2", "Also sunny."), shapes.finished("r-2")]
    chat = await shapes.fold(
        path, store, tmp_path, answer, run="r-2", messages=history, folder="turn-2"
    )
    assert await shapes.records(store, chat) == [
        *TURN_RECORDS,
        ("user", "user-2", "And tomorrow?", "complete", None, []),
        ("assistant", "mastra-turn-2", "Also sunny.", "complete", None, []),
    ]
