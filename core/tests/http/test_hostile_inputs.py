"""Hostile input through the HTTP gateway, on a real uvicorn: every answer a typed 4xx JSON.

Bodies with lone surrogates or NUL, wrong content types, bodies of the wrong JSON type,
forged cursors (garbage, a cursor of another thread of the same caller, of another tenant's
thread, altered by one character), ids that are not UUIDs, limits that are not integers.
None may answer 500, and none may change what is stored (checked at the end).
(``test_gateway_hostile.py`` covers invalid UTF-8, deep nesting and oversized bodies.)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from threadkeep import Message, open_store
from threadkeep.http import JWTAuthenticator, create_app

AGENT = "helper"
SECRET = "gateway-tests-shared-secret-0123456789abcdef"  # the conftest's token() signs with it


def _bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def _typed_4xx(response: httpx.Response, *codes: str) -> str:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    code = str(response.json()["error"]["code"])
    assert not codes or code in codes, (code, response.text)
    assert "Traceback" not in response.text
    return code


@pytest.fixture(scope="module")
def live(tmp_path_factory, serve, echo_agent) -> Any:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hostile-in') / 'h.db'}"

    async def seed() -> dict[str, str]:
        async with open_store(url) as store:
            ids = {}
            for name, user, tenant in (("a1", "alice", "acme"), ("a2", "alice", "acme")):
                chat = await store.create_chat(user, name, agent_id=AGENT, tenant_id=tenant)
                await store.append_messages(
                    chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(5)]
                )
                ids[name] = str(chat.chat_id)
            other = await store.create_chat("alice", "o", agent_id=AGENT, tenant_id="rival")
            await store.append_messages(
                other.chat_id, [Message(role="user", content=f"r{i}") for i in range(5)]
            )
            ids["other_tenant"] = str(other.chat_id)
            return ids

    ids = asyncio.run(seed())
    app = create_app(
        url=url,
        authenticator=JWTAuthenticator.from_secret(SECRET),
        agents={AGENT: echo_agent}.get,
        max_body_bytes=1024 * 1024,
    )
    with serve(app) as base:
        yield base, ids


def _snapshot(client: httpx.Client, headers: dict[str, str], thread: str) -> Any:
    got = client.get(f"/agents/{AGENT}/chat/threads/{thread}/messages?limit=200", headers=headers)
    assert got.status_code == 200, got.text
    item = client.get(f"/agents/{AGENT}/chat/threads/{thread}", headers=headers).json()["item"]
    return got.json()["items"], item.get("name")


def test_bodies_with_bad_text_or_type_are_typed_and_change_nothing(live, token):
    base, ids = live
    auth = _bearer(token("alice"))
    rename = f"/agents/{AGENT}/chat/threads/{ids['a1']}"
    with httpx.Client(base_url=base, timeout=60) as client:
        before = _snapshot(client, auth, ids["a1"])
        json_headers = {**auth, "content-type": "application/json"}
        for body in (
            b'{"name": "a\\ud800b"}',  # a lone surrogate, as a JSON escape
            b'{"name": "\\udfff"}',
            b'["name"]',  # valid JSON, wrong type
            b'"name"',
            b"null",
            b'{"name": 12}',
            b'{"name": "x", "extra": 1}',
            b"",
        ):
            _typed_4xx(client.patch(rename, content=body, headers=json_headers))
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "image/png"):
            headers = {**auth, "content-type": content_type}
            _typed_4xx(client.patch(rename, content=b'{"name": "typed"}', headers=headers))
        assert _snapshot(client, auth, ids["a1"]) == before, "nothing half-written"
        runs = f"/agents/{AGENT}/chat/runs"
        for run in (
            {"threadId": ids["a1"], "runId": "r", "messages": "not a list"},
            {"threadId": ids["a1"], "runId": 7, "messages": []},
        ):
            body = json.dumps(run).encode()  # json.dumps escapes the surrogate as \\ud800
            _typed_4xx(client.post(runs, content=body, headers=json_headers))
        assert _snapshot(client, auth, ids["a1"]) == before, "nothing half-written"
        # A lone surrogate in a run's message: the stream layer replaces it by U+FFFD
        # (documented in InvalidContent) and the run completes: no 500, nothing half-written.
        user = {"id": "m-sur", "role": "user", "content": "a\ud800b"}
        run = {"threadId": ids["a1"], "runId": "r-sur", "messages": [user]}
        answered = client.post(runs, content=json.dumps(run).encode(), headers=json_headers)
        assert answered.status_code == 200, answered.text
        assert "RUN_FINISHED" in answered.text
        items, _ = _snapshot(client, auth, ids["a1"])
        assert items[: len(before[0])] == before[0], "what was stored before is untouched"
        named = client.patch(rename, json={"name": "nul \x00 ok"}, headers=auth)
        assert named.status_code == 200, named.text  # a name is display text: NUL is kept
        assert named.json()["item"]["name"] == "nul \x00 ok"


def test_forged_and_foreign_cursors_are_invalid_cursor(live, token):
    base, ids = live
    auth = _bearer(token("alice"))
    rival = _bearer(token("alice", tenant="rival"))
    path = f"/agents/{AGENT}/chat/threads/{{}}/messages"
    with httpx.Client(base_url=base, timeout=60) as client:

        def cursor_of(thread: str, headers: dict[str, str]) -> str:
            page = client.get(path.format(thread), params={"limit": 2}, headers=headers).json()
            assert page["hasMore"], page
            return str(page["nextCursor"])

        own = cursor_of(ids["a2"], auth)
        foreign = cursor_of(ids["other_tenant"], rival)
        altered = own[:-2] + ("A" if own[-2] != "A" else "B") + own[-1]
        for cursor in (
            own,  # a cursor of another thread of the same caller
            foreign,  # a cursor of another tenant's thread
            altered,
            "garbage",
            "AAAA",
            "\x00",
            "é" * 10,
            "x" * 4096,
        ):
            response = client.get(
                path.format(ids["a1"]), params={"limit": 2, "cursor": cursor}, headers=auth
            )
            _typed_4xx(response, "invalid_cursor")
        too_long = {"limit": 2, "cursor": "x" * 4097}
        _typed_4xx(client.get(path.format(ids["a1"]), params=too_long, headers=auth))
        own_threads = client.get(
            f"/agents/{AGENT}/chat/threads", params={"cursor": own}, headers=auth
        )
        _typed_4xx(own_threads, "invalid_cursor")  # a message cursor is no thread cursor


def test_ids_that_are_not_uuids_or_not_yours_are_404(live, token):
    base, ids = live
    auth = _bearer(token("alice"))
    with httpx.Client(base_url=base, timeout=60) as client:
        for thread in (
            "not-a-uuid",
            "..%2F..%2Fetc",
            "%00",
            "%F0%9F%99%82",
            "x" * 5000,
            ids["other_tenant"],  # another tenant's thread: not found, never 403
            "00000000-0000-0000-0000-000000000000",
        ):
            for method, suffix in (("GET", ""), ("GET", "/messages"), ("DELETE", "")):
                response = client.request(
                    method, f"/agents/{AGENT}/chat/threads/{thread}{suffix}", headers=auth
                )
                _typed_4xx(response, "not_found")
        huge = client.get(f"/agents/{AGENT}/chat/threads", params={"limit": "1" * 40}, headers=auth)
        assert huge.status_code == 200, huge.text  # documented: above 200 means 200
        for limit in ("abc", "-1", "0", "1e3", "2.5", "\x00"):
            response = client.get(
                f"/agents/{AGENT}/chat/threads", params={"limit": limit}, headers=auth
            )
            assert response.status_code == 400, (limit, response.text)
        still = client.get(f"/agents/{AGENT}/chat/threads/{ids['a1']}/messages", headers=auth)
        assert len(still.json()["items"]) == 5
