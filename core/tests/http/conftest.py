"""Fixtures of the gateway tests: JWTs, and the app served by a real uvicorn on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jwt
import pytest
import uvicorn
from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

SECRET = "gateway-tests-shared-secret-0123456789abcdef"


@pytest.fixture(scope="session")
def token() -> Callable[..., str]:
    """``token(sub, tenant=..., teams=[...])``: an HS256 JWT signed with :data:`SECRET`."""

    def make(
        sub: str, *, tenant: str | None = "acme", teams: list[str] | None = None, **claims: Any
    ) -> str:
        body = {"sub": sub, "tenant": tenant, "teams": teams or [], "exp": time.time() + 3600}
        return jwt.encode({**body, **claims}, SECRET, algorithm="HS256")

    return make


@pytest.fixture
def secret() -> str:
    return SECRET


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    # The listening socket is bound here and handed to uvicorn: a port picked free and bound
    # again later could be taken in between by another process on a busy machine.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        listener.close()


@pytest.fixture(scope="session")
def serve() -> Callable[[Any], Any]:
    """``with serve(app) as base_url:`` runs ``app`` on a real uvicorn on 127.0.0.1."""
    return _serving


class EchoAgent:
    """An AG-UI agent that answers every run with the last user message, in two deltas."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        said = str(input.messages[-1].content) if input.messages else ""
        answer = f"answer-{input.run_id}"
        yield TextMessageStartEvent(message_id=answer, role="assistant")
        for delta in ("you said: ", said):
            yield TextMessageContentEvent(message_id=answer, delta=delta)
        yield TextMessageEndEvent(message_id=answer)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


@pytest.fixture(scope="session")
def echo_agent() -> EchoAgent:
    return EchoAgent()
