"""The gateway under hostile requests and a lost database (the issue 17 break-it review).

Bodies a parser chokes on (invalid UTF-8, nesting deeper than the JSON decoder's recursion
limit, more bytes than the gateway accepts) answer a typed 4xx on a real uvicorn, never a
500 with the connection dropped. A database that goes away answers ``503
backend_unavailable`` whose body names no driver exception, host or port. An HS256 token
signed with the RS256 public key (algorithm confusion) is refused; an unreachable JWKS
endpoint answers 503, not 401. A run's terminal event arrives once the run is stored.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from threadkeep import Message, open_store
from threadkeep.http import JWTAuthenticator, Principal, create_app
from threadkeep_contract_tests import require_service
from threadkeep_sql.testing import create_schema, drop_schema

AGENT = "helper"
DEEP = b"[" * 100_000 + b"]" * 100_000


def _bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["error"]["code"] == code, body
    return body


@pytest.fixture(scope="module")
def live(tmp_path_factory, serve, echo_agent) -> Any:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hostile') / 'hostile.db'}"

    async def seed() -> str:
        async with open_store(url) as store:
            chat = await store.create_chat("alice", "k", agent_id=AGENT, tenant_id="acme")
            await store.append_message(chat.chat_id, Message(role="user", content="hi"))
            return str(chat.chat_id)

    thread_id = asyncio.run(seed())
    app = create_app(
        url=url,
        authenticator=JWTAuthenticator.from_secret("gateway-tests-shared-secret-0123456789abcdef"),
        agents={AGENT: echo_agent}.get,
        max_body_bytes=1024 * 1024,
    )
    with serve(app) as base:
        yield base, thread_id


def test_unparseable_bodies_answer_400_invalid_request(live, token):
    base, thread_id = live
    headers = {**_bearer(token("alice")), "content-type": "application/json"}
    rename = f"/agents/{AGENT}/chat/threads/{thread_id}"
    runs = f"/agents/{AGENT}/chat/runs"
    with httpx.Client(base_url=base, timeout=60) as client:
        for path, method in ((rename, "PATCH"), (runs, "POST")):
            for body in (DEEP, b'{"name": "a\xff\xfeb"}', b"{not json"):
                response = client.request(method, path, content=body, headers=headers)
                _error(response, 400, "invalid_request")
        # The connection was not dropped by any of them: the next request is answered.
        assert client.get(f"/agents/{AGENT}/chat/threads", headers=headers).status_code == 200


def test_a_body_over_the_limit_answers_413_before_it_is_read(live, token):
    base, thread_id = live
    headers = {**_bearer(token("alice")), "content-type": "application/json"}
    big = json.dumps({"threadId": "k", "runId": "r", "messages": [], "pad": "x" * 2_000_000})
    with httpx.Client(base_url=base, timeout=60) as client:
        _error(
            client.post(f"/agents/{AGENT}/chat/runs", content=big, headers=headers),
            413,
            "payload_too_large",
        )

        def chunks() -> Any:  # no Content-Length: the limit holds on the bytes received
            for _ in range(40):
                yield b"x" * 65536

        rename = f"/agents/{AGENT}/chat/threads/{thread_id}"
        _error(client.patch(rename, content=chunks(), headers=headers), 413, "payload_too_large")
        renamed = client.patch(rename, json={"name": "small"}, headers=headers)
        assert renamed.status_code == 200, renamed.text


async def test_hs256_signed_with_the_rs256_public_key_is_refused():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 3600}

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    signing_input = f"{head}.{b64(json.dumps(claims).encode())}"
    forged = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{b64(forged)}"
    async with open_store(f"memory://confusion-{uuid4().hex}") as store:
        for algorithms in (None, ["RS256", "HS256"]):  # the default, and a careless list
            check = JWTAuthenticator(key=public_pem, algorithms=algorithms)
            app = create_app(store, authenticator=check)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                path = f"/agents/{AGENT}/chat/threads"
                _error(await http.get(path, headers=_bearer(token)), 401, "unauthorized")


async def _copy_bytes(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await src.read(1 << 16):
            dst.write(chunk)
            await dst.drain()
    dst.close()


async def _cuttable_relay(host: str, port: int) -> tuple[int, Any]:
    """Listen on a free loopback port relaying to ``host:port``; return it and ``cut()``.

    ``cut()`` drops every relayed connection and stops listening, as a network failure
    between the gateway and its database would.
    """
    open_ends: list[asyncio.StreamWriter] = []

    async def relay(client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection(host, port)
        open_ends.extend((client_out, server_out))
        await asyncio.gather(_copy_bytes(client_in, server_out), _copy_bytes(server_in, client_out))

    listener = await asyncio.start_server(relay, "127.0.0.1", 0)

    def cut() -> None:
        listener.close()
        for end in open_ends:
            end.transport.abort()

    return int(listener.sockets[0].getsockname()[1]), cut


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    server = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
    url = await create_schema(server, prefix="tk_gw_lost")
    try:
        yield url
    finally:
        await drop_schema(url)


async def test_a_lost_database_answers_503_without_native_error_text(postgres_url, token):
    parts = urlsplit(postgres_url)
    port, cut = await _cuttable_relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
    proxied = urlunsplit(parts._replace(netloc=f"{netloc}:{port}"))
    async with open_store(proxied) as store:
        chat = await store.create_chat("alice", "k", agent_id=AGENT, tenant_id="acme")
        await store.append_message(chat.chat_id, Message(role="user", content="hi"))
        app = create_app(
            store,
            authenticator=JWTAuthenticator.from_secret(
                "gateway-tests-shared-secret-0123456789abcdef"
            ),
        )
        transport = httpx.ASGITransport(app=app)
        headers = _bearer(token("alice"))
        base = f"/agents/{AGENT}/chat"
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
            assert (await http.get(f"{base}/threads", headers=headers)).status_code == 200
            cut()
            for method, path in (
                ("GET", f"{base}/threads"),
                ("GET", f"{base}/threads/{chat.chat_id}/messages"),
                ("GET", f"{base}/messages"),
                ("POST", f"{base}/threads/{chat.chat_id}/start-over"),
            ):
                response = await http.request(method, path, headers=headers)
                body = _error(response, 503, "backend_unavailable")
                message = body["error"]["message"]
                for leak in ("Error", "Errno", "127.0.0.1", str(port), "asyncpg", "Traceback"):
                    assert leak not in message, message
                assert response.headers.get("retry-after"), response.headers


def test_a_run_is_stored_when_its_stream_ends(live, token):
    """A UI reads the thread again after RUN_FINISHED: the answer and outcome are there."""
    base, _ = live
    headers = _bearer(token("reader"))
    chat = f"/agents/{AGENT}/chat"
    with httpx.Client(base_url=base, timeout=60) as client:
        for index in range(5):
            run = {
                "threadId": "read-your-writes",
                "runId": f"w{index}",
                "messages": [{"id": f"u{index}", "role": "user", "content": f"n{index}"}],
                "tools": [],
                "context": [],
                "state": None,
                "forwardedProps": None,
            }
            streamed = client.post(f"{chat}/runs", json=run, headers=headers)
            assert streamed.status_code == 200, streamed.text
            assert '"type":"RUN_FINISHED"' in streamed.text, streamed.text
            page = client.get(f"{chat}/messages", params={"limit": 2}, headers=headers).json()
            last = page["items"][-1]
            assert (last["aguiId"], last["status"], last["content"]) == (
                f"answer-w{index}",
                "complete",
                f"you said: n{index}",
            )
            outcome = client.get(
                f"{chat}/threads/{last['threadId']}/runs/w{index}", headers=headers
            ).json()
            assert outcome["status"] == "complete", outcome


async def test_an_unreachable_jwks_endpoint_answers_503_not_401():
    """The issuer's key endpoint being down is an outage (retry), not bad credentials."""
    # A port held bound but not listening: connecting is refused, and no other process can
    # take the port while the test runs (as it could a port probed free and released).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        claims = {"sub": "alice", "exp": int(time.time()) + 3600}
        signed = _bearer(jwt.encode(claims, private, algorithm="RS256", headers={"kid": "k1"}))
        check = JWTAuthenticator(jwks_url=f"http://127.0.0.1:{port}/jwks.json")
        async with open_store(f"memory://jwks-down-{uuid4().hex}") as store:
            app = create_app(store, authenticator=check)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                response = await http.get(f"/agents/{AGENT}/chat/threads", headers=signed)
                body = _error(response, 503, "auth_unavailable")
                assert str(port) not in body["error"]["message"]
                assert response.headers.get("retry-after")
                # A token without credentials at all is still a plain 401, with no fetch.
                _error(await http.get(f"/agents/{AGENT}/chat/threads"), 401, "unauthorized")


class _LingeringAgent:
    """Finishes its run, then keeps its generator open for an hour."""

    async def run(self, input: Any) -> AsyncIterator[Any]:
        from ag_ui.core import RunFinishedEvent, RunStartedEvent

        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)
        await asyncio.sleep(3600)


async def test_an_agent_lingering_after_its_run_does_not_hold_the_stream(monkeypatch, token):
    from threadkeep.http import _runs

    monkeypatch.setattr(_runs, "STORED_WAIT", 0.2)
    async with open_store(f"memory://linger-{uuid4().hex}") as store:
        app = create_app(
            store,
            authenticator=JWTAuthenticator.from_secret(
                "gateway-tests-shared-secret-0123456789abcdef"
            ),
            agents={AGENT: _LingeringAgent()}.get,
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as http:
            run = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": []}
            post = http.post(
                f"/agents/{AGENT}/chat/runs", json=run, headers=_bearer(token("alice"))
            )
            streamed = await asyncio.wait_for(post, timeout=120)  # a hang guard, not a timing
            assert '"type":"RUN_FINISHED"' in streamed.text, streamed.text
        # Its agent lingers: stop it as the cancel route does (the outcome stays complete).
        app.state.threadkeep_runs.cancel(Principal("alice", "acme"), "t", "r")
        await app.state.threadkeep_runs.drain()
