"""AG-UI over server-sent events, with every run stored as chat history.

A small Starlette app: ``POST /agui`` takes an AG-UI ``RunAgentInput`` and streams the
agent's events back as SSE while ``threadkeep.agui`` stores them; the run goes on (and is
stored) if the client disconnects. ``POST /agui/{thread_id}/{run_id}/cancel`` stops a run
(its records end ``interrupted``), ``GET /threads/{thread_id}/messages`` pages the stored
history (``?cursor=`` for older pages). The agent is scripted (no model needed); replace
``WeatherAgent`` with yours: anything with ``run(input) -> AsyncIterator[BaseEvent]``.

Run it::

    pip install "threadkeep[agui]" threadkeep-sql starlette uvicorn
    python docs/examples/agui_sse/app.py            # serves http://127.0.0.1:8000
    curl -N -H 'content-type: application/json' -H 'x-user-id: alice' \\
      -d '{"threadId": "t1", "runId": "r1",
           "messages": [{"id": "m1", "role": "user", "content": "Oslo?"}]}' \\
      http://127.0.0.1:8000/agui
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from threadkeep import Conflict, InvalidCursor, Store, open_store
from threadkeep.agui import RunManager, StorageAgent, WritePolicy, current_run

DEFAULT_URL = "sqlite+aiosqlite:///./agui-example.db"


class WeatherAgent:
    """A scripted agent: one tool call (recorded as a resumable step), then a streamed answer."""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        ctx = current_run()
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        question = str(input.messages[-1].content) if input.messages else ""
        call_id = f"call-{input.run_id}"
        async with ctx.step("tool", input={"city": question}, key=call_id) as step:
            if not step.done:  # a resumed run never calls the tool twice
                step.output = {"forecast": "-3°C and snow"}
        yield ToolCallStartEvent(tool_call_id=call_id, tool_call_name="get_weather")
        yield ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps({"city": question}))
        yield ToolCallEndEvent(tool_call_id=call_id)
        forecast = step.output["forecast"]
        yield ToolCallResultEvent(
            message_id=f"result-{input.run_id}", tool_call_id=call_id, content=forecast
        )
        answer_id = f"answer-{input.run_id}"
        async with ctx.step("llm", input={"messages": len(input.messages)}) as llm:
            yield TextMessageStartEvent(message_id=answer_id, role="assistant")
            for word in f"The forecast says {forecast}. Dress warmly!".split(" "):
                await asyncio.sleep(self.delay)
                yield TextMessageContentEvent(message_id=answer_id, delta=word + " ")
            yield TextMessageEndEvent(message_id=answer_id)
            llm.output = {"answered": True}
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def sse(event: BaseEvent) -> str:
    """Encode one event as an SSE ``data:`` frame (camelCase JSON, as AG-UI clients expect)."""
    return f"data: {event.model_dump_json(by_alias=True)}\n\n"


def create_app(
    store: Store | None = None,
    *,
    url: str = DEFAULT_URL,
    agent: Any = None,
    write_policy: WritePolicy = "incremental",
) -> Starlette:
    """Build the app; with no ``store``, one is opened from ``url`` for the app's lifetime."""
    agent = agent or WeatherAgent()
    state: dict[str, Any] = {"store": store}

    def user_of(request: Request) -> str:
        return request.headers.get("x-user-id", "demo-user")

    async def run_agent(request: Request) -> Response:
        try:
            input = RunAgentInput.model_validate(await request.json())
        except (ValidationError, ValueError) as exc:
            return JSONResponse({"error": f"not a RunAgentInput: {exc}"}, status_code=422)
        user_id = user_of(request)
        try:
            handle = await manager.run(input, user_id)
        except Conflict as exc:
            # The same run is still streaming (a client retry): answer as for a run id
            # already used, a RUN_ERROR with code RUN_CONFLICT; the first stream goes on.
            refused = RunErrorEvent(message=str(exc), code="RUN_CONFLICT")
            return StreamingResponse(iter([sse(refused)]), media_type="text/event-stream")

        async def stream() -> AsyncIterator[str]:
            # If the client goes away this generator is closed; the run is not.
            async for event in handle.events():
                yield sse(event)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def cancel(request: Request) -> Response:
        found = manager.cancel(request.path_params["thread_id"], request.path_params["run_id"])
        return JSONResponse({"cancelled": found})

    async def messages(request: Request) -> Response:
        opened: Store = state["store"]
        chat = await opened.find_chat(user_of(request), request.path_params["thread_id"])
        if chat is None:
            return JSONResponse({"error": "no such thread"}, status_code=404)
        try:
            page = await opened.list_messages(
                chat.chat_id, cursor=request.query_params.get("cursor")
            )
        except InvalidCursor as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(page.model_dump(mode="json"))

    manager = RunManager(
        lambda user_id: StorageAgent(
            agent, state["store"], user_id=user_id, agent_id="weather", write_policy=write_policy
        )
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if state["store"] is not None:
            yield
            await manager.drain()
            return
        async with open_store(url) as opened:
            state["store"] = opened
            yield
            await manager.drain()  # runs still being stored finish before the store closes

    routes = [
        Route("/agui", run_agent, methods=["POST"]),
        Route("/agui/{thread_id}/{run_id}/cancel", cancel, methods=["POST"]),
        Route("/threads/{thread_id}/messages", messages, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.manager = manager  # for operators (and tests): cancel, get, resume
    return app


if __name__ == "__main__":
    import uvicorn  # pip install uvicorn

    uvicorn.run(create_app(url=os.environ.get("THREADKEEP_URL", DEFAULT_URL)), port=8000)
