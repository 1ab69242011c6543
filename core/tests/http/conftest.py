"""Fixtures of the gateway tests: JWTs, and the app served by a real uvicorn on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jwt
import pytest
import uvicorn

SECRET = "gateway-tests-shared-secret-0123456789abcdef"


@pytest.fixture
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    config = uvicorn.Config(
        app, host="127.0.0.1", port=_free_port(), log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def serve() -> Callable[[Any], Any]:
    """``with serve(app) as base_url:`` runs ``app`` on a real uvicorn on 127.0.0.1."""
    return _serving
