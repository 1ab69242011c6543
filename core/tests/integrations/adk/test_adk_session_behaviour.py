"""ADK's session-service behaviour, restated, on ADK's own services and on threadkeep's.

The behaviours come from google/adk-python's ``tests/unittests/sessions/test_session_service.py``
at google-adk 2.13.0 (the version the ``adk`` extra pins). That file is not distributed (it
is in neither the wheel nor the sdist), so it cannot be run here: these tests are our own
re-statement of each behaviour it checks through the ``BaseSessionService`` interface, not a
copy of its code. Every test runs on ADK's own ``InMemorySessionService`` and on its
``DatabaseSessionService`` over SQLite (aiosqlite, a temp file), which proves the test states
ADK's behaviour, and on ``ThreadkeepSessionService`` over SQLite, PostgreSQL and MongoDB.

Not restated: the upstream tests of ``DatabaseSessionService``'s own machinery (engine
options, timezone stripping, read-only session factories, missing app/user state rows,
rollback spies, revision reads before commit, ``prepare_tables`` races and locks,
``_get_or_create_state``), of SQLite URL parsing, of ``InMemorySessionService``'s storage
aliasing and of ``VertexAiSessionService``: none is a behaviour of the session-service
interface. The stale-writer tests run only on the services that detect stale writers
(ADK documents the check for ``DatabaseSessionService``; its in-memory service has none).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

THREADKEEP_BACKENDS = ("sqlite", "postgresql", "mongodb")
STALE_CHECKING = ["adk-database-sqlite"] + [f"threadkeep-{b}" for b in THREADKEEP_BACKENDS]
# The services that refuse an append through a stale session object (conftest.py: `service`).
stale_checking = pytest.mark.parametrize("service", STALE_CHECKING, indirect=True)


def _delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


# ---- create, get, list, delete -------------------------------------------------------------


async def test_an_unknown_session_is_none_and_deleting_it_is_a_no_op(
    service: BaseSessionService, app: str
) -> None:
    assert await service.get_session(app_name=app, user_id="ann", session_id="nope") is None
    await service.delete_session(app_name=app, user_id="ann", session_id="nope")
    assert (await service.list_sessions(app_name=app, user_id="ann")).sessions == []


async def test_a_created_session_reads_back_equal_and_is_gone_once_deleted(
    service: BaseSessionService, app: str
) -> None:
    created = await service.create_session(app_name=app, user_id="ann", state={"k": "v"})
    assert (created.app_name, created.user_id, created.state) == (app, "ann", {"k": "v"})
    assert created.id
    assert not created.events
    assert created.last_update_time <= time.time()
    got = await service.get_session(app_name=app, user_id="ann", session_id=created.id)
    assert got == created
    await service.delete_session(app_name=app, user_id="ann", session_id=created.id)
    assert await service.get_session(app_name=app, user_id="ann", session_id=created.id) is None


async def test_generated_session_ids_differ(service: BaseSessionService, app: str) -> None:
    ids = {(await service.create_session(app_name=app, user_id="ann")).id for _ in range(3)}
    assert len(ids) == 3


async def test_an_explicit_id_that_exists_is_refused(service: BaseSessionService, app: str) -> None:
    await service.create_session(app_name=app, user_id="ann", session_id="dup", state={"a": 1})
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=app, user_id="ann", session_id="dup")
    kept = await service.get_session(app_name=app, user_id="ann", session_id="dup")
    assert kept is not None
    assert kept.state == {"a": 1}


async def test_list_sessions_of_a_user_holds_each_with_its_state(
    service: BaseSessionService, app: str
) -> None:
    names = [f"s{i}" for i in range(4)]
    for name in names:
        await service.create_session(
            app_name=app, user_id="ann", session_id=name, state={"key": f"value-{name}"}
        )
    await service.create_session(app_name=f"{app}-other", user_id="ann", session_id="elsewhere")
    listed = (await service.list_sessions(app_name=app, user_id="ann")).sessions
    assert sorted(s.id for s in listed) == names
    assert all(s.state == {"key": f"value-{s.id}"} for s in listed)
    assert all((s.app_name, s.user_id) == (app, "ann") for s in listed)


async def test_list_sessions_per_user_and_for_all_users(
    service: BaseSessionService, app: str
) -> None:
    owners = {"ann-1": "ann", "ann-2": "ann", "bob-1": "bob"}
    for name, user in owners.items():
        await service.create_session(
            app_name=app, user_id=user, session_id=name, state={"of": name}
        )

    async def listed(user: str | None) -> dict[str, Any]:
        response = await service.list_sessions(app_name=app, user_id=user)
        return {s.id: (s.user_id, s.state) for s in response.sessions}

    assert await listed("ann") == {n: ("ann", {"of": n}) for n in ("ann-1", "ann-2")}
    assert await listed("bob") == {"bob-1": ("bob", {"of": "bob-1"})}
    assert await listed(None) == {n: (u, {"of": n}) for n, u in owners.items()}
    assert await listed("nobody") == {}


async def test_listed_sessions_hold_merged_state_and_no_events(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    await service.append_event(
        session,
        Event(author="user", actions=_delta(**{"app:a": 1, "user:u": 2, "s": 3, "temp:t": 4})),
    )
    (listed,) = (await service.list_sessions(app_name=app, user_id="ann")).sessions
    assert listed.id == "s"
    assert listed.events == []
    assert listed.state == {"app:a": 1, "user:u": 2, "s": 3}


async def test_a_session_id_is_per_user(service: BaseSessionService, app: str) -> None:
    ann = await service.create_session(app_name=app, user_id="ann", session_id="same")
    await service.append_event(ann, Event(invocation_id="inv1", author="user"))
    await service.create_session(app_name=app, user_id="bob", session_id="same")
    bobs = await service.get_session(app_name=app, user_id="bob", session_id="same")
    assert bobs is not None
    assert bobs.user_id == "bob"
    assert bobs.events == []
    anns = await service.get_session(app_name=app, user_id="ann", session_id="same")
    assert anns is not None
    assert len(anns.events) == 1


async def test_concurrent_creates_on_a_fresh_service_all_succeed(
    service: BaseSessionService, app: str
) -> None:
    made = await asyncio.gather(
        *(
            service.create_session(app_name=f"{app}-{i}", user_id="ann", session_id=f"s{i}")
            for i in range(4)
        )
    )
    assert [s.id for s in made] == [f"s{i}" for i in range(4)]
    for i in range(4):
        assert await service.get_session(app_name=f"{app}-{i}", user_id="ann", session_id=f"s{i}")


# ---- state scopes ---------------------------------------------------------------------------


async def test_app_state_is_shared_by_every_user_of_the_app(
    service: BaseSessionService, app: str
) -> None:
    first = await service.create_session(
        app_name=app, user_id="ann", session_id="s1", state={"app:k1": "v1"}
    )
    await service.append_event(first, Event(invocation_id="i", author="user", actions=_delta()))
    await service.append_event(
        first, Event(invocation_id="i", author="user", actions=_delta(**{"app:k2": "v2"}))
    )
    second = await service.create_session(app_name=app, user_id="bob", session_id="s2")
    assert second.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await service.get_session(app_name=app, user_id="ann", session_id="s1")
    assert again is not None
    assert (again.state["app:k1"], again.state["app:k2"]) == ("v1", "v2")
    other_app = await service.create_session(app_name=f"{app}-other", user_id="ann")
    assert other_app.state == {}


async def test_user_state_is_shared_by_that_users_sessions_only(
    service: BaseSessionService, app: str
) -> None:
    first = await service.create_session(
        app_name=app, user_id="ann", session_id="s1", state={"user:k1": "v1"}
    )
    await service.append_event(
        first, Event(invocation_id="i", author="user", actions=_delta(**{"user:k2": "v2"}))
    )
    same_user = await service.create_session(app_name=app, user_id="ann", session_id="s1b")
    assert same_user.state == {"user:k1": "v1", "user:k2": "v2"}
    other_user = await service.create_session(app_name=app, user_id="bob", session_id="s2")
    assert other_user.state == {}


async def test_session_state_stays_in_its_session(service: BaseSessionService, app: str) -> None:
    first = await service.create_session(
        app_name=app, user_id="ann", session_id="s1", state={"sk1": "v1"}
    )
    await service.append_event(
        first, Event(invocation_id="i", author="user", actions=_delta(sk2="v2"))
    )
    got = await service.get_session(app_name=app, user_id="ann", session_id="s1")
    assert got is not None
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    sibling = await service.create_session(app_name=app, user_id="ann", session_id="s1b")
    assert sibling.state == {}


async def test_temp_state_reaches_the_session_object_but_is_never_stored(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    event = Event(invocation_id="i", author="user", actions=_delta(**{"temp:k1": "v1", "sk": "v2"}))
    await service.append_event(session, event)
    assert session.state["temp:k1"] == "v1"
    assert session.state["sk"] == "v2"
    assert event.actions.state_delta == {"sk": "v2"}
    stored = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert stored is not None
    assert stored.state == {"sk": "v2"}
    assert stored.events[0].actions.state_delta == {"sk": "v2"}


async def test_temp_state_is_readable_by_the_next_event_of_the_invocation(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann", session_id="seq")
    writer = Event(invocation_id="i", author="agent1", actions=_delta(**{"temp:out": "from a1"}))
    await service.append_event(session, writer)
    assert session.state["temp:out"] == "from a1"
    assert "temp:out" not in writer.actions.state_delta
    await service.append_event(session, Event(invocation_id="i", author="agent2"))
    assert session.state["temp:out"] == "from a1"


async def test_get_user_state_is_the_users_unprefixed_state(
    service: BaseSessionService, app: str
) -> None:
    assert not await service.get_user_state(app_name=app, user_id="ann")
    session = await service.create_session(app_name=app, user_id="ann")
    profile = {"name": "Alice", "tags": ["a", 1, None]}
    await service.append_event(
        session,
        Event(author="system", actions=_delta(**{"user:profile": profile, "session_key": 1})),
    )
    await service.append_event(
        session, Event(author="system", actions=_delta(**{"user:n": 1, "app:x": "y"}))
    )
    await service.append_event(session, Event(author="system", actions=_delta(**{"user:n": 2})))
    assert await service.get_user_state(app_name=app, user_id="ann") == {"profile": profile, "n": 2}
    assert not await service.get_user_state(app_name=app, user_id="bob")
    assert not await service.get_user_state(app_name=f"{app}-other", user_id="ann")


# ---- events ---------------------------------------------------------------------------------


def _every_field_event() -> Event:
    return Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1_700_000_000.123,
        input_transcription=types.Transcription(text="heard", finished=True),
        output_transcription=types.Transcription(text="said", finished=True),
    )


async def test_an_event_with_every_field_reads_back_equal(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    await service.append_event(session, _every_field_event())
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got == session


async def test_bytes_in_content_and_grounding_metadata_round_trip(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"\x89PNG\x00\xff", mime_type="image/png")]
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"\x00blob\xfe")
    )
    event = Event(invocation_id="i", author="user", content=content, grounding_metadata=grounding)
    await service.append_event(session, event)
    assert session.events[0].content == content
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert len(got.events) == 1
    assert got.events[0].content == content
    assert got.events[0].grounding_metadata == grounding


async def test_function_calls_and_responses_round_trip_in_order(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    base = session.last_update_time + 1
    call = types.FunctionCall(id="call-1", name="get_weather", args={"city": "Paris", "n": [1]})
    reply = types.FunctionResponse(id="call-1", name="get_weather", response={"sky": "clear"})
    events = [
        Event(author="user", content=types.Content(role="user", parts=[types.Part(text="hi")])),
        Event(
            author="weather",
            content=types.Content(
                role="model", parts=[types.Part(text="Looking."), types.Part(function_call=call)]
            ),
            long_running_tool_ids={"call-1"},
        ),
        Event(
            author="weather",
            content=types.Content(role="user", parts=[types.Part(function_response=reply)]),
        ),
        Event(author="weather", content=types.Content(role="model", parts=[types.Part(text="ok")])),
    ]
    for offset, event in enumerate(events):
        event.invocation_id, event.timestamp = "inv", base + offset
        await service.append_event(session, event)
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert [e.model_dump() for e in got.events] == [e.model_dump() for e in events]
    assert got.events[1].get_function_calls() == [call]
    assert got.events[2].get_function_responses() == [reply]


async def test_requested_tool_confirmations_round_trip_as_typed_objects(
    service: BaseSessionService, app: str
) -> None:
    asked = {
        "call-1": ToolConfirmation(confirmed=False, hint="First action"),
        "call-2": ToolConfirmation(confirmed=True, hint="Approve", payload={"amount": 100}),
    }
    session = await service.create_session(app_name=app, user_id="ann")
    events = [
        Event(
            id="event-asks",
            invocation_id="inv",
            author="agent",
            content=types.Content(role="model", parts=[types.Part(text="May I?")]),
            actions=EventActions(requested_tool_confirmations=asked),
        ),
        Event(id="event-plain", invocation_id="inv", author="user", actions=EventActions()),
    ]
    for event in events:
        assert (await service.append_event(session, event)).id == event.id
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert [e.id for e in got.events] == ["event-asks", "event-plain"]
    confirmations = got.events[0].actions.requested_tool_confirmations
    assert confirmations == asked
    assert all(isinstance(c, ToolConfirmation) for c in confirmations.values())
    assert got.events[1].actions.requested_tool_confirmations == {}


async def test_last_update_time_follows_the_newest_event(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    created_at = session.last_update_time
    later = created_at + 10
    await service.append_event(session, Event(invocation_id="i", author="user", timestamp=later))
    assert session.last_update_time == pytest.approx(later, abs=1e-6)
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert got.last_update_time == pytest.approx(later, abs=1e-6)
    assert got.last_update_time > created_at


async def test_partial_events_are_neither_kept_nor_stored(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    returned = await service.append_event(
        session, Event(author="user", partial=True, actions=_delta(k="v"))
    )
    assert returned.partial is True
    assert session.events == []
    assert "k" not in session.state
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert got.events == []
    assert got.state == {}


async def test_get_session_config_cuts_the_events(service: BaseSessionService, app: str) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    for stamp in range(1, 6):
        await service.append_event(session, Event(author="user", timestamp=float(stamp)))

    async def stamps(**config: Any) -> list[float]:
        got = await service.get_session(
            app_name=app,
            user_id="ann",
            session_id=session.id,
            config=GetSessionConfig(**config) if config else None,
        )
        assert got is not None
        return [e.timestamp for e in got.events]

    assert await stamps() == [1, 2, 3, 4, 5]
    assert await stamps(num_recent_events=0) == []
    assert await stamps(num_recent_events=3) == [3, 4, 5]
    assert await stamps(num_recent_events=9) == [1, 2, 3, 4, 5]
    assert await stamps(after_timestamp=4.0) == [4, 5]  # inclusive
    assert await stamps(after_timestamp=50.0) == []
    assert await stamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]
    assert await stamps(after_timestamp=2.0, num_recent_events=2) == [4, 5]


# ---- session objects that are behind storage ------------------------------------------------


@pytest.mark.parametrize("drop_marker", [False, True], ids=["with-marker", "without-marker"])
async def test_a_current_session_with_a_small_time_drift_still_appends(
    service: BaseSessionService, app: str, drop_marker: bool
) -> None:
    """A float round trip of ``last_update_time`` is no newer writer, with or without the
    storage marker ``DatabaseSessionService`` sets on the session object."""
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    first = Event(invocation_id="inv1", author="user", timestamp=session.last_update_time + 10)
    await service.append_event(session, first)
    if drop_marker:
        session._storage_update_marker = None
    session.last_update_time -= 0.0001
    await service.append_event(
        session, Event(invocation_id="inv2", author="user", timestamp=first.timestamp + 10)
    )
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert [e.invocation_id for e in got.events] == ["inv1", "inv2"]


@stale_checking
async def test_an_append_through_a_stale_session_is_refused(
    service: BaseSessionService, app: str
) -> None:
    now = time.time()
    original = await service.create_session(app_name=app, user_id="ann")
    await service.append_event(
        original, Event(invocation_id="inv1", author="user", timestamp=now + 1, actions=_delta(a=1))
    )
    fresh = await service.get_session(app_name=app, user_id="ann", session_id=original.id)
    assert fresh is not None
    await service.append_event(
        fresh, Event(invocation_id="inv2", author="user", timestamp=now + 2, actions=_delta(b=2))
    )
    assert original.last_update_time < fresh.last_update_time
    assert len(original.events) == 1
    assert "b" not in original.state
    late = Event(invocation_id="inv3", author="user", timestamp=now + 3, actions=_delta(c=3))
    with pytest.raises(ValueError, match="modified in storage"):
        await service.append_event(original, late)
    final = await service.get_session(app_name=app, user_id="ann", session_id=original.id)
    assert final is not None
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert final.state == {"a": 1, "b": 2}


@stale_checking
async def test_of_two_concurrent_writers_from_one_read_exactly_one_wins(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    rounds = 4
    for i in range(rounds):
        latest = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
        assert latest is not None
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        base = latest.last_update_time + 10
        results = await asyncio.gather(
            *(
                service.append_event(
                    copy,
                    Event(
                        invocation_id=f"inv{i}-{w}",
                        author="user",
                        timestamp=base + w,
                        actions=_delta(**{f"k{i}-{w}": w}),
                    ),
                )
                for w, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1, results
        assert isinstance(errors[0], ValueError)
        assert "modified in storage" in str(errors[0])
    final = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert final is not None
    assert len(final.events) == rounds
    for i in range(rounds):
        won = {key for key in final.state if key.startswith(f"k{i}-")}
        assert len(won) == 1
