"""The runnable example ``docs/examples/agui_sse``: started in-process, its SSE stream read.

The app is driven through the ASGI interface directly (no server, no HTTP client library):
a POST streams the run's events as ``data:`` frames, the history endpoint pages what was
stored, and a client that disconnects after three frames does not stop the run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from threadkeep import MessageStatus, open_store

APP = Path(__file__).resolve().parents[3] / "docs" / "examples" / "agui_sse" / "app.py"


@pytest.fixture(scope="module")
def example() -> Any:
    spec = importlib.util.spec_from_file_location("agui_sse_example", APP)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def call(
    app, method: str, target: str, body: Any = None, *, hang_up_after: int | None = None
):
    """Send one HTTP request to the ASGI app; return ``(status, body chunks)``."""
    path, _, query = target.partition("?")
    payload = json.dumps(body).encode() if body is not None else b""
    chunks: list[bytes] = []
    status: list[int] = []
    sent = False
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            if message.get("body"):
                chunks.append(message["body"])
            if not message.get("more_body") or len(chunks) == hang_up_after:
                gone.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"x-user-id", b"alice")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    await app(scope, receive, send)
    return status[0], chunks


def events_of(chunks: list[bytes]) -> list[dict[str, Any]]:
    text = b"".join(chunks).decode()
    return [json.loads(frame[6:]) for frame in text.split("\n\n") if frame.startswith("data: ")]


def run_input(run_id: str) -> dict[str, Any]:
    return {
        "threadId": "t1",
        "runId": run_id,
        "messages": [{"id": f"m-{run_id}", "role": "user", "content": "Oslo"}],
    }


async def test_the_example_streams_a_run_and_stores_it(example):
    async with open_store(f"memory://example-{uuid4().hex}") as store:
        app = example.create_app(store, agent=example.WeatherAgent(delay=0))
        status, chunks = await call(app, "POST", "/agui", run_input("r1"))
        assert status == 200
        events = events_of(chunks)
        assert [e["type"] for e in events][:2] == ["RUN_STARTED", "TOOL_CALL_START"]
        assert events[-1]["type"] == "RUN_FINISHED"
        answer = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")

        status, chunks = await call(app, "GET", "/threads/t1/messages")
        assert status == 200
        page = json.loads(b"".join(chunks))
        stored = page["items"]
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert stored[1]["tool_calls"][0]["name"] == "get_weather"
        assert (stored[3]["content"], stored[3]["status"]) == (answer, "complete")

        status, _ = await call(app, "POST", "/agui", {"threadId": "t1"})
        assert status == 422
        status, _ = await call(app, "GET", "/threads/t1/messages?cursor=forged")
        assert status == 400


async def test_a_client_that_hangs_up_does_not_stop_the_run(example):
    async with open_store(f"memory://example-{uuid4().hex}") as store:
        app = example.create_app(store, agent=example.WeatherAgent(delay=0.001))
        status, chunks = await call(app, "POST", "/agui", run_input("r2"), hang_up_after=3)
        assert status == 200
        assert "RUN_FINISHED" not in [e["type"] for e in events_of(chunks)]
        handle = app.state.manager.get("t1", "r2")
        if handle is not None:
            await handle.wait()
        chat = await store.find_chat("alice", "t1")
        answer = await store.get_message_by_agui_id(chat.chat_id, "answer-r2")
        assert answer is not None
        assert answer.status is MessageStatus.COMPLETE
        assert answer.content.startswith("The forecast says")


async def test_the_app_opens_its_own_store_for_its_lifetime(example, tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'example.db'}"
    app = example.create_app(url=url, agent=example.WeatherAgent(delay=0))
    messages = [{"type": "lifespan.startup"}]
    replies: list[str] = []
    shutdown, started = asyncio.Event(), asyncio.Event()

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await shutdown.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: dict[str, Any]) -> None:
        replies.append(message["type"])
        started.set()

    lifespan = asyncio.create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    )
    await started.wait()
    status, chunks = await call(app, "POST", "/agui", run_input("r3"))
    assert (status, events_of(chunks)[-1]["type"]) == (200, "RUN_FINISHED")
    shutdown.set()
    await lifespan
    assert replies == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    async with open_store(url) as store:
        chat = await store.find_chat("alice", "t1")
        assert len((await store.list_messages(chat.chat_id)).items) == 4


class HeldAgent:
    """The example's agent, held after its first event until ``release`` is set.

    A retry sent while it is held lands mid-run however loaded the machine is.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, input: Any) -> Any:
        held = False
        async for event in self.inner.run(input):
            yield event
            if not held:
                held = True
                self.started.set()
                await self.release.wait()


async def test_a_retry_of_a_run_still_streaming_gets_run_conflict_not_a_500(example, tmp_path):
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'ex.db'}") as store:
        agent = HeldAgent(example.WeatherAgent(delay=0))
        app = example.create_app(store, agent=agent)
        first = asyncio.create_task(call(app, "POST", "/agui", run_input("r4")))
        await asyncio.wait_for(agent.started.wait(), 120)  # a hang guard, not a timing
        assert app.state.manager.get("t1", "r4") is not None
        status, chunks = await call(app, "POST", "/agui", run_input("r4"))
        assert status == 200
        (refused,) = events_of(chunks)
        assert (refused["type"], refused["code"]) == ("RUN_ERROR", "RUN_CONFLICT")
        assert "is executing" in refused["message"]
        # The first stream is untouched, and a retry after it ended gets the same answer.
        agent.release.set()
        status, chunks = await first
        assert (status, events_of(chunks)[-1]["type"]) == (200, "RUN_FINISHED")
        await app.state.manager.drain()
        status, chunks = await call(app, "POST", "/agui", run_input("r4"))
        (again,) = events_of(chunks)
        assert (status, again["type"], again["code"]) == (200, "RUN_ERROR", "RUN_CONFLICT")
