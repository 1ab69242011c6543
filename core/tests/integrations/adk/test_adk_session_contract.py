"""More of ADK's session-service contract, restated, on ADK's own services and on threadkeep's.

ADK's ``tests/unittests/sessions/test_session_service.py`` grew, after the test module
``test_adk_session_behaviour.py`` restated it, a shared contract that every
``BaseSessionService`` owes its callers (its ``session_service`` fixture, registered in
``_conformance.py``): the value semantics of state deltas, ``list_sessions`` order, session-id
normalisation on every call, exact epochs, re-delivered events. These tests restate, as our
own code, each behaviour of that contract the first module does not, and each runs on the
ADK services that owe it at google-adk 2.13.0 (the version the ``adk`` extra pins) as well as
on ``ThreadkeepSessionService`` over SQLite, PostgreSQL and MongoDB, which proves the test
states ADK's behaviour:

- ``DatabaseSessionService`` keeps a session id verbatim (ADK records that as its divergence
  from the contract), so the id-normalisation tests leave it out;
- ``InMemorySessionService`` keeps state values as given (it stores no JSON), so the test of a
  value JSON cannot hold leaves it out, as upstream runs it on the SQL services only;
- ``DatabaseSessionService`` refuses a second event with a stored event's id (a unique key)
  where the in-memory service drops an equal re-delivery and keeps a different event; the
  re-delivery tests run where upstream runs them, the in-memory service, and on threadkeep.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService

THREADKEEP = ["threadkeep-sqlite", "threadkeep-postgresql", "threadkeep-mongodb"]


def _on(*services: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("service", [*services, *THREADKEEP], indirect=True)


def _delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


# ---- state deltas: values replace, null is a value ------------------------------------------


@pytest.mark.parametrize("scope", ["", "app:", "user:"], ids=["session", "app", "user"])
async def test_a_dict_valued_delta_replaces_the_stored_value(
    service: BaseSessionService, app: str, scope: str
) -> None:
    key = f"{scope}profile"
    session = await service.create_session(
        app_name=app, user_id="ann", session_id="s", state={key: {"name": "ada", "role": "x"}}
    )
    await service.append_event(session, Event(author="user", actions=_delta(**{key: {"n": 1}})))
    assert session.state[key] == {"n": 1}
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert got.state[key] == {"n": 1}
    if scope:  # shared state: another session of the scope sees the replaced value too
        other = await service.create_session(app_name=app, user_id="ann", session_id="s2")
        assert other.state[key] == {"n": 1}


@pytest.mark.parametrize("scope", ["", "app:", "user:"], ids=["session", "app", "user"])
async def test_a_null_delta_is_stored_as_null_not_as_a_deletion(
    service: BaseSessionService, app: str, scope: str
) -> None:
    key = f"{scope}flag"
    session = await service.create_session(
        app_name=app, user_id="ann", session_id="s", state={key: True}
    )
    await service.append_event(session, Event(author="user", actions=_delta(**{key: None})))
    assert key in session.state
    assert session.state[key] is None
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert key in got.state
    assert got.state[key] is None
    if scope:
        other = await service.create_session(app_name=app, user_id="ann", session_id="s2")
        assert key in other.state
        assert other.state[key] is None


async def test_an_unrelated_delta_keeps_a_stored_boolean_a_boolean(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(
        app_name=app, user_id="ann", session_id="s", state={"flag": False}
    )
    await service.append_event(session, Event(author="user", actions=_delta(new_flag=True)))
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    for state in (session.state, got.state):
        assert state.get("flag") is False
        assert state.get("new_flag") is True


@_on("adk-database-sqlite")
async def test_a_value_json_cannot_hold_is_stored_as_its_string_form(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    await service.append_event(
        session, Event(author="user", actions=_delta(callback=lambda: 1, ok=2))
    )
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert len(got.events) == 1
    assert got.state["ok"] == 2
    assert isinstance(got.state["callback"], str)


# ---- list order, deleted sessions, exact epochs ---------------------------------------------


async def test_list_sessions_puts_the_least_recently_updated_first(
    service: BaseSessionService, app: str
) -> None:
    for name in ("a", "b", "c"):
        await service.create_session(app_name=app, user_id="ann", session_id=name)
    oldest = await service.get_session(app_name=app, user_id="ann", session_id="a")
    assert oldest is not None
    # Created last of all would do as well; an event a moment later makes "a" the newest.
    await service.append_event(oldest, Event(author="user", timestamp=time.time() + 1))
    listed = (await service.list_sessions(app_name=app, user_id="ann")).sessions
    assert [s.id for s in listed] == ["b", "c", "a"]


async def test_appending_to_a_deleted_session_raises_session_not_found(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann")
    await service.delete_session(app_name=app, user_id="ann", session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, Event(author="user"))
    assert await service.get_session(app_name=app, user_id="ann", session_id=session.id) is None


@pytest.fixture
def repeated_local_hour() -> Iterator[None]:
    """Run in US Eastern time, whose 01:00-02:00 happens twice on 2024-11-03 (POSIX only)."""
    if not hasattr(time, "tzset"):
        yield
        return
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.usefixtures("repeated_local_hour")
async def test_event_timestamps_in_a_repeated_local_hour_read_back_exactly(
    service: BaseSessionService, app: str
) -> None:
    # 06:00 and 06:30 UTC are 01:00 and 01:30 Eastern for the second time that morning.
    epochs = [1730613600.0, 1730615400.0]
    session = await service.create_session(app_name=app, user_id="ann")
    for epoch in epochs:
        await service.append_event(session, Event(author="user", timestamp=epoch))
    got = await service.get_session(app_name=app, user_id="ann", session_id=session.id)
    assert got is not None
    assert [e.timestamp for e in got.events] == epochs


# ---- session ids are normalised on every call -----------------------------------------------


@_on("adk-in-memory")
async def test_a_padded_id_is_stripped_on_create_get_and_delete(
    service: BaseSessionService, app: str
) -> None:
    created = await service.create_session(
        app_name=app, user_id="ann", session_id="order-42\n", state={"cart": "book"}
    )
    assert created.id == "order-42"
    got = await service.get_session(app_name=app, user_id="ann", session_id="order-42\n")
    assert got is not None
    assert got.id == "order-42"
    assert got.state == {"cart": "book"}
    await service.delete_session(app_name=app, user_id="ann", session_id=" order-42 ")
    assert await service.get_session(app_name=app, user_id="ann", session_id="order-42") is None


@_on("adk-in-memory")
async def test_a_padded_copy_of_an_existing_id_is_refused_and_changes_nothing(
    service: BaseSessionService, app: str
) -> None:
    await service.create_session(
        app_name=app, user_id="ann", session_id="taken", state={"keep": "original"}
    )
    with pytest.raises(AlreadyExistsError):
        await service.create_session(
            app_name=app, user_id="ann", session_id="  taken  ", state={"keep": "clobbered"}
        )
    got = await service.get_session(app_name=app, user_id="ann", session_id="taken")
    assert got is not None
    assert got.state == {"keep": "original"}


@_on("adk-in-memory")
async def test_a_blank_id_is_replaced_by_a_generated_one(
    service: BaseSessionService, app: str
) -> None:
    made = await service.create_session(app_name=app, user_id="ann", session_id="   ")
    assert made.id.strip() == made.id
    assert made.id
    assert await service.get_session(app_name=app, user_id="ann", session_id=made.id) == made


# ---- re-delivered events ----------------------------------------------------------------------


@_on("adk-in-memory")
async def test_a_redelivered_event_is_stored_and_applied_once(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    event = Event(invocation_id="inv", author="user", actions=_delta(counter=1))
    await service.append_event(session, event)
    await service.append_event(session, event)  # the same object again
    await service.append_event(session, event.model_copy(deep=True))  # an equal copy
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert [e.id for e in got.events] == [event.id]
    assert got.state == {"counter": 1}


@_on("adk-in-memory")
async def test_different_events_sharing_an_id_are_both_kept_in_order(
    service: BaseSessionService, app: str
) -> None:
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    await service.append_event(session, Event(id="same", invocation_id="a", author="user"))
    await service.append_event(session, Event(id="same", invocation_id="b", author="agent"))
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert [(e.id, e.author) for e in got.events] == [("same", "user"), ("same", "agent")]


@_on("adk-in-memory")
async def test_events_sharing_a_timestamp_come_back_in_append_order(
    service: BaseSessionService, app: str
) -> None:
    """Append order, as the in-memory reference keeps it (ADK's SQL services sort such ties by
    event id: a documented divergence of theirs, docs/integrations.md)."""
    session = await service.create_session(app_name=app, user_id="ann", session_id="s")
    for event_id in ("event_z", "event_a", "event_m"):
        await service.append_event(session, Event(author="user", id=event_id, timestamp=100.0))
    got = await service.get_session(app_name=app, user_id="ann", session_id="s")
    assert got is not None
    assert [e.id for e in got.events] == ["event_z", "event_a", "event_m"]
