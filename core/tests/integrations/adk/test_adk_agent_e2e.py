"""A real ADK ``Runner`` + ``LlmAgent`` on ``ThreadkeepSessionService``, with a fake model.

Three turns with a function tool on SQLite, PostgreSQL and MongoDB; the store is closed and
a new one opened on the same database between turns 2 and 3 (a new process would do the
same), the model sees the whole history on turn 3, and the chat reads back through the plain
threadkeep API with the tool call linked to its result.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import Field

from threadkeep import Role
from threadkeep.integrations.adk import ThreadkeepSessionService, message_to_event

APP, USER, SESSION = "weather_app", "alice", "conversation-1"


def get_weather(city: str) -> dict[str, Any]:
    """Return the weather in ``city``."""
    return {"city": city, "forecast": "sunny", "celsius": 21}


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` that answers from a script and records what it was sent (no network).

    Turn 1 asks for ``get_weather`` and answers once it has the result; later turns reply
    with how many user messages the request holds, so the history the model saw shows.
    """

    seen: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents)
        self.seen.append(contents)
        last = contents[-1].parts or []
        texts = [p.text for c in contents if c.role == "user" for p in c.parts or [] if p.text]
        if any(p.function_response is not None for p in last):
            reply = types.Part(text="It is sunny in Paris.")
        elif texts[-1] == "Weather in Paris?":
            reply = types.Part(
                function_call=types.FunctionCall(name="get_weather", args={"city": "Paris"})
            )
        else:
            reply = types.Part(text=f"I have seen {len(texts)} messages from you.")
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


def _runner(store: Any, model: ScriptedLlm) -> Runner:
    agent = LlmAgent(name="weather", model=model, tools=[get_weather], instruction="Be brief.")
    return Runner(agent=agent, app_name=APP, session_service=ThreadkeepSessionService(store))


async def _turn(runner: Runner, text: str) -> list[str]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    replies: list[str] = []
    async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        parts = event.content.parts if event.content and event.content.parts else []
        replies.extend(part.text for part in parts if part.text)
    return replies


async def test_three_turns_with_a_tool_call_and_a_reopened_store(backend) -> None:
    model = ScriptedLlm(model="scripted")
    with backend.sync_store() as store:
        runner = _runner(store, model)
        await runner.session_service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert await _turn(runner, "Weather in Paris?") == ["It is sunny in Paris."]
        assert await _turn(runner, "Thanks!") == ["I have seen 2 messages from you."]

    with backend.sync_store() as reopened:  # a new store on the same database
        runner = _runner(reopened, model)
        assert await _turn(runner, "Anything else?") == ["I have seen 3 messages from you."]
        last_request = model.seen[-1]
        roles = [c.role for c in last_request]
        assert roles == ["user", "model", "user", "model", "user", "model", "user"]
        sent = [p for c in last_request for p in c.parts or []]
        assert any(p.function_call and p.function_call.name == "get_weather" for p in sent)
        assert any(
            p.function_response and p.function_response.response == get_weather("Paris")
            for p in sent
        )

        session = await runner.session_service.get_session(
            app_name=APP, user_id=USER, session_id=SESSION
        )
        assert session is not None
        assert len(session.events) == 8

        # The plain threadkeep API: one chat, the call typed and linked to its result.
        page = reopened.list_chats({"user_id": USER, "agent_id": APP, "channel": "adk"})
        assert len(page.items) == 1
        messages = reopened.list_messages(page.items[0].chat_id).items
        assert [m.role for m in messages] == [
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.ASSISTANT,
            Role.USER,
            Role.ASSISTANT,
            Role.USER,
            Role.ASSISTANT,
        ]
        (call,) = messages[1].tool_calls
        assert call.name == "get_weather"
        assert call.agui_id
        assert messages[2].tool_call_ref == call.agui_id
        assert messages[0].content == "Weather in Paris?"
        assert messages[3].content == "It is sunny in Paris."
        assert [m.agui_id for m in messages] == [e.id for e in session.events]
        assert [message_to_event(m) for m in messages] == session.events
