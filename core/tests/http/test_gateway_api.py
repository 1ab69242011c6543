"""The gateway's routes, writes, run endpoint and authenticators on the in-memory store."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import jwt
import pytest
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from threadkeep import InvalidArgument, Message, Share, open_store
from threadkeep.http import JWTAuthenticator, Principal, create_app

AGENT = "helper"


@pytest.fixture
async def store() -> AsyncIterator[Any]:
    async with open_store(f"memory://gateway-{uuid4().hex}") as opened:
        yield opened


@pytest.fixture
def gateway(store, secret, echo_agent) -> Any:
    return create_app(
        store,
        authenticator=JWTAuthenticator.from_secret(secret),
        agents={AGENT: echo_agent}.get,
    )


@pytest.fixture
async def client(gateway) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=gateway)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


async def test_limit_defaults_to_50_and_is_capped_at_200(store, client, token):
    chat = await store.create_chat("alice", "long", agent_id=AGENT, tenant_id="acme")
    await store.append_messages(
        chat.chat_id, [Message(role="user", content=str(i)) for i in range(260)]
    )
    path = f"/agents/{AGENT}/chat/threads/{chat.chat_id}/messages"
    default = (await client.get(path, headers=bearer(token("alice")))).json()
    assert [m["content"] for m in default["items"]] == [str(i) for i in range(210, 260)]
    capped = await client.get(path, params={"limit": 10**30}, headers=bearer(token("alice")))
    assert capped.status_code == 200
    body = capped.json()
    assert len(body["items"]) == 200
    assert body["hasMore"] is True
    rest = await client.get(
        path, params={"cursor": body["nextCursor"], "limit": 200}, headers=bearer(token("alice"))
    )
    assert [m["content"] for m in rest.json()["items"]] == [str(i) for i in range(60)]
    assert rest.json()["hasMore"] is False
    assert rest.json()["nextCursor"] is None


async def test_start_over_rename_delete_restore(store, client, token):
    chat = await store.create_chat("alice", "k", agent_id=AGENT, tenant_id="acme")
    alice = bearer(token("alice"))
    base = f"/agents/{AGENT}/chat/threads/{chat.chat_id}"
    empty = await client.post(f"{base}/start-over", headers=alice)
    assert empty.json() == {"item": None}
    await store.append_message(chat.chat_id, Message(role="user", content="hi"))
    first = (await client.post(f"{base}/start-over", headers=alice)).json()["item"]
    second = (await client.post(f"{base}/start-over", headers=alice)).json()["item"]
    assert first["kind"] == "boundary"
    assert first["boundary"]["reason"] == "start_over"
    assert second["messageId"] == first["messageId"]
    page = (await client.get(f"{base}/messages", headers=alice)).json()
    assert [m["kind"] for m in page["items"]] == ["message", "boundary"]

    renamed = await client.patch(base, json={"name": "Trip"}, headers=alice)
    assert renamed.json()["item"]["name"] == "Trip"
    bad = await client.patch(base, json={"title": "x"}, headers=alice)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_request"

    mallory = bearer(token("mallory"))
    assert (await client.delete(base, headers=mallory)).status_code == 404
    assert (await client.delete(base, headers=alice)).json()["item"]["deletedAt"] is not None
    assert (await client.get(base, headers=alice)).status_code == 404
    listed = (await client.get(f"/agents/{AGENT}/chat/threads", headers=alice)).json()
    assert listed["items"] == []
    assert (await client.post(f"{base}/restore", headers=mallory)).status_code == 404
    other_tenant = bearer(token("alice", tenant="globex"))
    assert (await client.post(f"{base}/restore", headers=other_tenant)).status_code == 404
    restored = (await client.post(f"{base}/restore", headers=alice)).json()["item"]
    assert restored["deletedAt"] is None
    again = await client.post(f"{base}/restore", headers=alice)  # restoring a live one: as is
    assert again.status_code == 200
    assert (await client.get(base, headers=alice)).json()["item"]["name"] == "Trip"


async def test_team_members_see_shared_threads_of_every_team(store, client, token):
    red = await store.create_chat(
        "alice", "r", agent_id=AGENT, tenant_id="acme", team_id="red", share=Share.TEAM
    )
    blue = await store.create_chat(
        "alice", "b", agent_id=AGENT, tenant_id="acme", team_id="blue", share=Share.TEAM
    )
    bob = bearer(token("bob", teams=["red", "blue"]))
    for chat in (red, blue):
        path = f"/agents/{AGENT}/chat/threads/{chat.chat_id}/messages"
        assert (await client.get(path, headers=bob)).status_code == 200
    listed = await client.get(f"/agents/{AGENT}/chat/threads", params={"team": "blue"}, headers=bob)
    assert [t["threadId"] for t in listed.json()["items"]] == [str(blue.chat_id)]
    refused = await client.get(
        f"/agents/{AGENT}/chat/threads", params={"team": "green"}, headers=bob
    )
    assert refused.status_code == 400


async def test_run_endpoint_streams_and_stores_the_run(store, gateway, client, token):
    alice = bearer(token("alice", teams=["red"]))
    run = {
        "threadId": "conversation-1",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "Oslo?"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    async with client.stream("POST", f"/agents/{AGENT}/chat/runs", json=run, headers=alice) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [
            json.loads(line[6:]) async for line in r.aiter_lines() if line.startswith("data: ")
        ]
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_FINISHED"
    await gateway.state.threadkeep_runs.drain()  # every record stored

    threads = (await client.get(f"/agents/{AGENT}/chat/threads", headers=alice)).json()["items"]
    assert [(t["key"], t["teamId"]) for t in threads] == [("conversation-1", "red")]
    chat = await store.get_chat(threads[0]["threadId"])
    assert chat.tenant_id == "acme"
    page = (await client.get(f"/agents/{AGENT}/chat/messages", headers=alice)).json()
    assert [(m["role"], m["content"]) for m in page["items"]] == [
        ("user", "Oslo?"),
        ("assistant", "you said: Oslo?"),
    ]
    outcome = await client.get(
        f"/agents/{AGENT}/chat/threads/{chat.chat_id}/runs/r1", headers=alice
    )
    assert outcome.json()["status"] == "complete"
    missing = await client.get(
        f"/agents/{AGENT}/chat/threads/{chat.chat_id}/runs/nope", headers=alice
    )
    assert missing.status_code == 404

    unknown_agent = await client.post("/agents/nobody/chat/runs", json=run, headers=alice)
    assert unknown_agent.status_code == 404
    not_input = await client.post(f"/agents/{AGENT}/chat/runs", json={"x": 1}, headers=alice)
    assert not_input.status_code == 400
    assert (await client.post(f"/agents/{AGENT}/chat/runs", json=run)).status_code == 401


async def test_jwt_issuer_audience_leeway_and_rs256(store):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # A leeway of a minute: the skewed token below stays inside it however slowly the test
    # runs on a loaded machine (the tokens are checked against the real clock).
    check = JWTAuthenticator(key=public_pem, issuer="https://idp", audience="chat", leeway=60)
    assert check.algorithms == ["RS256", "ES256"]
    app = create_app(store, authenticator=check)
    now = time.time()
    good = {"sub": "alice", "iss": "https://idp", "aud": "chat", "exp": now + 3600, "tenant": "t"}

    def signed(claims: dict[str, Any]) -> dict[str, str]:
        return bearer(jwt.encode(claims, private, algorithm="RS256"))

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        path = f"/agents/{AGENT}/chat/threads"
        assert (await http.get(path, headers=signed(good))).status_code == 200
        skewed = {**good, "exp": now - 2}  # within the leeway
        assert (await http.get(path, headers=signed(skewed))).status_code == 200
        for bad in (
            {**good, "iss": "https://other"},
            {**good, "aud": "billing"},
            {**good, "exp": now - 3600},
            {k: v for k, v in good.items() if k != "exp"},
            {k: v for k, v in good.items() if k != "sub"},
            {**good, "teams": "red,blue" and 5},
        ):
            assert (await http.get(path, headers=signed(bad))).status_code == 401, bad
        hs = jwt.encode(good, "s" * 40, algorithm="HS256")  # algorithm confusion refused
        assert (await http.get(path, headers=bearer(hs))).status_code == 401


async def test_a_custom_authenticator_and_bad_configuration(store):
    async def by_api_key(request: Any) -> Principal | None:
        key = request.headers.get("x-api-key")
        return Principal("svc", tenant_id="acme", teams=("ops",)) if key == "k-1" else None

    app = create_app(store, authenticator=by_api_key)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        path = f"/agents/{AGENT}/chat/threads"
        assert (await http.get(path, headers={"x-api-key": "k-1"})).status_code == 200
        assert (await http.get(path, headers={"x-api-key": "k-2"})).status_code == 401
    with pytest.raises(InvalidArgument):
        JWTAuthenticator.from_secret("short")
    with pytest.raises(InvalidArgument):
        JWTAuthenticator(key="s" * 40, jwks_url="https://idp/jwks")
    with pytest.raises(InvalidArgument):
        JWTAuthenticator(key="s" * 40, algorithms=["none"])
    with pytest.raises(InvalidArgument):
        create_app(store, authenticator="not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        create_app(authenticator=by_api_key)
    with pytest.raises(InvalidArgument):
        Principal("")


class SlowAgent:
    """Streams one word, then waits (up to 30 s) for a cancel."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id=f"m-{input.run_id}", role="assistant")
        yield TextMessageContentEvent(message_id=f"m-{input.run_id}", delta="partial")
        self.started.set()
        await asyncio.sleep(30)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def _run_input(key: str, run_id: str) -> dict[str, Any]:
    return {
        "threadId": key,
        "runId": run_id,
        "state": {},
        "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def test_cancel_stops_the_callers_run_and_keys_do_not_cross_people(store, secret, token):
    slow = SlowAgent()
    app = create_app(
        store, authenticator=JWTAuthenticator.from_secret(secret), agents=lambda _: slow
    )
    transport = httpx.ASGITransport(app=app)
    alice, bob = bearer(token("alice")), bearer(token("bob"))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        runs = f"/agents/{AGENT}/chat/runs"
        streaming = asyncio.create_task(http.post(runs, json=_run_input("k", "r1"), headers=alice))
        await asyncio.wait_for(slow.started.wait(), 30)
        chat = await store.find_chat("alice", "k", tenant_id="acme")
        cancel = f"/agents/{AGENT}/chat/threads/{chat.chat_id}/runs/r1/cancel"
        assert (await http.post(cancel, headers=bob)).status_code == 404
        answer = await http.post(cancel, headers=alice)
        assert answer.json() == {"cancelled": True}
        await asyncio.wait_for(streaming, 30)
        await app.state.threadkeep_runs.drain()
        run = await http.get(f"/agents/{AGENT}/chat/threads/{chat.chat_id}/runs/r1", headers=alice)
        assert run.json()["status"] == "interrupted"
        page = (await http.get(f"/agents/{AGENT}/chat/messages", headers=alice)).json()
        assert [m["content"] for m in page["items"]] == ["go", "partial"]
        again = await http.post(cancel, headers=alice)
        assert again.json() == {"cancelled": False}

        # Bob's thread of the same key and run id is his own run, not a conflict with alice's.
        slow.started.clear()
        theirs = asyncio.create_task(http.post(runs, json=_run_input("k", "r2"), headers=alice))
        await asyncio.wait_for(slow.started.wait(), 30)
        slow.started.clear()
        mine = asyncio.create_task(http.post(runs, json=_run_input("k", "r2"), headers=bob))
        await asyncio.wait_for(slow.started.wait(), 30)
        for user, task in (("alice", theirs), ("bob", mine)):
            own = await store.find_chat(user, "k", tenant_id="acme")
            path = f"/agents/{AGENT}/chat/threads/{own.chat_id}/runs/r2/cancel"
            headers = bearer(token(user))
            assert (await http.post(path, headers=headers)).json() == {"cancelled": True}
            await asyncio.wait_for(task, 30)
        await app.state.threadkeep_runs.drain()


async def test_jwks_keys_are_fetched_by_kid(store, serve):
    from jwt.algorithms import RSAAlgorithm
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(private.public_key()))
    keys = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}

    async def jwks(request: Any) -> JSONResponse:
        return JSONResponse(keys)

    idp = Starlette(routes=[Route("/jwks.json", jwks)])
    with serve(idp) as issuer:
        check = JWTAuthenticator(jwks_url=f"{issuer}/jwks.json", issuer=issuer)
        app = create_app(store, authenticator=check)
        claims = {"sub": "alice", "iss": issuer, "exp": time.time() + 3600}
        good = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"})
        unknown = jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k2"})
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        forged = jwt.encode(claims, other, algorithm="RS256", headers={"kid": "k1"})
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
            path = f"/agents/{AGENT}/chat/threads"
            assert (await http.get(path, headers=bearer(good))).status_code == 200
            assert (await http.get(path, headers=bearer(unknown))).status_code == 401
            assert (await http.get(path, headers=bearer(forged))).status_code == 401


class CrashingAgent:
    """Starts answering, then fails."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield TextMessageStartEvent(message_id=f"m-{input.run_id}", role="assistant")
        yield TextMessageContentEvent(message_id=f"m-{input.run_id}", delta="half an ans")
        raise RuntimeError("the model went away")


@pytest.mark.parametrize(("on_error", "stored"), [("keep", True), ("discard", False)])
async def test_run_options_choose_what_an_errored_turn_leaves(
    store, secret, token, on_error, stored
):
    app = create_app(
        store,
        authenticator=JWTAuthenticator.from_secret(secret),
        agents=lambda _: CrashingAgent(),
        run_options={"on_error": on_error, "write_policy": "buffered"},
    )
    alice = bearer(token("alice"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        answer = await http.post(
            f"/agents/{AGENT}/chat/runs", json=_run_input("k", "r"), headers=alice
        )
        assert answer.status_code == 200
        assert '"type":"RUN_ERROR"' in answer.text
        await app.state.threadkeep_runs.drain()
        page = (await http.get(f"/agents/{AGENT}/chat/messages", headers=alice)).json()
        kept = [m for m in page["items"] if m["runId"] == "r"]
        assert bool(kept) is stored, page


def test_bad_run_options_are_refused_when_the_app_is_built(store):
    async def nobody(request: Any) -> None:
        return None

    for options in ({"user_id": "x"}, {"on_error": "ignore"}, {"write_policy": "often"}):
        with pytest.raises(InvalidArgument):
            create_app(store, authenticator=nobody, run_options=options)
