"""schemathesis against the generated OpenAPI document, on a real SQLite store: no 5xx.

Every operation gets a bounded number of generated requests (so CI stays fast), sent over
HTTP to the app on a real uvicorn, with a valid token (or, for some, none). Half of the
generated path ids are swapped for a real agent and thread, so requests reach stored data
rather than only 404s.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from threadkeep import Message, Share, ToolCall, open_store
from threadkeep.http import JWTAuthenticator, create_app

AGENT = "fuzzed"
SECRET = "gateway-tests-shared-secret-0123456789abcdef"

schema = schemathesis.openapi.from_dict(
    create_app(
        url="memory://openapi-only", authenticator=JWTAuthenticator.from_secret(SECRET)
    ).openapi()
)


async def _seed(url: str) -> list[str]:
    async with open_store(url) as store:
        ids = []
        for index in range(3):
            chat = await store.create_chat(
                "alice",
                f"t{index}",
                agent_id=AGENT,
                tenant_id="acme",
                team_id="red",
                share=Share.TEAM if index else Share.PRIVATE,
            )
            await store.append_messages(
                chat.chat_id,
                [
                    Message(role="user", content="hi"),
                    Message(role="assistant", tool_calls=[ToolCall(name="f", arguments="{}")]),
                ],
            )
            ids.append(str(chat.chat_id))
        return ids


@pytest.fixture(scope="module")
def live(tmp_path_factory, serve, echo_agent) -> Iterator[tuple[str, list[str]]]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('openapi') / 'fuzz.db'}"
    ids = asyncio.run(_seed(url))
    app = create_app(
        url=url,
        authenticator=JWTAuthenticator.from_secret(SECRET),
        agents={AGENT: echo_agent}.get,
    )
    with serve(app) as base:
        yield base, ids


def _pick(value: Any, real: str) -> Any:
    digest = hashlib.sha256(str(value).encode()).digest()
    return real if digest[0] % 2 == 0 else value


@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_server_error_for_any_generated_request(case, live, token):
    base, ids = live
    parameters = case.path_parameters or {}
    if "agent_id" in parameters:
        parameters["agent_id"] = _pick(parameters["agent_id"], AGENT)
    if "thread_id" in parameters:
        parameters["thread_id"] = _pick(parameters["thread_id"], ids[len(ids) - 1])
    headers = dict(case.headers or {})
    if _pick(case.query, "anonymous") != "anonymous":
        headers["Authorization"] = f"Bearer {token('alice', teams=['red'])}"
    response = case.call(base_url=base, headers=headers, timeout=30)
    case.validate_response(response, checks=[not_a_server_error])
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type.split(";")[0] in (
        "application/json",
        "text/event-stream",
    ), response.text
