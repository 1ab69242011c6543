"""Pydantic AI's own AG-UI adapter (``pydantic_ai.ui.ag_ui.AGUIAdapter``), stored as it streams.

The agent runs offline on a scripted ``FunctionModel``; the adapter turns its run into AG-UI
events and encodes them with its own SSE encoder. Each run is stored live through
``StorageAgent`` (both write policies) and imported from a run folder, on memory, SQLite and
PostgreSQL (the first two tests; the rest on memory and SQLite, to keep CI short); the stored
history must equal the reading of the stream stated literally below
(ids the adapter mints, uuid4s, are picked from the captured stream by position).

What Pydantic AI 2.x sends that hand-written streams did not: an empty ``TEXT_MESSAGE_START``/
``END`` pair as the parent of each turn's tool calls, reasoning as ``REASONING_*`` with the
thinking signature in a ``REASONING_ENCRYPTED_VALUE`` naming the reasoning message, the tool
outcome of a failed or retried call in a ``REASONING_ENCRYPTED_VALUE`` naming the tool
result, run token usage on ``RUN_FINISHED.usage`` (``include_usage``), and ``RUN_ERROR`` with
only a ``message`` when the model or a tool raises.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

pytest.importorskip("pydantic_ai.ui.ag_ui", reason="pydantic-ai (the AG-UI adapter) not installed")

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingPart,
    DeltaToolCall,
    FunctionModel,
)
from pydantic_ai.ui.ag_ui import AGUIAdapter

from threadkeep import RunStatus, open_store

_SPEC = importlib.util.spec_from_file_location(
    "_agui_real_adapter_kit", Path(__file__).with_name("real_adapter_kit.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
kit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kit)

THREAD = "pai-thread"
PROMPT = ("user", "msg-1", "Weather in Paris?", "complete", None, [], [], None)
PROMPT_MESSAGE = {"id": "msg-1", "role": "user", "content": "Weather in Paris?"}
SIGNATURE = '{"signature": "sig-1", "provider_name": "function"}'


def request(run: str = "r-1", messages: list[Any] | None = None) -> RunAgentInput:
    return kit.run_input(THREAD, run, messages=messages)


def answered(messages: list[ModelMessage]) -> bool:
    """The model has seen a tool's answer in this turn (the last request holds a return)."""
    last = messages[-1]
    return isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts)


def recorder(stream: Any, *tools: Any, **agent_options: Any) -> Any:
    """A Recorder running ``AGUIAdapter`` over an agent on ``FunctionModel(stream)``."""
    agent: Agent[None, Any] = Agent(FunctionModel(stream_function=stream), **agent_options)
    for tool in tools:
        agent.tool_plain(tool)

    def make(run_input: RunAgentInput) -> AsyncIterator[Any]:
        adapter = AGUIAdapter(agent=agent, run_input=run_input, include_usage=True)
        return adapter.run_stream()

    encoder = AGUIAdapter(agent=agent, run_input=request()).build_event_stream()
    return kit.Recorder(make, encoder.encode_event)


def weather(city: str) -> str:
    return f"sunny in {city}"


def clock() -> str:
    return "noon"


async def thinks_then_calls_two_tools(messages: list[ModelMessage], info: AgentInfo) -> Any:
    if answered(messages):
        yield "It is sunny "
        yield "at noon."
        return
    yield {0: DeltaThinkingPart(content="Need weather ")}
    yield {0: DeltaThinkingPart(content="and time.", signature="sig-1")}
    yield {1: DeltaToolCall(name="weather", json_args='{"city":', tool_call_id="call_w")}
    yield {1: DeltaToolCall(json_args=' "Paris"}')}
    yield {2: DeltaToolCall(name="clock", json_args="{}", tool_call_id="call_c")}


def tool_turn_records(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The records a run of :func:`thinks_then_calls_two_tools` stands for (after the prompt)."""
    [thought] = kit.ids(events, "REASONING_START")
    parent, answer = kit.ids(events, "TEXT_MESSAGE_START")
    # the tools run concurrently: their results come in the order they finish
    results = [(e["messageId"], e["toolCallId"]) for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert sorted(call for _, call in results) == ["call_c", "call_w"]
    answers = {"call_w": "sunny in Paris", "call_c": "noon"}
    calls = [("call_w", "weather", '{"city": "Paris"}'), ("call_c", "clock", "{}")]
    reasoning = [("Need weather and time.", SIGNATURE)]
    return [
        ("reasoning", thought, "", "complete", None, [], reasoning, None),
        ("assistant", parent, "", "complete", None, calls, [], None),
        *[("tool", mid, answers[call], "complete", call, [], [], None) for mid, call in results],
        ("assistant", answer, "It is sunny at noon.", "complete", None, [], [], None),
    ]


@pytest.mark.parametrize("path", kit.PATHS)
async def test_reasoning_parallel_tool_calls_results_and_usage(any_store, tmp_path, path):
    events = await kit.fold(
        path, any_store, tmp_path, recorder(thinks_then_calls_two_tools, weather, clock), request()
    )
    assert await kit.history(any_store, THREAD) == [PROMPT, *tool_turn_records(events)]
    run = await kit.run_of(any_store, THREAD, "r-1")
    usage = {"inputTokens": 100, "outputTokens": 18, "totalTokens": 118}
    assert (run.status, run.error) == (RunStatus.COMPLETE, None)
    assert run.metadata["agui_usage"] == [
        {"model": "function::thinks_then_calls_two_tools", **usage}
    ]
    assert run.metadata["agui_token_usage"] == {
        "input_tokens": 100,
        "output_tokens": 18,
        "total_tokens": 118,
    }


def explode(n: int) -> str:
    raise ValueError(f"kaboom {n}")


async def calls_explode(messages: list[ModelMessage], info: AgentInfo) -> Any:
    if answered(messages):
        yield "Sorry, the tool failed."
        return
    yield {0: DeltaToolCall(name="explode", json_args='{"n": 1}', tool_call_id="call_x")}


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_tool_that_raises_errors_the_run_and_keeps_its_call_and_result(
    any_store, tmp_path, path
):
    events = await kit.fold(path, any_store, tmp_path, recorder(calls_explode, explode), request())
    [parent] = kit.ids(events, "TEXT_MESSAGE_START")
    [result] = kit.ids(events, "TOOL_CALL_RESULT")
    failed = "Tool execution was interrupted by an error."
    assert await kit.history(any_store, THREAD) == [
        PROMPT,
        ("assistant", parent, "", "complete", None, [("call_x", "explode", '{"n": 1}')], [], None),
        ("tool", result, failed, "errored", "call_x", [], [], None),
    ]
    chat = await any_store.find_chat(kit.USER, THREAD)
    [tool] = [
        m
        for m in (await any_store.list_messages(chat.chat_id, limit=50)).items
        if m.agui_id == result
    ]
    assert tool.metadata["agui_encrypted_value"] == '{"pydantic_ai": {"outcome": "failed"}}'
    run = await kit.run_of(any_store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.ERRORED, "kaboom 1")


def explode_retried(n: int) -> str:
    raise ModelRetry(f"n={n} is too small")


async def calls_explode_retried(messages: list[ModelMessage], info: AgentInfo) -> Any:
    if len(messages) > 1:  # the retry prompt came back
        yield "Sorry, the tool failed."
        return
    yield {0: DeltaToolCall(name="explode_retried", json_args='{"n": 1}', tool_call_id="call_r")}


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_retried_tool_call_keeps_its_retry_prompt_and_the_answer(store, tmp_path, path):
    events = await kit.fold(
        path, store, tmp_path, recorder(calls_explode_retried, explode_retried), request()
    )
    parent, answer = kit.ids(events, "TEXT_MESSAGE_START")
    [result] = kit.ids(events, "TOOL_CALL_RESULT")
    [retry] = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "n=1 is too small" in retry
    call = ("call_r", "explode_retried", '{"n": 1}')
    assert await kit.history(store, THREAD) == [
        PROMPT,
        ("assistant", parent, "", "complete", None, [call], [], None),
        ("tool", result, retry, "complete", "call_r", [], [], None),
        ("assistant", answer, "Sorry, the tool failed.", "complete", None, [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-1")).status is RunStatus.COMPLETE


async def fails_mid_answer(messages: list[ModelMessage], info: AgentInfo) -> Any:
    yield "Partial ans"
    raise RuntimeError("upstream 529 overloaded")


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_model_error_mid_stream_ends_the_run_errored(store, tmp_path, path):
    events = await kit.fold(path, store, tmp_path, recorder(fails_mid_answer), request())
    [answer] = kit.ids(events, "TEXT_MESSAGE_START")
    assert events[-1] == {
        "type": "RUN_ERROR",
        "timestamp": events[-1]["timestamp"],
        "message": "upstream 529 overloaded",
    }
    assert await kit.history(store, THREAD) == [
        PROMPT,
        ("assistant", answer, "Partial ans", "complete", None, [], [], None),
    ]
    run = await kit.run_of(store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.ERRORED, "upstream 529 overloaded")


class City(BaseModel):
    name: str
    population: int


async def answers_with_the_output_tool(messages: list[ModelMessage], info: AgentInfo) -> Any:
    [output] = info.output_tools
    args = '{"name": "Paris", "population": 2100000}'
    yield {0: DeltaToolCall(name=output.name, json_args=args, tool_call_id="call_o")}


@pytest.mark.parametrize("path", kit.PATHS)
async def test_structured_output_through_the_output_tool(store, tmp_path, path):
    events = await kit.fold(
        path,
        store,
        tmp_path,
        recorder(answers_with_the_output_tool, output_type=City),
        request(),
    )
    [parent] = kit.ids(events, "TEXT_MESSAGE_START")
    [result] = kit.ids(events, "TOOL_CALL_RESULT")
    call = ("call_o", "final_result", '{"name": "Paris", "population": 2100000}')
    assert await kit.history(store, THREAD) == [
        PROMPT,
        ("assistant", parent, "", "complete", None, [call], [], None),
        ("tool", result, "Final result processed.", "complete", "call_o", [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-1")).status is RunStatus.COMPLETE


async def weather_then_recall(messages: list[ModelMessage], info: AgentInfo) -> Any:
    if answered(messages):
        yield "Sunny."
        return
    if len(messages) > 1:  # the second turn: the whole history came back
        yield f"You asked {len(messages)} messages ago."
        return
    yield {0: DeltaToolCall(name="weather", json_args='{"city": "Paris"}', tool_call_id="call_1")}


@pytest.mark.parametrize("path", kit.PATHS)
@pytest.mark.parametrize("history_from", ["client", "dump_messages"])
async def test_a_second_turn_carrying_the_history_back_stores_only_the_new_prompt(
    store, tmp_path, path, history_from
):
    rec = recorder(weather_then_recall, weather)
    first = await kit.fold(path, store, tmp_path, rec, request("r-1"))
    before = await kit.history(store, THREAD)
    if history_from == "client":
        back = kit.client_messages(PROMPT_MESSAGE, first)  # as @ag-ui/client builds it
    else:
        back = [m.model_dump(by_alias=True) for m in AGUIAdapter.dump_messages(pydantic_history())]
    prompt = {"id": "msg-2", "role": "user", "content": "And what did I ask?"}
    second_input = kit.next_turn(THREAD, "r-2", back, prompt)
    second = await kit.fold(path, store, tmp_path, rec, second_input)
    [answer] = kit.ids(second, "TEXT_MESSAGE_START")
    reply = next(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert await kit.history(store, THREAD) == [
        *before,
        ("user", "msg-2", "And what did I ask?", "complete", None, [], [], None),
        ("assistant", answer, reply, "complete", None, [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-2")).status is RunStatus.COMPLETE


def pydantic_history() -> list[ModelMessage]:
    """The first turn as Pydantic AI holds it (server-side history, ids of its own)."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, UserPromptPart

    return [
        ModelRequest(parts=[UserPromptPart(content="Weather in Paris?")]),
        ModelResponse(parts=[ToolCallPart("weather", '{"city": "Paris"}', tool_call_id="call_1")]),
        ModelRequest(parts=[ToolReturnPart("weather", "sunny in Paris", tool_call_id="call_1")]),
        ModelResponse(parts=[TextPart("Sunny.")]),
    ]


def test_the_cli_imports_run_folders_of_the_adapter_s_sse_and_json_lines(cli, tmp_path):
    """``threadkeep import DIR --format agui``: a run folder per recording, as harnesses lay
    them out, one holding the adapter's SSE text verbatim; a second import writes nothing."""
    root = tmp_path / "recordings"
    streams = []
    for name in ("jsonl", "sse"):
        rec = recorder(thinks_then_calls_two_tools, weather, clock)
        asyncio.run(kit.drain(rec, request()))
        kit.write_run_folder(root / name, rec, request())
        if name == "sse":  # the wire text itself, as an SSE capture
            (root / name / "response.jsonl").unlink()
            (root / name / "response.sse").write_text("".join(rec.wire), encoding="utf-8")
        streams.append(rec.events())
    url = f"sqlite+aiosqlite:///{tmp_path / 'tk.db'}"
    first = cli.json("import", str(root), "--format", "agui", "--url", url, "--json")
    assert (first["chats_created"], first["messages_created"], first["tool_calls_created"]) == (
        2,
        12,
        4,
    )

    async def stored() -> list[list[tuple[Any, ...]]]:
        async with open_store(url) as store:
            chats = (await store.list_chats(limit=10)).items
            # one chat per recording: the thread id scoped by the recording's folder
            assert sorted(c.thread_id for c in chats) == [
                f"agui:jsonl:{THREAD}",
                f"agui:sse:{THREAD}",
            ]
            found = []
            for chat in chats:
                page = await store.list_messages(chat.chat_id, limit=50)
                found.append([kit.summary(m) for m in page.items])
            return found

    histories = asyncio.run(stored())
    expected = [[PROMPT, *tool_turn_records(events)] for events in streams]
    assert sorted(histories) == sorted(expected)
    again = cli.json("import", str(root), "--format", "agui", "--url", url, "--json")
    assert (again["chats_created"], again["messages_created"], again["messages_present"]) == (
        0,
        0,
        12,
    )
