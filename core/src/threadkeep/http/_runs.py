"""The AG-UI run endpoint: ``POST /agents/{agent_id}/chat/runs`` streams a run as SSE.

The body is an AG-UI ``RunAgentInput``; its ``threadId`` is the caller's own thread key (a
thread item's ``key``). The run is stored by :class:`threadkeep.agui.StorageAgent` (see
``docs/run-persistence.md``) in the caller's chat of that key, created in the caller's tenant
and first team. The run goes on, and is stored, if the client disconnects; a second stream
of a run still executing answers one ``RUN_ERROR`` with code ``RUN_CONFLICT``. The
terminal event (``RUN_FINISHED``/``RUN_ERROR``) is sent once the run is stored, so a client
reading the thread when it arrives finds the answer and the run's outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from .._errors import Conflict
from ._access import authenticated, not_found, store_of
from ._auth import Principal
from ._errors import ERROR_RESPONSES, ApiError

__all__ = ["STORED_WAIT", "AgentLookup", "RunManagers", "router"]

AgentLookup = Callable[[str], Any]
"""``agent_id -> AG-UI agent`` (anything with ``run(input) -> AsyncIterator[BaseEvent]``),
or ``None`` when the gateway runs no agent of that id (answered 404)."""

router = APIRouter(prefix="/agents/{agent_id}/chat", responses=ERROR_RESPONSES)

STORED_WAIT = 30.0
"""Seconds the terminal event waits for the run's records to be stored (an inner agent
still running after its terminal event delays them); then it is sent all the same."""

_INPUT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
        "description": "An AG-UI RunAgentInput (threadId, runId, messages, ...).",
    }
}


@router.post(
    "/runs",
    tags=["runs"],
    openapi_extra=_INPUT_BODY,
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "AG-UI events"}},
)
async def run_agent(
    request: Request,
    *,
    agent_id: Annotated[str, Path(min_length=1, max_length=1000)],
    caller: Annotated[Principal, Depends(authenticated)],
) -> StreamingResponse:
    """Run the agent on an AG-UI ``RunAgentInput`` and stream its events (SSE)."""
    from ag_ui.core import RunAgentInput, RunErrorEvent

    store = store_of(request)
    lookup: AgentLookup | None = request.app.state.threadkeep_agents
    inner = None if lookup is None else lookup(agent_id)
    if inner is None:
        raise not_found()
    try:
        run_input = RunAgentInput.model_validate(await request.json())
    except RecursionError:  # nested deeper than the JSON decoder's recursion limit
        raise ApiError(400, "invalid_request", "the body nests too deeply") from None
    except (ValidationError, ValueError) as exc:
        raise ApiError(400, "invalid_request", f"not an AG-UI RunAgentInput: {exc}") from exc
    await _check_thread(store, caller, agent_id, run_input.thread_id)
    managers: RunManagers = request.app.state.threadkeep_runs
    try:
        handle = await managers.of(caller).run(run_input, agent_id, inner)
    except Conflict as exc:
        refused = RunErrorEvent(message=str(exc), code="RUN_CONFLICT")
        return StreamingResponse(iter([_sse(refused)]), media_type="text/event-stream")

    return StreamingResponse(_stored_stream(handle), media_type="text/event-stream")


class RunManagers:
    """One :class:`threadkeep.agui.RunManager` per principal.

    A manager keys its runs by ``(threadId, runId)``, which are the caller's own names; one
    manager per ``(tenant, user)`` keeps two people's keys from colliding (or one person
    from learning, by a conflict, that another runs a thread of the same key).

    Args:
        store: Returns the app's open store when a run starts.
        options: More ``StorageAgent`` keyword arguments for every run (``write_policy``,
            ``on_error``, ``flush_bytes``, ``lease_seconds``...).
    """

    def __init__(self, store: Callable[[], Any], options: Mapping[str, Any] | None = None) -> None:
        self._store = store
        self._options = dict(options or {})
        self._managers: dict[tuple[str | None, str], Any] = {}

    def of(self, caller: Principal) -> Any:
        """Return the ``RunManager`` of ``caller`` (created on first use)."""
        from ..agui import RunManager, StorageAgent

        key = (caller.tenant_id, caller.user_id)
        if key not in self._managers:

            def factory(agent_id: str, inner: Any) -> StorageAgent:
                team = caller.teams[0] if caller.teams else None
                return StorageAgent(
                    inner,
                    self._store(),
                    user_id=caller.user_id,
                    agent_id=agent_id,
                    chat_options={"tenant_id": caller.tenant_id, "team_id": team},
                    **self._options,
                )

            self._managers[key] = RunManager(factory)
        return self._managers[key]

    def cancel(self, caller: Principal, key: str, run_id: str) -> bool:
        """Cancel the caller's run ``run_id`` of thread key ``key``; ``False`` if none runs."""
        manager = self._managers.get((caller.tenant_id, caller.user_id))
        return bool(manager is not None and manager.cancel(key, run_id))

    async def drain(self) -> None:
        """Wait until every run started here has ended and is stored. Never raises."""
        for manager in list(self._managers.values()):
            await manager.drain()


async def _check_thread(store: Any, caller: Principal, agent_id: str, key: str) -> None:
    """A key of the caller's already naming a chat of another agent or tenant: 404."""
    if not key:
        raise ApiError(400, "invalid_request", "threadId must not be empty")
    chat = await store.find_chat(caller.user_id, key, tenant_id=caller.tenant_id)
    if chat is not None and (chat.agent_id != agent_id or chat.tenant_id != caller.tenant_id):
        raise not_found()


async def _stored_stream(handle: Any) -> AsyncIterator[str]:
    """The run's events as SSE; the terminal event only once the run is stored.

    A chat UI reads the thread again when ``RUN_FINISHED``/``RUN_ERROR`` arrives: holding
    that event until :meth:`RunHandle.wait` returns (at most :data:`STORED_WAIT` seconds)
    makes the answer and the run's outcome readable by then (read-your-writes). A client
    that goes away closes this generator, not the run, which goes on and is stored.
    """
    from ag_ui.core import RunErrorEvent, RunFinishedEvent

    async for event in handle.events():
        if isinstance(event, RunFinishedEvent | RunErrorEvent):
            # An inner agent lingering after its terminal event holds the last writes: wait
            # a bounded time, never cancelling the run's own storing (wait() never raises).
            await asyncio.wait({asyncio.ensure_future(handle.wait())}, timeout=STORED_WAIT)
        yield _sse(event)


def _sse(event: Any) -> str:
    return f"data: {event.model_dump_json(by_alias=True)}\n\n"
