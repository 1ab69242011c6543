"""Acceptance (issue 17): the tau-bench airline transcripts read back through the gateway.

The 200 real GPT-4o runs are imported into SQLite through the CLI, given to an agent and a
tenant, and served by the gateway on a real uvicorn. Every thread is walked with
``limit=7``: every message comes back once, in order, equal to the source. Cursors of another
thread and altered cursors answer 400, another principal's thread 404, no token 401, and a
token of another tenant sees nothing. The data is read from ``../shared/realdata`` and never
copied; without it the test skips.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from threadkeep import Message, Share, open_store
from threadkeep.http import JWTAuthenticator, create_app

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE = REPO_ROOT.parent / "shared/realdata/tau-bench/historical_trajectories/gpt-4o-airline.json"
AGENT = "airline"


def _key(index: int) -> str:
    return f"openai:{SOURCE.name}:{index}"


@pytest.fixture(scope="module")
def source() -> list[dict[str, Any]]:
    if not SOURCE.is_file():
        pytest.skip(f"real data not present at {SOURCE}")
    records: list[dict[str, Any]] = json.loads(SOURCE.read_text(encoding="utf-8"))
    return records


async def _assign(url: str, count: int) -> dict[str, set[str]]:
    """Give alice's imported chats to the agent in tenant acme (every 4th shared with team
    red); add bob's own chat in acme and carol's in tenant globex. Returns chat ids by group."""
    groups: dict[str, set[str]] = {"shared": set(), "private": set(), "bob": set(), "carol": set()}
    async with open_store(url) as store:
        for index in range(count):
            imported = await store.find_chat("alice", _key(index))
            assert imported is not None, index
            shared = index % 4 == 0
            # The tenant is part of a chat's identity (it cannot be changed by update_chat):
            # the imported chat's messages move into alice's chat of the same key in acme.
            chat = await store.create_chat(
                "alice",
                _key(index),
                name=imported.name,
                agent_id=AGENT,
                tenant_id="acme",
                team_id="red" if shared else None,
                share=Share.TEAM if shared else Share.PRIVATE,
            )
            await store.load_messages(chat.chat_id, await _messages(store, imported.chat_id))
            await store.delete_chat(imported.chat_id)
            groups["shared" if shared else "private"].add(str(chat.chat_id))
        for user, tenant in (("bob", "acme"), ("carol", "globex")):
            chat = await store.create_chat(user, "own", agent_id=AGENT, tenant_id=tenant)
            await store.append_messages(
                chat.chat_id, [Message(role="user", content=f"{user} {i}") for i in range(3)]
            )
            groups[user].add(str(chat.chat_id))
    return groups


async def _messages(store: Any, chat_id: Any) -> list[Message]:
    """Every message of a chat, oldest first, as new messages (store fields cleared)."""
    pages, cursor = [], None
    while True:
        page = await store.list_messages(chat_id, limit=200, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
    keep = {"message_id", "chat_id", "seq", "created_at", "updated_at", "revision", "deleted_at"}
    return [
        Message.model_validate(m.model_dump(exclude=keep & set(type(m).model_fields)))
        for items in reversed(pages)
        for m in items
    ]


def _walk(client: httpx.Client, path: str, headers: dict[str, str]) -> list[list[dict[str, Any]]]:
    """Return every page of ``path`` at limit=7, checking the page shape; newest page first."""
    pages, cursor = [], None
    while True:
        params = {"limit": 7} if cursor is None else {"limit": 7, "cursor": cursor}
        response = client.get(path, params=params, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"items", "nextCursor", "hasMore"}
        assert len(body["items"]) <= 7
        assert (body["nextCursor"] is None) == (not body["hasMore"])
        pages.append(body["items"])
        if not body["hasMore"]:
            return pages
        assert len(body["items"]) == 7
        cursor = body["nextCursor"]


def _oldest_first(pages: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [item for page in reversed(pages) for item in page]


def _assert_like_source(item: dict[str, Any], entry: dict[str, Any], where: str) -> None:
    assert item["role"] == entry["role"], where
    assert item["content"] == (entry["content"] or ""), where
    calls = [(c["aguiId"], c["name"], c["arguments"]) for c in item["toolCalls"]]
    expected = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in entry.get("tool_calls") or []
    ]
    assert calls == expected, where
    assert item["toolCallRef"] == entry.get("tool_call_id"), where


def _error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.json()["error"]["code"] == code, response.text
    assert response.headers["content-type"].startswith("application/json")


def test_tau_bench_through_the_gateway(cli, source, sqlite_url, serve, token):
    cli.json(
        "import",
        str(SOURCE),
        "--format",
        "openai",
        "--user",
        "alice",
        "--json",
        "--url",
        sqlite_url,
    )
    groups = asyncio.run(_assign(sqlite_url, len(source)))
    app = create_app(
        url=sqlite_url,
        authenticator=JWTAuthenticator.from_secret("gateway-tests-shared-secret-0123456789abcdef"),
    )
    alice = {"Authorization": f"Bearer {token('alice')}"}
    base = f"/agents/{AGENT}/chat"
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        # Every thread of alice's once, newest created first across pages.
        threads = _oldest_first(_walk(client, f"{base}/threads", alice))
        ids = [t["threadId"] for t in threads]
        assert len(ids) == len(set(ids)) == len(source)
        assert set(ids) == groups["shared"] | groups["private"]
        by_key = {t["key"]: t for t in threads}
        assert all(t["agentId"] == AGENT for t in threads)

        # Every message of every thread once, in order, equal to the source.
        total = 0
        cursors: dict[str, str] = {}
        for index, record in enumerate(source):
            thread_id = by_key[_key(index)]["threadId"]
            pages = _walk(client, f"{base}/threads/{thread_id}/messages", alice)
            messages = _oldest_first(pages)
            assert len(messages) == len(record["traj"]), index
            assert len({m["messageId"] for m in messages}) == len(messages), index
            seqs = [m["seq"] for m in messages]
            assert seqs == sorted(seqs), index
            assert len(set(seqs)) == len(seqs), index
            assert all(m["threadId"] == thread_id for m in messages), index
            for position, (item, entry) in enumerate(zip(messages, record["traj"], strict=True)):
                _assert_like_source(item, entry, f"record {index}, message {position}")
            total += len(messages)
            if len(pages) > 1 and len(cursors) < 2:
                first = client.get(
                    f"{base}/threads/{thread_id}/messages", params={"limit": 7}, headers=alice
                ).json()
                cursors[thread_id] = first["nextCursor"]
        assert total == 5308

        # A cursor of another thread, and an altered cursor: 400.
        (_, cursor_a), (b, cursor_b) = cursors.items()
        _error(
            client.get(f"{base}/threads/{b}/messages", params={"cursor": cursor_a}, headers=alice),
            400,
            "invalid_cursor",
        )
        altered = cursor_b[:-3] + ("AAA" if not cursor_b.endswith("AAA") else "BBB")
        _error(
            client.get(f"{base}/threads/{b}/messages", params={"cursor": altered}, headers=alice),
            400,
            "invalid_cursor",
        )
        _error(
            client.get(f"{base}/threads", params={"cursor": cursor_a}, headers=alice),
            400,
            "invalid_cursor",
        )
        for bad in ("0", "-1", "x", "1.5"):
            _error(
                client.get(f"{base}/threads", params={"limit": bad}, headers=alice),
                400,
                "invalid_request",
            )
        # Another principal: bob sees his own thread and those shared with his team only.
        private = sorted(groups["private"])[0]
        shared = sorted(groups["shared"])[0]
        bob = {"Authorization": f"Bearer {token('bob')}"}
        bob_red = {"Authorization": f"Bearer {token('bob', teams=['red'])}"}
        not_found = client.get(f"{base}/threads/{private}/messages", headers=bob)
        _error(not_found, 404, "not_found")
        unknown = client.get(f"{base}/threads/{uuid4()}/messages", headers=bob)
        assert unknown.json() == not_found.json()  # a foreign id looks like an unknown one
        _error(client.get(f"{base}/threads/{shared}/messages", headers=bob), 404, "not_found")
        assert client.get(f"{base}/threads/{shared}/messages", headers=bob_red).status_code == 200
        _error(client.get(f"{base}/threads/{private}/messages", headers=bob_red), 404, "not_found")
        _error(client.post(f"{base}/threads/{private}/start-over", headers=bob), 404, "not_found")
        _error(client.delete(f"{base}/threads/{private}", headers=bob), 404, "not_found")
        bob_sees = {t["threadId"] for t in _oldest_first(_walk(client, f"{base}/threads", bob))}
        assert bob_sees == groups["bob"]
        red_sees = {t["threadId"] for t in _oldest_first(_walk(client, f"{base}/threads", bob_red))}
        assert red_sees == groups["bob"] | groups["shared"]
        _error(
            client.get(f"/agents/other/chat/threads/{private}/messages", headers=alice),
            404,
            "not_found",
        )

        # No token, a bad token, an expired token: 401.
        for headers in (
            {},
            {"Authorization": "Bearer not-a-jwt"},
            {"Authorization": f"Bearer {token('alice', exp=1)}"},
            {"Authorization": "Basic YWxpY2U6cHc="},
        ):
            response = client.get(f"{base}/threads/{private}/messages", headers=headers)
            _error(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
            _error(client.get(f"{base}/threads", headers=headers), 401, "unauthorized")

        # A token for another tenant sees nothing of acme, even under alice's own name.
        for foreign in (token("carol", tenant="globex"), token("alice", tenant="globex")):
            headers = {"Authorization": f"Bearer {foreign}"}
            seen = {t["threadId"] for t in _oldest_first(_walk(client, f"{base}/threads", headers))}
            assert not seen & (groups["shared"] | groups["private"] | groups["bob"])
            _error(
                client.get(f"{base}/threads/{private}/messages", headers=headers), 404, "not_found"
            )
            own = client.get(f"{base}/messages", headers=headers).json()
            assert all(m["threadId"] in groups["carol"] for m in own["items"])

        # The caller's own thread with the agent: alice's newest.
        own = client.get(f"{base}/messages", params={"limit": 7}, headers=alice).json()
        assert own["items"]
        assert {m["threadId"] for m in own["items"]} == {threads[-1]["threadId"]}
