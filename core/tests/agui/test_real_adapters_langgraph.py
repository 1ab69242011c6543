"""LangGraph through the official ``ag-ui-langgraph`` adapter (``LangGraphAgent``), as it streams.

A ``StateGraph`` (an agent node, LangGraph's prebuilt ``ToolNode``, ``tools_condition``, an
in-memory checkpointer) runs offline on a scripted chat model: LangChain's
``GenericFakeChatModel`` taught to stream what provider models stream (text chunks,
``tool_call_chunks`` with the arguments split, ``usage_metadata`` on the last chunk). Each
run is encoded with ``ag_ui.encoder.EventEncoder`` (the SSE the adapter's FastAPI endpoint
sends), stored live through ``StorageAgent`` (both write policies) and imported from a run
folder, on memory, SQLite and PostgreSQL (the first test; the rest on memory and SQLite).

What the adapter sends beyond the messages: a ``RAW`` event for every LangChain callback
(whole message dicts, usage included), ``rawEvent`` on every typed event, ``STEP_*`` per
graph node, a ``STATE_SNAPSHOT`` after each node and at the end, a final
``MESSAGES_SNAPSHOT`` of the whole thread (tool arguments re-serialized by ``json.dumps``,
tool results under the ids ``ToolNode`` minted), and ``RUN_FINISHED.usage`` per provider.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

pytest.importorskip("ag_ui_langgraph", reason="ag-ui-langgraph (the AG-UI adapter) not installed")

from ag_ui.encoder import EventEncoder
from ag_ui_langgraph import LangGraphAgent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from threadkeep import RunStatus

_SPEC = importlib.util.spec_from_file_location(
    "_agui_real_adapter_kit_lg", Path(__file__).with_name("real_adapter_kit.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
kit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kit)

# the adapter calls LangGraph's deprecated get_config_jsonschema (ag-ui-langgraph 0.0.47)
pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

THREAD = "lg-thread"
PROMPT = ("user", "msg-1", "Weather in Paris?", "complete", None, [], [], None)


class StreamingFakeChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` streaming a scripted turn as provider models do.

    Each item of ``messages`` is a turn: ``{"id", "text": [chunks], "calls": [(id, name,
    [argument pieces])], "usage": {...}}``, or an exception to raise after ``text``.
    """

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        turn: Any = next(self.messages)
        for piece in turn.get("text", []):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece, id=turn["id"]))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        if turn.get("error"):
            raise turn["error"]
        for index, (call_id, name, pieces) in enumerate(turn.get("calls", [])):
            for n, piece in enumerate(pieces):
                first = n == 0
                part = {
                    "id": call_id if first else None,
                    "name": name if first else None,
                    "args": piece,
                    "index": index,
                }
                message = AIMessageChunk(content="", id=turn["id"], tool_call_chunks=[part])
                yield ChatGenerationChunk(message=message)
        if turn.get("usage"):
            last = AIMessageChunk(
                content="", id=turn["id"], usage_metadata=turn["usage"], chunk_position="last"
            )
            yield ChatGenerationChunk(message=last)


@tool
def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


@tool
def clock() -> str:
    """The time."""
    return "noon"


def recorder(*turns: dict[str, Any]) -> Any:
    """A Recorder running ``LangGraphAgent`` over a tool-calling graph on the scripted model."""
    model = StreamingFakeChatModel(messages=iter(turns))

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([weather, clock]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    adapter = LangGraphAgent(name="weather", graph=graph.compile(checkpointer=InMemorySaver()))
    return kit.Recorder(adapter.run, EventEncoder().encode)


def request(run: str = "r-1", messages: list[Any] | None = None) -> RunAgentInput:
    return kit.run_input(THREAD, run, messages=messages)


TOOL_TURN = {
    "id": "ai-1",
    "text": ["Let me ", "check."],
    "calls": [
        # OpenAI's shape: the chunk opening the call carries no arguments
        ("call_w", "weather", ["", '{"city":', '"Paris"}']),
        # the opening chunk carries some: the adapter drops them (only TOOL_CALL_START)
        ("call_r", "weather", ['{"city":', '"Rome"}']),
        # Gemini's shape: the whole call in one chunk, so no TOOL_CALL_ARGS at all
        ("call_c", "clock", ["{}"]),
    ],
    "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
}
ANSWER_TURN = {
    "id": "ai-2",
    "text": ["Sunny ", "at noon."],
    "usage": {"input_tokens": 30, "output_tokens": 4, "total_tokens": 34},
}


def results(events: list[dict[str, Any]]) -> dict[str, str]:
    """Tool call id -> the id of the message answering it (ToolNode mints uuid4s)."""
    return {e["toolCallId"]: e["messageId"] for e in events if e["type"] == "TOOL_CALL_RESULT"}


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_tool_turn_with_raw_snapshots_and_usage(any_store, tmp_path, path):
    events = await kit.fold(path, any_store, tmp_path, recorder(TOOL_TURN, ANSWER_TURN), request())
    kinds = {e["type"] for e in events}
    assert {"RAW", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "STEP_STARTED"} <= kinds
    streamed = {
        call: "".join(
            e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == call
        )
        for call in ("call_w", "call_r", "call_c")
    }
    assert streamed == {"call_w": '{"city":"Paris"}', "call_r": '"Rome"}', "call_c": ""}
    [snapshot] = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert [c["function"]["arguments"] for c in snapshot["messages"][1]["toolCalls"]] == [
        '{"city": "Paris"}',  # json.dumps of the parsed arguments, not the model's text
        '{"city": "Rome"}',
        "{}",
    ]
    answers = {"call_w": "sunny in Paris", "call_r": "sunny in Rome", "call_c": "noon"}
    # ToolNode runs the calls concurrently: results come in the order they finish
    results = [(e["messageId"], e["toolCallId"]) for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert sorted(call for _, call in results) == sorted(answers)
    calls = [
        ("call_w", "weather", '{"city":"Paris"}'),  # the exact streamed text stays
        ("call_r", "weather", '{"city": "Rome"}'),  # streamed text lost a piece: the snapshot's
        ("call_c", "clock", "{}"),  # nothing streamed: the snapshot's
    ]
    assert await kit.history(any_store, THREAD) == [
        PROMPT,
        ("assistant", "ai-1", "Let me check.", "complete", None, calls, [], 7),
        *[("tool", mid, answers[call], "complete", call, [], [], None) for mid, call in results],
        ("assistant", "ai-2", "Sunny at noon.", "complete", None, [], [], 4),
    ]
    chat = await any_store.find_chat(kit.USER, THREAD)
    [asked] = [
        m
        for m in (await any_store.list_messages(chat.chat_id, limit=50)).items
        if m.agui_id == "ai-1"
    ]
    assert asked.metadata["agui_snapshot"] == {
        "tool_calls": {"call_w": '{"city": "Paris"}'},
        "streamed_tool_calls": {"call_r": '"Rome"}'},
    }
    assert asked.metadata["usage"] == TOOL_TURN["usage"]
    run = await kit.run_of(any_store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.COMPLETE, None)
    assert run.metadata["agui_token_usage"] == {
        "input_tokens": 42,
        "output_tokens": 11,
        "total_tokens": 53,
    }
    assert run.metadata["agui_usage"] == [
        {
            "provider": "streamingfakechatmodel",
            "inputTokens": 42,
            "outputTokens": 11,
            "totalTokens": 53,
        }
    ]
    assert run.metadata["agui_other_events"]["RAW"] == sum(e["type"] == "RAW" for e in events)
    assert run.metadata["agui_state"]["messages"][-1]["content"] == "Sunny at noon."


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_model_error_mid_answer_ends_the_run_errored(store, tmp_path, path):
    failing = {"id": "ai-1", "text": ["It is ", "sun"], "error": RuntimeError("rate limited")}
    events = await kit.fold(path, store, tmp_path, recorder(failing), request())
    assert events[-1]["type"] == "RUN_ERROR"
    assert "rate limited" in events[-1]["message"]
    assert await kit.history(store, THREAD) == [
        PROMPT,
        ("assistant", "ai-1", "It is sun", "errored", None, [], [], None),
    ]
    run = await kit.run_of(store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.ERRORED, events[-1]["message"])


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_second_turn_sends_the_snapshot_back_and_stores_only_the_new_prompt(
    store, tmp_path, path
):
    second_answer = {"id": "ai-3", "text": ["You asked ", "about Paris."]}
    rec = recorder(TOOL_TURN, ANSWER_TURN, second_answer)
    first = await kit.fold(path, store, tmp_path, rec, request("r-1"))
    before = await kit.history(store, THREAD)
    [snapshot] = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"]
    prompt = {"id": "msg-2", "role": "user", "content": "What did I ask?"}
    again = kit.next_turn(THREAD, "r-2", snapshot["messages"], prompt)
    await kit.fold(path, store, tmp_path, rec, again)
    assert await kit.history(store, THREAD) == [
        *before,
        ("user", "msg-2", "What did I ask?", "complete", None, [], [], None),
        ("assistant", "ai-3", "You asked about Paris.", "complete", None, [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-2")).status is RunStatus.COMPLETE
