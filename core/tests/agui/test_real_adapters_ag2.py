"""AG2 through its own AG-UI stream (``ag2.ag_ui.AGUIStream``), as it streams.

An ``ag2.Agent`` with a Python tool runs offline on AG2's scripted ``TestConfig`` (tool
calls, streamed chunks, a provider error). ``AGUIStream.dispatch`` yields the SSE text it
sends (``ag_ui.encoder.EventEncoder``); the live path decodes each chunk into the typed event
a proxy would forward (``ag_ui.core.Event``) and hands it to ``StorageAgent`` (both write
policies), the import path stores the text as a run folder. Memory, SQLite and PostgreSQL
(the first test; the rest on memory and SQLite).

What AG2 sends: a turn's tool calls with no text message and no ``parentMessageId`` at all
(the call is the first event of the run), ``TEXT_MESSAGE_START`` without ``role``, a reply
given whole as one ``TEXT_MESSAGE_CHUNK``, uuid4 message ids, no token usage.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent, Event, RunAgentInput
from pydantic import TypeAdapter

pytest.importorskip("ag2.ag_ui", reason="ag2[ag-ui] (AG2's AG-UI stream) not installed")

from ag2 import Agent
from ag2.ag_ui import AGUIStream
from ag2.events import ModelMessageChunk, ToolCallEvent
from ag2.testing import TestConfig

from threadkeep import RunStatus

_SPEC = importlib.util.spec_from_file_location(
    "_agui_real_adapter_kit_ag2", Path(__file__).with_name("real_adapter_kit.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
kit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kit)

THREAD = "ag2-thread"
PROMPT_MESSAGE = {"id": "msg-1", "role": "user", "content": "Weather in Paris?"}
PROMPT = ("user", "msg-1", "Weather in Paris?", "complete", None, [], [], None)
EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def get_weather(city: str) -> str:
    """Return the weather in ``city``."""
    return f"sunny in {city}"


class Wire:
    """Keeps the SSE text AG2 sent, chunk by chunk, for the recorder to hand back."""

    def __init__(self) -> None:
        self.chunks: dict[int, str] = {}

    def encode(self, event: BaseEvent) -> str:
        return self.chunks.pop(id(event))


@pytest.fixture
async def ag2_recorder() -> AsyncIterator[Any]:
    """Build a Recorder over ``AGUIStream`` for a scripted ``TestConfig`` (closed after)."""
    streams: list[AGUIStream] = []

    def make(*turns: Any) -> Any:
        stream = AGUIStream(Agent("weather", config=TestConfig(*turns), tools=[get_weather]))
        streams.append(stream)
        wire = Wire()

        async def run(run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
            async with aclosing(stream.dispatch(run_input)) as chunks:
                async for chunk in chunks:
                    data = "".join(
                        line.removeprefix("data:").strip()
                        for line in chunk.splitlines()
                        if line.startswith("data:")
                    )
                    event = EVENT.validate_python(json.loads(data))
                    wire.chunks[id(event)] = chunk
                    yield event

        return kit.Recorder(run, wire.encode)

    yield make
    for stream in streams:
        await stream.aclose()


def request(run: str = "r-1", messages: list[Any] | None = None) -> RunAgentInput:
    return kit.run_input(THREAD, run, messages=messages)


def tool_turn() -> tuple[Any, ...]:
    return (
        [
            ToolCallEvent("get_weather", arguments='{"city":"Paris"}', id="call_p"),
            ToolCallEvent("get_weather", arguments='{"city": "Rome"}', id="call_r"),
        ],
        ModelMessageChunk("Sunny "),
        ModelMessageChunk("in both."),
        "Sunny in both.",
    )


ARGUMENTS = {"call_p": '{"city":"Paris"}', "call_r": '{"city": "Rome"}'}
RESULTS = {"call_p": "sunny in Paris", "call_r": "sunny in Rome"}


def read_tool_turn(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The records the stream of :func:`tool_turn` stands for, in the order it opens them.

    AG2 runs the calls concurrently, so their events interleave in any order. A call naming
    no message joins the assistant message holding the calls since the last tool result,
    or opens one (no id: the stream names none); a result after them means the next
    parentless call is the model's next turn.
    """
    records: list[list[Any]] = []
    holder: list[Any] | None = None
    texts = {"Sunny ": "Sunny in both."}
    for event in events:
        kind = event["type"]
        if kind == "TOOL_CALL_START":
            if holder is None:
                holder = ["assistant", None, "", "complete", None, [], [], None]
                records.append(holder)
            holder[5].append((event["toolCallId"], "get_weather", ARGUMENTS[event["toolCallId"]]))
        elif kind == "TOOL_CALL_RESULT":
            call = event["toolCallId"]
            records.append(
                ["tool", event["messageId"], RESULTS[call], "complete", call, [], [], None]
            )
            holder = None
        elif kind == "TEXT_MESSAGE_CONTENT" and event["delta"] in texts:
            answer = texts[event["delta"]]
            records.append(
                ["assistant", event["messageId"], answer, "complete", None, [], [], None]
            )
    return [tuple(r) for r in records]


@pytest.mark.parametrize("path", kit.PATHS)
async def test_parallel_tool_calls_naming_no_message_then_the_answer(
    any_store, tmp_path, path, ag2_recorder
):
    events = await kit.fold(path, any_store, tmp_path, ag2_recorder(*tool_turn()), request())
    assert events[1]["type"] == "TOOL_CALL_START"
    assert "parentMessageId" not in events[1]
    assert await kit.history(any_store, THREAD) == [PROMPT, *read_tool_turn(events)]
    assert (await kit.run_of(any_store, THREAD, "r-1")).status is RunStatus.COMPLETE


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_provider_error_mid_answer_ends_the_run_errored(
    store, tmp_path, path, ag2_recorder
):
    rec = ag2_recorder(ModelMessageChunk("Half an "), TimeoutError("provider dropped"))
    events = await kit.fold(path, store, tmp_path, rec, request())
    error = events[-1]
    assert error["type"] == "RUN_ERROR"
    starts = kit.ids(events, "TEXT_MESSAGE_START")
    ended = {e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_END"}
    expected = [PROMPT]
    for message_id in starts:
        status = "complete" if message_id in ended else "errored"
        expected.append(("assistant", message_id, "Half an ", status, None, [], [], None))
    assert await kit.history(store, THREAD) == expected
    run = await kit.run_of(store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.ERRORED, error.get("message") or None)


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_second_turn_carrying_the_history_back_stores_only_the_new_prompt(
    store, tmp_path, path, ag2_recorder
):
    first = await kit.fold(path, store, tmp_path, ag2_recorder(*tool_turn()), request("r-1"))
    before = await kit.history(store, THREAD)
    prompt = {"id": "msg-2", "role": "user", "content": "What did I ask?"}
    back = kit.client_messages(PROMPT_MESSAGE, first)
    again = kit.next_turn(THREAD, "r-2", back, prompt)
    # the server is stateless: the next turn's model sees only the history sent back (a
    # TestConfig script restarts with every run); a plain reply comes as TEXT_MESSAGE_CHUNK
    rec = ag2_recorder("You asked about the weather.")
    second = await kit.fold(path, store, tmp_path, rec, again)
    [answer] = kit.ids(second, "TEXT_MESSAGE_CHUNK")
    assert not kit.ids(second, "TEXT_MESSAGE_START")
    assert await kit.history(store, THREAD) == [
        *before,
        ("user", "msg-2", "What did I ask?", "complete", None, [], [], None),
        ("assistant", answer, "You asked about the weather.", "complete", None, [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-2")).status is RunStatus.COMPLETE
