"""What an ADK event becomes in threadkeep, state under concurrency, a missing ADK."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys

import pytest
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types

from threadkeep import Role
from threadkeep.integrations.adk import (
    ThreadkeepSessionService,
    event_to_message,
    message_to_event,
)


def _call_event() -> Event:
    return Event(
        invocation_id="inv-1",
        author="weather",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Let me look."),
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-1", name="get_weather", args={"city": "Paris"}
                    )
                ),
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-2", name="get_time", args={"tz": "CET"}
                    )
                ),
            ],
        ),
        long_running_tool_ids={"call-2"},
    )


def _response_event() -> Event:
    return Event(
        invocation_id="inv-1",
        author="weather",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="get_weather", response={"forecast": "sunny"}
                    )
                )
            ],
        ),
    )


def test_function_calls_are_typed_tool_calls_and_responses_tool_messages() -> None:
    call = event_to_message(_call_event())
    assert call.role is Role.ASSISTANT
    assert call.content == "Let me look."
    assert [(c.agui_id, c.name, json.loads(c.arguments)) for c in call.tool_calls] == [
        ("call-1", "get_weather", {"city": "Paris"}),
        ("call-2", "get_time", {"tz": "CET"}),
    ]
    answer = event_to_message(_response_event())
    assert answer.role is Role.TOOL
    assert answer.tool_call_ref == "call-1"
    user = event_to_message(Event(author="user", content=types.Content(role="user", parts=[])))
    assert user.role is Role.USER
    assert user.agui_id


@pytest.mark.parametrize("make", [_call_event, _response_event])
def test_an_event_reads_back_equal(make) -> None:
    event = make()
    again = message_to_event(event_to_message(event))
    assert again is not None
    assert again.model_dump() == event.model_dump()


async def test_events_of_the_api_and_tool_links_on_each_backend(backend) -> None:
    with backend.sync_store() as store:
        service = ThreadkeepSessionService(store)
        session = await service.create_session(app_name="app", user_id="u")
        for event in (_call_event(), _response_event()):
            await service.append_event(session, event)
        chat = store.list_chats({"user_id": "u", "channel": "adk"}).items[0]
        store.append_message(chat.chat_id, {"role": "user", "content": "from the api"})
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None
        assert [e.model_dump() for e in got.events] == [e.model_dump() for e in session.events]
        messages = store.list_messages(chat.chat_id).items
        assert messages[1].tool_call_ref == messages[0].tool_calls[0].agui_id


async def test_an_event_with_megabytes_of_inline_data_round_trips(backend) -> None:
    # A user's photo as inline bytes: ADK's own services store it; this one must not refuse
    # it with PayloadTooLarge (the store bounds what is beside the payload at 1 MiB).
    photo = types.Part(inline_data=types.Blob(data=b"\x89PNG" * 400_000, mime_type="image/png"))
    event = Event(
        author="user", content=types.Content(role="user", parts=[types.Part(text="see"), photo])
    )
    with backend.sync_store() as store:
        service = ThreadkeepSessionService(store)
        session = await service.create_session(app_name="app", user_id="u")
        await service.append_event(session, event)
        await service.append_event(session, event)  # a re-delivery is still recognised
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None
        assert [e.model_dump() for e in got.events] == [event.model_dump()]


async def test_concurrent_appends_keep_every_user_and_app_delta(backend) -> None:
    with backend.sync_store() as store:
        service = ThreadkeepSessionService(store)
        sessions = [
            await service.create_session(app_name="app", user_id="u", session_id=f"s{i}")
            for i in range(4)
        ]

        async def write(i: int) -> None:
            delta = {f"user:k{i}": i, f"app:k{i}": i, "user:shared": "x"}
            event = Event(author="user", actions=EventActions(state_delta=delta))
            await service.append_event(sessions[i], event)

        await asyncio.gather(*(write(i) for i in range(4)))
        assert await service.get_user_state(app_name="app", user_id="u") == {
            "shared": "x",
            **{f"k{i}": i for i in range(4)},
        }
        fresh = await service.create_session(app_name="app", user_id="v")
        assert fresh.state == {f"app:k{i}": i for i in range(4)}


async def test_an_async_store_on_the_callers_loop(backend) -> None:
    async with backend.store() as store:
        service = ThreadkeepSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", state={"k": 1})
        await service.append_event(session, _call_event())
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got == session


def test_a_missing_adk_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "google.adk", None)
    monkeypatch.delitem(sys.modules, "threadkeep.integrations.adk")
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("threadkeep.integrations.adk")
    assert str(caught.value) == (
        "threadkeep.integrations.adk needs Google ADK: pip install 'threadkeep[adk]'"
    )


async def test_an_event_taken_back_is_stored_when_sent_again(backend) -> None:
    """A writer that lost a race deletes its event; sending that event again stores it."""
    with backend.sync_store() as store:
        service = ThreadkeepSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        event = Event(author="user", timestamp=2.0, actions=EventActions(state_delta={"k": 1}))
        chat = store.list_chats({"user_id": "u", "channel": "adk"}).items[0]
        taken_back = store.append_message(chat.chat_id, event_to_message(event))
        store.delete_messages(chat.chat_id, [taken_back.message_id])
        await service.append_event(session, event)
        got = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        assert [e.model_dump() for e in got.events] == [event.model_dump()]
        assert got.state == {"k": 1}


async def test_a_stale_session_writes_nothing(backend) -> None:
    with backend.sync_store() as store:
        service = ThreadkeepSessionService(store)
        session = await service.create_session(app_name="app", user_id="u", session_id="s")
        stale = session.model_copy(deep=True)
        await service.append_event(session, Event(author="user", timestamp=1.0))
        delta = {"app:a": 1, "user:b": 2, "c": 3}
        with pytest.raises(StaleSessionError):
            await service.append_event(
                stale, Event(author="user", actions=EventActions(state_delta=delta))
            )
        got = await service.get_session(app_name="app", user_id="u", session_id="s")
        assert got is not None
        assert len(got.events) == 1
        assert got.state == {}
