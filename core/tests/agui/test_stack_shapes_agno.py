"""Agno's AG-UI interface (``agno.os.interfaces.agui``), its shapes written from its source.

``agno/os/interfaces/agui/utils.py`` and ``router.py`` of the Agno repository fix what it
sends (read, not run: Agno ships no scripted model to run it offline):

- ``TEXT_MESSAGE_START`` carries extra fields naming the agent or team that speaks
  (``sourceType``, ``sourceId``, ``sourceName``; not in the protocol);
- a tool call ends the text message; every call until the next text is parented to that
  message, the calls of a later model turn too (the "pending parent" stays set until a text
  message starts), so a call after a tool result names a message that streamed before it;
  a call with no text before it gets an empty ``TEXT_MESSAGE_START``/``END`` as its parent;
- the arguments are ``json.dumps`` of the parsed input, in one ``TOOL_CALL_ARGS``;
  ``TOOL_CALL_END`` comes when the tool completed, with the ``TOOL_CALL_RESULT`` (role
  ``tool``, a uuid4 ``messageId``, content ``str(result)``: a Python repr for a dict);
- reasoning is only ``STEP_STARTED``/``STEP_FINISHED`` named ``reasoning`` (no text);
  custom events are ``CUSTOM`` named after the event class, the whole event as value;
- a paused run (tools awaiting external execution) ends with an assistant message then its
  calls (start, arguments, end; no result) before ``RUN_FINISHED``;
- an exception is ``RUN_ERROR`` with ``message=str(e)`` and no code, the text left open.

Live and imported, on memory, SQLite and PostgreSQL; the records are stated literally.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from threadkeep import RunStatus

_SPEC = importlib.util.spec_from_file_location(
    "_agui_stack_shapes_agno", Path(__file__).with_name("test_stack_shapes.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
shapes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(shapes)

SOURCE = {"sourceType": "agent", "sourceId": "weather-agent", "sourceName": "Weather Agent"}


def start(message_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant", **extra}


def content(message_id: str, delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}


def end(message_id: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": message_id}


def call(call_id: str, arguments: str, parent: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": "get_weather",
            "parentMessageId": parent,
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
    ]


def done(call_id: str, result_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": call_id,
            "content": text,
            "role": "tool",
            "messageId": result_id,
        },
    ]


PARIS, LYON, NICE = '{"city": "Paris"}', '{"city": "Lyon"}', '{"city": "Nice"}'

AGNO_TURN = [
    shapes.started(),
    {"type": "STATE_SNAPSHOT", "snapshot": {"unit": "C"}},
    start("ag-m1", **SOURCE),
    content("ag-m1", "Checking "),
    content("ag-m1", "two cities."),
    end("ag-m1"),
    # two calls of one model turn, both parented to the message the first one ended
    *call("ag-c1", PARIS, "ag-m1"),
    *call("ag-c2", LYON, "ag-m1"),
    *done("ag-c1", "ag-r1", "{'temp': 20}"),
    *done("ag-c2", "ag-r2", "{'temp': 18}"),
    {"type": "STEP_STARTED", "stepName": "reasoning"},
    {"type": "STEP_FINISHED", "stepName": "reasoning"},
    # the next model turn calls again with no text: still parented to ag-m1
    *call("ag-c3", NICE, "ag-m1"),
    *done("ag-c3", "ag-r3", "{'temp': 24}"),
    {"type": "CUSTOM", "name": "WeatherFetched", "value": {"event": "WeatherFetched", "n": 3}},
    start("ag-m2", **SOURCE),
    content("ag-m2", "Nice is warmest."),
    end("ag-m2"),
    shapes.finished(),
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_an_agno_turn_whose_later_calls_name_the_first_message(any_store, tmp_path, path):
    chat = await shapes.fold(path, any_store, tmp_path, AGNO_TURN)
    assert await shapes.records(any_store, chat) == [
        shapes.PROMPT_RECORD,
        (
            "assistant",
            "ag-m1",
            "Checking two cities.",
            "complete",
            None,
            [
                ("ag-c1", "get_weather", PARIS),
                ("ag-c2", "get_weather", LYON),
                ("ag-c3", "get_weather", NICE),
            ],
        ),
        ("tool", "ag-r1", "{'temp': 20}", "complete", "ag-c1", []),
        ("tool", "ag-r2", "{'temp': 18}", "complete", "ag-c2", []),
        ("tool", "ag-r3", "{'temp': 24}", "complete", "ag-c3", []),
        ("assistant", "ag-m2", "Nice is warmest.", "complete", None, []),
    ]
    run = await any_store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.COMPLETE
    assert run.metadata["agui_state"] == {"unit": "C"}
    assert run.metadata["agui_other_events"] == {"CUSTOM:WeatherFetched": 1}


AGNO_PAUSED = [
    shapes.started(),
    # a call with no text before it: Agno opens an empty message as its parent
    start("ag-p0"),
    end("ag-p0"),
    *call("ag-b1", PARIS, "ag-p0"),
    *done("ag-b1", "ag-s1", "{'temp': 20}"),
    # the run pauses on a tool the client runs: a message, then the call, no result
    start("ag-p1"),
    content("ag-p1", "Please confirm."),
    end("ag-p1"),
    *call("ag-x1", LYON, "ag-p1"),
    {"type": "TOOL_CALL_END", "toolCallId": "ag-x1"},
    shapes.finished(),
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_an_agno_paused_run_and_its_answer_next_run(store, tmp_path, path):
    chat = await shapes.fold(path, store, tmp_path, AGNO_PAUSED)
    turn = [
        shapes.PROMPT_RECORD,
        ("assistant", "ag-p0", "", "complete", None, [("ag-b1", "get_weather", PARIS)]),
        ("tool", "ag-s1", "{'temp': 20}", "complete", "ag-b1", []),
        (
            "assistant",
            "ag-p1",
            "Please confirm.",
            "complete",
            None,
            [("ag-x1", "get_weather", LYON)],
        ),
    ]
    assert await shapes.records(store, chat) == turn
    # the client runs the paused tool and sends its answer with the history it holds
    calls = {
        "ag-b1": {
            "id": "ag-b1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": PARIS},
        },
        "ag-x1": {
            "id": "ag-x1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": LYON},
        },
    }
    history = [
        shapes.PROMPT,
        {"id": "ag-p0", "role": "assistant", "content": "", "toolCalls": [calls["ag-b1"]]},
        {"id": "ag-s1", "role": "tool", "content": "{'temp': 20}", "toolCallId": "ag-b1"},
        {
            "id": "ag-p1",
            "role": "assistant",
            "content": "Please confirm.",
            "toolCalls": [calls["ag-x1"]],
        },
        {"id": "client-1", "role": "tool", "content": "confirmed", "toolCallId": "ag-x1"},
    ]
    answer = [
        shapes.started("r-2"),
        start("ag-p2"),
        content("ag-p2", "Done."),
        end("ag-p2"),
        shapes.finished("r-2"),
    ]
    chat = await shapes.fold(
        path, store, tmp_path, answer, run="r-2", messages=history, folder="turn-2"
    )
    assert await shapes.records(store, chat) == [
        *turn,
        ("tool", "client-1", "confirmed", "complete", "ag-x1", []),
        ("assistant", "ag-p2", "Done.", "complete", None, []),
    ]


AGNO_FAILURE = [
    shapes.started(),
    start("ag-e1", **SOURCE),
    content("ag-e1", "Partial"),
    {"type": "RUN_ERROR", "message": "RateLimitError: 429"},
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_an_agno_failure_mid_text(store, tmp_path, path):
    chat = await shapes.fold(path, store, tmp_path, AGNO_FAILURE)
    assert await shapes.records(store, chat) == [
        shapes.PROMPT_RECORD,
        ("assistant", "ag-e1", "Partial", "errored", None, []),
    ]
    run = await store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.ERRORED
    assert run.error == "RateLimitError: 429"
