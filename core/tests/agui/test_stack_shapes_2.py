"""More stack shapes, live and imported: LangGraph, Anthropic thinking, ADK, Agno, Mastra, Vercel.

Second round after ``test_stack_shapes.py`` (whose builders and fold helpers this module
reuses). Each stream is wire JSON in the shape the adapter emits; the expected records are
an independent reading of it, written out literally.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from threadkeep import RunStatus, open_store
from threadkeep.agui import StorageAgent

_SPEC = importlib.util.spec_from_file_location(
    "_agui_stack_shapes", Path(__file__).with_name("test_stack_shapes.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
shapes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(shapes)

PATHS, PROMPT, PROMPT_RECORD = shapes.PATHS, shapes.PROMPT, shapes.PROMPT_RECORD
fold, records, started, finished, text = (
    shapes.fold,
    shapes.records,
    shapes.started,
    shapes.finished,
    shapes.text,
)


def step(kind: str, name: str) -> dict[str, Any]:
    return {"type": f"STEP_{kind}", "stepName": name}


def call(call_id: str, name: str, args: str, parent: str | None) -> list[dict[str, Any]]:
    start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call_id}
    start["toolCallName"] = name
    if parent is not None:
        start["parentMessageId"] = parent
    return [
        start,
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def result(message_id: str, call_id: str, content: str) -> dict[str, Any]:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": call_id,
        "content": content,
        "role": "tool",
    }


async def run_error(store: Any, chat: Any) -> tuple[str | None, str]:
    """The errored run ``r-1``'s error text and code (asserting it ended errored)."""
    run = await store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.ERRORED
    return run.error, run.metadata["agui_error_code"]


def raw_chat_model_end(message_id: str, inp: int, out: int) -> dict[str, Any]:
    """LangGraph's RAW event: the whole LangChain ``on_chat_model_end`` callback."""
    return {
        "type": "RAW",
        "event": {
            "event": "on_chat_model_end",
            "name": "ChatOpenAI",
            "run_id": "4f1c",
            "metadata": {"langgraph_node": "agent", "langgraph_step": 1},
            "data": {
                "output": {
                    "type": "AIMessageChunk",
                    "id": message_id,
                    "content": "",
                    "usage_metadata": {
                        "input_tokens": inp,
                        "output_tokens": out,
                        "total_tokens": inp + out,
                    },
                }
            },
        },
    }


# -- LangGraph (ag-ui-langgraph): a ReAct graph, agent -> tools -> agent ----------------------

LC_1 = "lc_run--0b7e-1"
LC_2 = "lc_run--0b7e-2"
TOOL_MSG = "7d1e9c3a-tool"
LANGGRAPH = [
    started(),
    {"type": "STATE_SNAPSHOT", "snapshot": {"messages": []}},
    step("STARTED", "agent"),
    {"type": "RAW", "event": {"event": "on_chain_start", "name": "agent", "data": {}}},
    # a model turn that only calls a tool: no TEXT_MESSAGE_* for its message
    *call("call_Xy1", "get_weather", '{"city": "Paris"}', LC_1),
    raw_chat_model_end(LC_1, 50, 12),
    step("FINISHED", "agent"),
    step("STARTED", "tools"),
    result(TOOL_MSG, "call_Xy1", "sunny, 21C"),
    step("FINISHED", "tools"),
    step("STARTED", "agent"),  # the same node again
    *text(LC_2, "It is sunny in Paris."),
    raw_chat_model_end(LC_2, 80, 7),
    step("FINISHED", "agent"),
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            PROMPT,
            {
                "id": LC_1,
                "role": "assistant",
                "content": "",
                "toolCalls": [
                    {
                        "id": "call_Xy1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"id": TOOL_MSG, "role": "tool", "content": "sunny, 21C", "toolCallId": "call_Xy1"},
            {"id": LC_2, "role": "assistant", "content": "It is sunny in Paris."},
        ],
    },
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_langgraph_react_graph(every_store, tmp_path, path):
    chat = await fold(path, every_store, tmp_path, LANGGRAPH)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            LC_1,
            "",
            "complete",
            None,
            [("call_Xy1", "get_weather", '{"city": "Paris"}')],
        ),
        ("tool", TOOL_MSG, "sunny, 21C", "complete", "call_Xy1", []),
        ("assistant", LC_2, "It is sunny in Paris.", "complete", None, []),
    ]
    first = await every_store.get_message_by_agui_id(chat.chat_id, LC_1)
    second = await every_store.get_message_by_agui_id(chat.chat_id, LC_2)
    tool = await every_store.get_message_by_agui_id(chat.chat_id, TOOL_MSG)
    assert (first.tokens, second.tokens) == (12, 7)
    assert (first.step, tool.step, second.step) == ("agent", "tools", "agent")
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.COMPLETE
    assert run.metadata["agui_other_events"] == {"RAW": 3}
    steps = await every_store.get_steps(chat.chat_id, "r-1")
    agui_steps = [(s.input["step_name"], s.status.value) for s in steps if s.type == "agui_step"]
    assert agui_steps == [
        ("agent", "completed"),
        ("tools", "completed"),
        ("agent", "completed"),
    ]


# -- reasoning: LangGraph's THINKING_*, Anthropic's thinking with signatures, empty pairs ----


async def reasonings(store: Any, chat: Any) -> list[tuple[Any, ...]]:
    page = await store.list_messages(chat.chat_id, limit=200)
    return [
        (m.agui_id, m.status.value, [(r.content, r.encrypted_value) for r in m.reasonings])
        for m in page.items
        if m.role.value == "reasoning"
    ]


ANTHROPIC = [
    started(),
    {"type": "REASONING_START", "messageId": "th-1"},
    {"type": "REASONING_MESSAGE_START", "messageId": "th-1", "role": "reasoning"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "th-1", "delta": "The user wants "},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "th-1", "delta": "weather."},
    {"type": "REASONING_MESSAGE_END", "messageId": "th-1"},
    {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "th-1",
        "encryptedValue": "EqQBCkYIAxgCIkDsig==",
    },
    {"type": "REASONING_END", "messageId": "th-1"},
    # a redacted_thinking block: an encrypted value and no text at all
    {"type": "REASONING_START", "messageId": "th-2"},
    {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "th-2",
        "encryptedValue": "RedactedBlob==",
    },
    {"type": "REASONING_END", "messageId": "th-2"},
    # an empty thinking pair (LangGraph emits one when a model opens and closes a block)
    {"type": "THINKING_START", "title": "Thinking"},
    {"type": "THINKING_END"},
    {"type": "REASONING_START", "messageId": "th-3"},
    {"type": "REASONING_END", "messageId": "th-3"},
    *text("msg_01", "Sunny."),
    # LangGraph's THINKING_* spelling with text
    {"type": "THINKING_START"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Done."},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "THINKING_END"},
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_anthropic_thinking_signatures_and_empty_thinking(every_store, tmp_path, path):
    chat = await fold(path, every_store, tmp_path, ANTHROPIC)
    assert await reasonings(every_store, chat) == [
        ("th-1", "complete", [("The user wants weather.", "EqQBCkYIAxgCIkDsig==")]),
        ("th-2", "complete", [("", "RedactedBlob==")]),
        (None, "complete", [("Done.", None)]),
    ]
    rows = await records(every_store, chat)
    assert [(r[0], r[1]) for r in rows] == [
        ("user", "msg-1"),
        ("reasoning", "th-1"),
        ("reasoning", "th-2"),
        ("assistant", "msg_01"),
        ("reasoning", None),
    ]
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.COMPLETE
    assert "agui_encrypted_values" not in run.metadata


# -- Google ADK (ag-ui-adk): uuid text ids, calls with no parent, results with fresh ids ------

ADK = [
    started(),
    *text("u-1", "Let me check."),
    *call("adk-c1", "get_weather", '{"city": "Paris"}', None),
    result("u-2", "adk-c1", '{"weather": "sunny"}'),
    # the next model turn calls again, still naming no parent: a new assistant message
    *call("adk-c2", "get_time", '{"city": "Paris"}', None),
    result("u-3", "adk-c2", '{"time": "noon"}'),
    *text("u-4", "Sunny at noon."),
    # a long-running (client) tool: no result in this run
    *call("adk-lro", "ask_user", '{"question": "Book it?"}', None),
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_adk_calls_naming_no_parent_after_a_result_open_a_new_turn(store, tmp_path, path):
    chat = await fold(path, store, tmp_path, ADK)
    assert await records(store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "u-1",
            "Let me check.",
            "complete",
            None,
            [("adk-c1", "get_weather", '{"city": "Paris"}')],
        ),
        ("tool", "u-2", '{"weather": "sunny"}', "complete", "adk-c1", []),
        ("assistant", None, "", "complete", None, [("adk-c2", "get_time", '{"city": "Paris"}')]),
        ("tool", "u-3", '{"time": "noon"}', "complete", "adk-c2", []),
        (
            "assistant",
            "u-4",
            "Sunny at noon.",
            "complete",
            None,
            [("adk-lro", "ask_user", '{"question": "Book it?"}')],
        ),
    ]


async def test_adk_client_tool_answered_next_run_links_to_its_call(store, tmp_path):
    await fold("live", store, tmp_path, ADK)
    sent = [
        PROMPT,
        {"id": "tr-1", "role": "tool", "content": "yes", "toolCallId": "adk-lro"},
    ]
    stream = [started("r-2"), *text("u-5", "Booked."), finished("r-2")]
    chat = await fold("live", store, tmp_path, stream, run="r-2", messages=sent)
    assert await records(store, chat, "r-2") == [
        ("tool", "tr-1", "yes", "complete", "adk-lro", []),
        ("assistant", "u-5", "Booked.", "complete", None, []),
    ]


# -- Agno and Mastra: text ended before each call; Mastra reuses one message id per run ------

AGNO = [
    started(),
    *text("ag-1", "Looking up."),
    *call("ag-c1", "search", '{"q": "paris weather"}', "ag-1"),
    result("ag-r1", "ag-c1", "sunny"),
    *text("ag-2", "Sunny."),
    finished(),
]

MASTRA = [
    started(),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "ms-1", "role": "assistant", "delta": "Hm. "},
    *call("ms-c1", "weatherTool", '{"location":"Paris"}', "ms-1"),
    result("ms-r1", "ms-c1", '{"temperature":21}'),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "ms-1", "role": "assistant", "delta": "21C."},
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_agno_and_mastra_tool_turns(store, tmp_path, path):
    second_store = await open_store("memory://").open()
    chat = await fold(path, store, tmp_path, AGNO)
    assert await records(store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "ag-1",
            "Looking up.",
            "complete",
            None,
            [("ag-c1", "search", '{"q": "paris weather"}')],
        ),
        ("tool", "ag-r1", "sunny", "complete", "ag-c1", []),
        ("assistant", "ag-2", "Sunny.", "complete", None, []),
    ]
    # Mastra: one message id for the run's whole text, as the client shows it: one message
    chat = await fold(path, second_store, tmp_path, MASTRA, folder="mastra")
    assert await records(second_store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "ms-1",
            "Hm. 21C.",
            "complete",
            None,
            [("ms-c1", "weatherTool", '{"location":"Paris"}')],
        ),
        ("tool", "ms-r1", '{"temperature":21}', "complete", "ms-c1", []),
    ]
    await second_store.close()


# -- LangGraph resumed: a node name repeats in a run, the agent replays its stream ----------


class Crash(Exception):
    """The first attempt's failure."""


@pytest.mark.parametrize("policy", ["incremental", "buffered"])
async def test_langgraph_resume_with_a_repeated_node_stores_each_step_once(store, kit, policy):
    attempts: list[int] = []

    async def script(inp):
        attempts.append(1)
        for data in [
            started("run-1") | {"threadId": "thread-1"},
            step("STARTED", "agent"),
            {"type": "THINKING_START"},
            {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "first thought"},
            {"type": "THINKING_END"},
            *call("call_1", "get_weather", "{}", LC_1),
            step("FINISHED", "agent"),
            step("STARTED", "tools"),
            result(TOOL_MSG, "call_1", "sunny"),
            step("FINISHED", "tools"),
            step("STARTED", "agent"),
            {"type": "TEXT_MESSAGE_START", "messageId": LC_2, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": LC_2, "delta": "Sunny"},
        ]:
            yield shapes.live_event(data)
        if len(attempts) == 1:
            raise Crash("worker died")
        for data in [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": LC_2, "delta": " today."},
            {"type": "TEXT_MESSAGE_END", "messageId": LC_2},
            step("FINISHED", "agent"),
            finished("run-1") | {"threadId": "thread-1"},
        ]:
            yield shapes.live_event(data)

    def agent(owner):
        return StorageAgent(kit.Agent(script), store, user_id="u", owner=owner, write_policy=policy)

    inp = kit.run_input()
    with pytest.raises(Crash):
        [_ async for _ in agent("w1").run(inp)]
    resumer = agent("w2")
    resume = await resumer.claim(inp)
    [_ async for _ in resumer.run(inp, resume=resume)]
    history = await kit.history(store, "u", "thread-1")
    assert [
        (
            m.role.value,
            m.agui_id,
            m.content or "".join(r.content for r in m.reasonings),
            m.status.value,
            [c.agui_id for c in m.tool_calls],
        )
        for m in history
    ] == [
        ("user", "user-run-1", "hello from run-1", "complete", []),
        ("reasoning", None, "first thought", "complete", []),
        ("assistant", LC_1, "", "complete", ["call_1"]),
        ("tool", TOOL_MSG, "sunny", "complete", []),
        ("assistant", LC_2, "Sunny today.", "complete", []),
    ]
    chat = await store.find_chat("u", "thread-1")
    steps = await store.get_steps(chat.chat_id, "run-1")
    assert [(s.input["step_name"], s.status.value) for s in steps if s.type == "agui_step"] == [
        ("agent", "completed"),
        ("tools", "completed"),
        ("agent", "completed"),
    ]
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.COMPLETE


# -- LangGraph's graph-level RAW on_chain_end: the whole state, earlier runs' usage included -


def chain_end(*messages: tuple[str, int, int]) -> dict[str, Any]:
    """RAW ``on_chain_end`` of the graph: every message of the state with its usage."""
    state = [
        {
            "type": "ai",
            "id": message_id,
            "content": "...",
            "usage_metadata": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
        }
        for message_id, i, o in messages
    ]
    return {
        "type": "RAW",
        "event": {
            "event": "on_chain_end",
            "name": "LangGraph",
            "data": {"output": {"messages": state}},
        },
    }


@pytest.mark.parametrize("path", PATHS)
async def test_usage_of_earlier_runs_messages_is_not_given_to_this_runs_answer(
    every_store, tmp_path, path
):
    await fold(path, every_store, tmp_path, LANGGRAPH)
    sent = [
        PROMPT,
        {"id": LC_2, "role": "assistant", "content": "It is sunny in Paris."},
        {"id": "msg-2", "role": "user", "content": "Thanks"},
    ]
    stream = [
        started("r-2"),
        *text("lc_run--3", "You are welcome."),
        chain_end((LC_1, 50, 12), (LC_2, 80, 7), ("lc_run--3", 95, 4)),
        finished("r-2"),
    ]
    chat = await fold(path, every_store, tmp_path, stream, run="r-2", messages=sent, folder="r2")
    answer = await every_store.get_message_by_agui_id(chat.chat_id, "lc_run--3")
    usage = {"input_tokens": 95, "output_tokens": 4, "total_tokens": 99}
    assert (answer.tokens, answer.metadata["usage"]) == (4, usage)
    run = await every_store.get_run(chat.chat_id, "r-2")
    assert run.metadata["agui_token_usage"] == usage
    earlier = await every_store.get_message_by_agui_id(chat.chat_id, LC_1)
    assert earlier.tokens == 12


# -- raw SDK agents: each provider's usage object, as its stream reports it ----------------

SDK_USAGE = {
    # OpenAI chat completions, the final chunk (stream_options.include_usage)
    "openai": [
        {
            "type": "RAW",
            "event": {
                "id": "chatcmpl-9",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {
                    "prompt_tokens": 20,
                    "completion_tokens": 9,
                    "total_tokens": 29,
                    "completion_tokens_details": {"reasoning_tokens": 4},
                },
            },
        }
    ],
    # Anthropic: message_start (input, 1 output), then message_delta (cumulative output)
    "anthropic": [
        {
            "type": "RAW",
            "event": {
                "type": "message_start",
                "message": {"id": "msg_01", "usage": {"input_tokens": 20, "output_tokens": 1}},
            },
        },
        {"type": "RAW", "event": {"type": "message_delta", "usage": {"output_tokens": 9}}},
    ],
    # Gemini: usageMetadata on the last chunk, thoughts counted apart
    "gemini": [
        {
            "type": "RAW",
            "event": {
                "usageMetadata": {
                    "promptTokenCount": 20,
                    "candidatesTokenCount": 9,
                    "totalTokenCount": 33,
                    "thoughtsTokenCount": 4,
                }
            },
        }
    ],
}
SDK_EXPECTED = {
    "openai": {"input_tokens": 20, "output_tokens": 9, "total_tokens": 29, "reasoning_tokens": 4},
    "anthropic": {"input_tokens": 20, "output_tokens": 9, "total_tokens": 29},
    "gemini": {"input_tokens": 20, "output_tokens": 9, "total_tokens": 33, "reasoning_tokens": 4},
}


@pytest.mark.parametrize("sdk", sorted(SDK_USAGE))
async def test_raw_sdk_usage_reports(store, tmp_path, sdk):
    stream = [started(), *text("a1", "Hi."), *SDK_USAGE[sdk], finished()]
    chat = await fold("import", store, tmp_path, stream)
    answer = await store.get_message_by_agui_id(chat.chat_id, "a1")
    assert (answer.tokens, answer.metadata["usage"]) == (9, SDK_EXPECTED[sdk])


# -- Vercel AI SDK's bridge: chunks, results under `result` with no messageId, camelCase usage -

VERCEL = [
    started(),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "v-1", "role": "assistant", "delta": "On it."},
    {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "toolu_1",
        "toolCallName": "weather",
        "parentMessageId": "v-1",
        "delta": '{"city":"Paris"}',
    },
    {"type": "TOOL_CALL_RESULT", "toolCallId": "toolu_1", "result": {"temp": 21}},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "v-2", "role": "assistant", "delta": "21C."},
    {
        "type": "CUSTOM",
        "name": "finish",
        "value": {"usage": {"promptTokens": 30, "completionTokens": 5}},
    },
    {"type": "RUN_ERROR", "message": "rate limited", "code": "429"},
]


@pytest.mark.parametrize("path", PATHS)
async def test_vercel_ai_sdk_bridge(store, tmp_path, path):
    chat = await fold(path, store, tmp_path, VERCEL)
    assert await records(store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "v-1",
            "On it.",
            "complete",
            None,
            [("toolu_1", "weather", '{"city":"Paris"}')],
        ),
        ("tool", "result:toolu_1", '{"temp": 21}', "complete", "toolu_1", []),
        # a chunked message ends at the next event of another kind (the client's rule)
        ("assistant", "v-2", "21C.", "complete", None, []),
    ]
    answer = await store.get_message_by_agui_id(chat.chat_id, "v-2")
    assert answer.tokens == 5
    assert await run_error(store, chat) == ("rate limited", "429")


# -- LangGraph supervisor with a subgraph: nested steps, a snapshot per node, an error ------

TRANSFER = {
    "id": "call_tr",
    "type": "function",
    "function": {"name": "transfer_to_research", "arguments": "{}"},
}
SUPERVISOR = [
    started(),
    step("STARTED", "supervisor"),
    *text("lc-s", "Routing."),
    *call("call_tr", "transfer_to_research", "{}", "lc-s"),
    result("t-1", "call_tr", "Transferred"),
    step("FINISHED", "supervisor"),
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            PROMPT,
            {"id": "lc-s", "role": "assistant", "content": "Routing.", "toolCalls": [TRANSFER]},
            {"id": "t-1", "role": "tool", "content": "Transferred", "toolCallId": "call_tr"},
        ],
    },
    step("STARTED", "research"),
    step("STARTED", "agent"),  # the subgraph's node, inside the outer node
    *text("lc-r", "Found it."),
    step("FINISHED", "agent"),
    step("FINISHED", "research"),
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            PROMPT,
            {"id": "lc-s", "role": "assistant", "content": "Routing.", "toolCalls": [TRANSFER]},
            {"id": "t-1", "role": "tool", "content": "Transferred", "toolCallId": "call_tr"},
            {"id": "lc-r", "role": "assistant", "content": "Found it."},
        ],
    },
    step("STARTED", "supervisor"),
    {"type": "TEXT_MESSAGE_START", "messageId": "lc-f", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "lc-f", "delta": "Final"},
    {
        "type": "RUN_ERROR",
        "message": "Recursion limit of 25 reached",
        "code": "GRAPH_RECURSION_LIMIT",
    },
]


@pytest.mark.parametrize("path", PATHS)
async def test_langgraph_supervisor_subgraph_snapshots_and_error(store, tmp_path, path):
    chat = await fold(path, store, tmp_path, SUPERVISOR)
    assert await records(store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "lc-s",
            "Routing.",
            "complete",
            None,
            [("call_tr", "transfer_to_research", "{}")],
        ),
        ("tool", "t-1", "Transferred", "complete", "call_tr", []),
        ("assistant", "lc-r", "Found it.", "complete", None, []),
        ("assistant", "lc-f", "Final", "errored", None, []),
    ]
    page = await store.list_messages(chat.chat_id, limit=200)
    steps = {m.agui_id: m.step for m in page.items}
    assert steps == {
        "msg-1": None,
        "lc-s": "supervisor",
        "t-1": "supervisor",
        "lc-r": "agent",
        "lc-f": "supervisor",
    }
    assert await run_error(store, chat) == (
        "Recursion limit of 25 reached",
        "GRAPH_RECURSION_LIMIT",
    )
    recorded = await store.get_steps(chat.chat_id, "r-1")
    assert [(s.input["step_name"], s.status.value) for s in recorded if s.type == "agui_step"] == [
        ("supervisor", "completed"),
        ("research", "completed"),
        ("agent", "completed"),
        ("supervisor", "failed"),
    ]


# -- CrewAI flows (ag-ui-crewai): a snapshot of the flow's LiteLLM-shaped messages per method -


def crew_snapshot(*final: dict[str, Any]) -> dict[str, Any]:
    """``MESSAGES_SNAPSHOT`` of ``flow.state.messages``: no ids, snake_case tool fields."""
    call_c1 = {
        "id": "call_c1",
        "type": "function",
        "function": {"name": "search", "arguments": '{"q":"paris"}'},
    }
    return {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"role": "user", "content": PROMPT["content"]},
            {"role": "assistant", "content": "", "tool_calls": [call_c1]},
            {"role": "tool", "content": "sunny", "tool_call_id": "call_c1"},
            *final,
        ],
    }


CREWAI = [
    started(),
    step("STARTED", "chat"),
    *call("call_c1", "search", '{"q":"paris"}', "chatcmpl-1"),
    crew_snapshot(),  # the flow ran the tool itself: its result is only in the snapshot
    *text("chatcmpl-2", "Sunny in Paris."),
    step("FINISHED", "chat"),
    crew_snapshot({"role": "assistant", "content": "Sunny in Paris."}),
    {"type": "STATE_SNAPSHOT", "snapshot": {"messages": [], "city": "Paris"}},
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_crewai_flow_snapshots_without_ids(store, tmp_path, path):
    chat = await fold(path, store, tmp_path, CREWAI)
    rows = await records(store, chat)
    assert rows[2][1].startswith("snapshot:2:")
    assert rows == [
        PROMPT_RECORD,
        ("assistant", "chatcmpl-1", "", "complete", None, [("call_c1", "search", '{"q":"paris"}')]),
        ("tool", rows[2][1], "sunny", "complete", "call_c1", []),
        ("assistant", "chatcmpl-2", "Sunny in Paris.", "complete", None, []),
    ]
    run = await store.get_run(chat.chat_id, "r-1")
    assert run.metadata["agui_state"] == {"messages": [], "city": "Paris"}


# -- an older recorder's reasoning message start with role "assistant" -----------------------

OLD_REASONING = [
    started(),
    {"type": "REASONING_START", "messageId": "think-1"},
    {"type": "REASONING_MESSAGE_START", "messageId": "think-1", "role": "assistant"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "think-1", "delta": "Rain is "},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "think-1", "delta": "likely."},
    {"type": "REASONING_MESSAGE_END", "messageId": "think-1"},
    {"type": "REASONING_END", "messageId": "think-1"},
    *text("a1", "Take an umbrella."),
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_a_reasoning_start_with_role_assistant_is_a_reasoning_start(
    every_store, tmp_path, path, caplog
):
    chat = await fold(path, every_store, tmp_path, OLD_REASONING)
    assert await reasonings(every_store, chat) == [
        ("think-1", "complete", [("Rain is likely.", None)])
    ]
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        ("reasoning", "think-1", "", "complete", None, []),
        ("assistant", "a1", "Take an umbrella.", "complete", None, []),
    ]
    assert "invalid" not in caplog.text  # not skipped as an invalid event
