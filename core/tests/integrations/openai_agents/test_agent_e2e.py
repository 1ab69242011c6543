"""A real Agents SDK agent with a tool, over three turns, with the store reopened before turn 3."""

from __future__ import annotations

from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel
from openai.types.responses import ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from threadkeep import Role
from threadkeep.integrations.openai_agents import ThreadkeepSession

SESSION = "e2e-weather"


@function_tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def _reasoning() -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id="rs_1",
        type="reasoning",
        summary=[Summary(type="summary_text", text="The user wants weather; call the tool.")],
        encrypted_content="gAAAAB-opaque",
    )


async def test_three_turns_with_a_tool_call_and_a_reopened_store(backend, sdk) -> None:
    model = ScriptedModel()
    agent = Agent(name="weather", model=model, tools=[get_weather])

    with backend.sync_store() as store:
        session = ThreadkeepSession(SESSION, store=store)
        model.enqueue([sdk.get_text_message("Hello! Ask me about the weather.")])
        first = await Runner.run(agent, "hi", session=session)
        assert first.final_output == "Hello! Ask me about the weather."

        model.enqueue(
            [_reasoning(), sdk.get_function_tool_call("get_weather", '{"city":"Paris"}', "call_w")]
        )
        model.enqueue([sdk.get_text_message("It is sunny in Paris.")])
        second = await Runner.run(agent, "weather in Paris?", session=session)
        assert second.final_output == "It is sunny in Paris."
        after_two = await session.get_items()

    # A new store on the same database, as after a restart.
    with backend.sync_store() as reopened:
        session = ThreadkeepSession(SESSION, store=reopened)
        assert await session.get_items() == after_two
        model.enqueue([sdk.get_text_message("You asked about Paris.")])
        third = await Runner.run(agent, "what did I ask?", session=session)
        assert third.final_output == "You asked about Paris."
        seen = model.calls[-1].input
        assert seen[: len(after_two)] == after_two
        assert seen[-1] == {"role": "user", "content": "what did I ask?"}
        kinds = [item.get("type", "message") for item in seen]
        assert "function_call" in kinds
        assert "function_call_output" in kinds
        assert "reasoning" in kinds

        # The plain threadkeep API reads the same chat, with the call linked to its result.
        chat = reopened.find_chat("openai-agents", SESSION)
        assert chat is not None
        messages = reopened.list_messages(chat.chat_id, limit=200).items
        roles = [m.role for m in messages]
        assert roles.count(Role.USER) == 3
        calls = [c for m in messages for c in m.tool_calls]
        assert [(c.agui_id, c.name, c.arguments) for c in calls] == [
            ("call_w", "get_weather", '{"city":"Paris"}')
        ]
        results = [m for m in messages if m.role is Role.TOOL]
        assert [(r.tool_call_ref, r.content) for r in results] == [("call_w", "sunny in Paris")]
        assert messages.index(results[0]) > next(i for i, m in enumerate(messages) if m.tool_calls)
        thoughts = [r for m in messages for r in m.reasonings]
        assert [t.encrypted_value for t in thoughts] == ["gAAAAB-opaque"]
        assert reopened.context_messages(chat.chat_id)[-1].content == "You asked about Paris."
