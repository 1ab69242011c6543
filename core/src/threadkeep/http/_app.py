"""The gateway's ASGI app factory: :func:`create_app`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from .. import __version__
from .._errors import InvalidArgument
from .._open import open_store
from .._store import Store
from ._auth import Authenticator
from ._errors import install_error_handlers
from ._limits import DEFAULT_MAX_BODY_BYTES, BodyLimit, checked_body_limit
from ._routes import router as history_router
from ._runs import AgentLookup, RunManagers
from ._runs import router as runs_router

__all__ = ["create_app"]


def create_app(
    store: Store | None = None,
    *,
    authenticator: Authenticator,
    url: str | None = None,
    store_options: Mapping[str, Any] | None = None,
    agents: AgentLookup | None = None,
    run_options: Mapping[str, Any] | None = None,
    viewer: bool = True,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """Build the gateway: the history API, the AG-UI run endpoint and the history viewer.

    Run it alone (``uvicorn``, or ``threadkeep serve``) or mount it into your service.
    Mounted sub-apps get no lifespan from Starlette, so pass an open ``store`` when
    mounting; with ``url`` the app opens its store at startup and closes it at shutdown
    (after the runs still being stored finish).

    Args:
        store: An open store to serve; the caller keeps it open and closes it.
        authenticator: Who is calling (required): a :class:`JWTAuthenticator` or any async
            callable ``request -> Principal | None`` (``None``: answered 401).
        url: A store URL to open for the app's lifetime instead of ``store``.
        store_options: Options for ``open_store(url, ...)`` (``cursor_secret``...).
        agents: ``agent_id -> AG-UI agent`` (or ``None``) for the run endpoint; without
            it the run endpoint answers 404 for every agent.
        run_options: ``StorageAgent`` options for every run: ``write_policy``
            (``"incremental"``/``"buffered"``), ``on_error`` (``"keep"``, or ``"discard"``:
            an errored turn stores nothing), ``flush_bytes``,
            ``lease_seconds``. ``user_id``, ``agent_id`` and ``chat_options`` come from
            the caller and the route.
        viewer: Serve the read-only history viewer page at ``/viewer/``.
        max_body_bytes: The largest request body accepted, in bytes (default 64 MiB); a
            larger one answers ``413 payload_too_large`` before it is buffered.

    Returns:
        The FastAPI app; its OpenAPI document is at ``/openapi.json``.

    Raises:
        InvalidArgument: If neither or both of ``store`` and ``url`` are given,
            ``authenticator`` is not callable, or ``run_options`` names a field the route
            sets or a value ``StorageAgent`` refuses, or ``max_body_bytes`` is not an
            integer >= 1.
    """
    if (store is None) == (url is None):
        raise InvalidArgument("give exactly one of store= (open) and url=")
    if not callable(authenticator):
        raise InvalidArgument("authenticator must be an async callable request -> Principal")
    app = FastAPI(
        title="threadkeep gateway",
        version=__version__,
        summary="Paged chat history per agent and thread, behind authentication.",
        lifespan=_lifespan(url, dict(store_options or {})),
    )
    app.state.threadkeep_store = store
    app.state.threadkeep_authenticator = authenticator
    app.state.threadkeep_agents = agents
    options = _checked_run_options(run_options)
    app.add_middleware(BodyLimit, limit=checked_body_limit(max_body_bytes))
    app.state.threadkeep_runs = RunManagers(lambda: app.state.threadkeep_store, options)
    install_error_handlers(app)
    app.include_router(history_router)
    app.include_router(runs_router)
    if viewer:
        from ._viewer import mount_viewer

        mount_viewer(app)
    _document_bearer_auth(app)
    return app


_RUN_OPTIONS = frozenset({"write_policy", "on_error", "flush_bytes", "owner", "lease_seconds"})


def _checked_run_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Refuse unknown options and bad policies when the app is built, not per request."""
    chosen = dict(options or {})
    unknown = set(chosen) - _RUN_OPTIONS
    if unknown:
        msg = f"run_options: unknown {sorted(unknown)}; known: {sorted(_RUN_OPTIONS)}"
        raise InvalidArgument(msg)
    if chosen.get("on_error", "keep") not in ("keep", "discard"):
        raise InvalidArgument("run_options: on_error is 'keep' or 'discard'")
    if chosen.get("write_policy", "incremental") not in ("incremental", "buffered"):
        raise InvalidArgument("run_options: write_policy is 'incremental' or 'buffered'")
    return chosen


def _document_bearer_auth(app: FastAPI) -> None:
    """Declare the bearer scheme on every route of the OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            schemes = document.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["bearer"] = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            document["security"] = [{"bearer": []}]
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _lifespan(url: str | None, options: dict[str, Any]) -> Any:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if url is None:
            yield
            await app.state.threadkeep_runs.drain()
            return
        async with open_store(url, **options) as opened:
            app.state.threadkeep_store = opened
            try:
                yield
                await app.state.threadkeep_runs.drain()  # stored before the store closes
            finally:
                app.state.threadkeep_store = None

    return lifespan
