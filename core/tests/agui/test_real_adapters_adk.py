"""Google ADK through the official ``ag-ui-adk`` middleware (``ADKAgent``), as it streams.

An ADK ``LlmAgent`` with a Python tool runs offline on a scripted ``BaseLlm`` (partial text
responses, a function call, usage metadata, an error); ``ADKAgent`` translates its events
into AG-UI, encoded with ``ag_ui.encoder.EventEncoder`` (the SSE its FastAPI endpoint
sends). Each run is stored live through ``StorageAgent`` (both write policies) and imported
from a run folder, on memory, SQLite and PostgreSQL (the first test; the rest on memory and
SQLite).

What ADK sends: ``TOOL_CALL_START`` naming no ``parentMessageId`` (the call belongs to the
text message before it), ``TOOL_CALL_RESULT`` without ``role``, no token usage at all (the
middleware drops the model's ``usage_metadata``), and with ``emit_messages_snapshot`` a
final ``MESSAGES_SNAPSHOT`` whose every message id (the user's prompt included) is a fresh
uuid4 that matches nothing streamed: it must reconcile by content and tool call id.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

pytest.importorskip("ag_ui_adk", reason="ag-ui-adk (the AG-UI middleware) not installed")

from ag_ui.encoder import EventEncoder
from ag_ui_adk import ADKAgent
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions import InMemorySessionService
from google.genai import types

from threadkeep import RunStatus

_SPEC = importlib.util.spec_from_file_location(
    "_agui_real_adapter_kit_adk", Path(__file__).with_name("real_adapter_kit.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
kit = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(kit)

# ADKAgent builds ADK's experimental in-memory credential service
pytestmark = pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")

THREAD = "adk-thread"
PROMPT = ("user", "msg-1", "Weather in Paris?", "complete", None, [], [], None)


def get_weather(city: str) -> dict[str, Any]:
    """Return the weather in ``city``."""
    return {"city": city, "forecast": "sunny"}


def text(piece: str, *, partial: bool = True, **extra: Any) -> LlmResponse:
    content = types.Content(role="model", parts=[types.Part(text=piece)])
    return LlmResponse(content=content, partial=partial, **extra)


USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=11, candidates_token_count=5, total_token_count=16
)


class ScriptedLlm(BaseLlm):
    """Turn 1 streams a sentence and calls ``get_weather``; after the result it answers;
    any later prompt gets how many user messages the model saw; ``"fail"`` raises mid-answer.
    """

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents)
        last = contents[-1].parts or []
        prompts = [p.text for c in contents if c.role == "user" for p in c.parts or [] if p.text]
        if any(p.function_response is not None for p in last):
            yield text("It is ")
            yield text("sunny.")
            yield text("It is sunny.", partial=False, usage_metadata=USAGE)
        elif prompts[-1] == "fail":
            yield text("Half an ")
            raise RuntimeError("quota exhausted")
        elif prompts[-1] == "Weather in Paris?":
            call = types.FunctionCall(name="get_weather", args={"city": "Paris"}, id="fc-1")
            parts = [types.Part(text="Checking. "), types.Part(function_call=call)]
            yield LlmResponse(
                content=types.Content(role="model", parts=parts), usage_metadata=USAGE
            )
        else:
            yield text(f"You sent {len(prompts)} prompts.", partial=False)


@pytest.fixture
async def adk_recorder() -> AsyncIterator[Any]:
    """A Recorder running ``ADKAgent`` (its own session service, closed after the test)."""
    agents: list[ADKAgent] = []

    def make(**options: Any) -> Any:
        agent = LlmAgent(name="weather", model=ScriptedLlm(model="scripted"), tools=[get_weather])
        adk = ADKAgent(
            adk_agent=agent,
            app_name="weather_app",
            user_id="alice",
            session_service=InMemorySessionService(),
            use_thread_id_as_session_id=True,
            **options,
        )
        agents.append(adk)
        return kit.Recorder(adk.run, EventEncoder().encode)

    yield make
    for adk in agents:
        await adk.close()


def request(run: str = "r-1", prompt: str = "Weather in Paris?") -> RunAgentInput:
    return kit.run_input(THREAD, run, prompt)


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_tool_turn_and_a_snapshot_of_fresh_ids(any_store, tmp_path, path, adk_recorder):
    rec = adk_recorder(emit_messages_snapshot=True)
    events = await kit.fold(path, any_store, tmp_path, rec, request())
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert starts == [
        {"type": "TOOL_CALL_START", "toolCallId": "fc-1", "toolCallName": "get_weather"}
    ]
    checking, answer = kit.ids(events, "TEXT_MESSAGE_START")
    [result] = kit.ids(events, "TOOL_CALL_RESULT")
    [snapshot] = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    streamed = {checking, answer, result, "msg-1"}
    assert not streamed & {m["id"] for m in snapshot["messages"]}  # every id is fresh
    weather = '{"city": "Paris", "forecast": "sunny"}'
    assert await kit.history(any_store, THREAD) == [
        PROMPT,
        (
            "assistant",
            checking,
            "Checking. ",
            "complete",
            None,
            [("fc-1", "get_weather", '{"city":"Paris"}')],
            [],
            None,
        ),
        ("tool", result, weather, "complete", "fc-1", [], [], None),
        ("assistant", answer, "It is sunny.", "complete", None, [], [], None),
    ]
    run = await kit.run_of(any_store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.COMPLETE, None)
    assert run.metadata["agui_state"]["_ag_ui_thread_id"] == THREAD
    assert "agui_token_usage" not in run.metadata  # ADK's middleware reports none


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_model_error_mid_answer_ends_the_run_errored(store, tmp_path, path, adk_recorder):
    events = await kit.fold(path, store, tmp_path, adk_recorder(), request(prompt="fail"))
    error = events[-1]
    assert error["type"] == "RUN_ERROR"
    assert "quota exhausted" in error["message"]
    [half] = kit.ids(events, "TEXT_MESSAGE_START")
    ended = any(e["type"] == "TEXT_MESSAGE_END" for e in events)
    assert await kit.history(store, THREAD) == [
        ("user", "msg-1", "fail", "complete", None, [], [], None),
        ("assistant", half, "Half an ", "complete" if ended else "errored", None, [], [], None),
    ]
    run = await kit.run_of(store, THREAD, "r-1")
    assert (run.status, run.error) == (RunStatus.ERRORED, error["message"])
    assert run.metadata.get("agui_error_code") == error.get("code")


@pytest.mark.parametrize("path", kit.PATHS)
async def test_a_second_turn_sending_the_snapshot_back_stores_only_the_new_prompt(
    store, tmp_path, path, adk_recorder
):
    rec = adk_recorder(emit_messages_snapshot=True)
    first = await kit.fold(path, store, tmp_path, rec, request("r-1"))
    before = await kit.history(store, THREAD)
    [snapshot] = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"]
    prompt = {"id": "msg-2", "role": "user", "content": "Thanks!"}
    again = kit.next_turn(THREAD, "r-2", snapshot["messages"], prompt)
    second = await kit.fold(path, store, tmp_path, rec, again)
    [answer] = kit.ids(second, "TEXT_MESSAGE_START")
    assert await kit.history(store, THREAD) == [
        *before,
        ("user", "msg-2", "Thanks!", "complete", None, [], [], None),
        ("assistant", answer, "You sent 2 prompts.", "complete", None, [], [], None),
    ]
    assert (await kit.run_of(store, THREAD, "r-2")).status is RunStatus.COMPLETE
