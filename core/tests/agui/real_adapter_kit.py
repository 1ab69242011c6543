"""Helpers for ``test_real_adapters_*.py``: run a real AG-UI adapter, fold its stream two ways.

Not a test module (loaded with ``importlib`` by the tests, which run with
``--import-mode=importlib``). A real adapter (Pydantic AI's ``AGUIAdapter``, LangGraph's
``LangGraphAgent``, ADK's ``ADKAgent``) runs offline on a scripted model; :class:`Recorder`
is the inner agent that runs it and keeps each event as the adapter's own encoder puts it on
the wire. The stream is then stored

- live: :func:`live` wraps the recorder in ``StorageAgent`` (either write policy);
- imported: :func:`imported` writes the captured wire text as a run folder
  (``request.json`` + ``response.jsonl`` + a ``metadata.json`` that is not AG-UI) and runs
  ``import_agui``, the function behind ``threadkeep import --format agui``.

:func:`history` reads the stored chat back as plain tuples the tests compare with records
they state literally; :func:`ids` picks the ids the adapter minted (uuid4s) out of the
captured events, in stream order, so the expectations can name them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ag_ui.core import BaseEvent, RunAgentInput, UserMessage

from threadkeep import Message, Run, Store
from threadkeep._importers.agui import import_agui
from threadkeep.agui import StorageAgent

USER = "u"
PATHS = ["incremental", "buffered", "import"]
"""How a test folds a stream: live under each write policy, or imported from a run folder."""

StreamFactory = Callable[[RunAgentInput], AsyncIterator[BaseEvent]]


def run_input(
    thread: str, run: str = "r-1", prompt: str = "Weather in Paris?", messages: Any = None
) -> RunAgentInput:
    """A ``RunAgentInput`` on ``thread`` sending ``messages``, else one prompt (``msg-1``)."""
    return RunAgentInput(
        thread_id=thread,
        run_id=run,
        messages=messages or [UserMessage(id="msg-1", content=prompt)],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
    )


def next_turn(thread: str, run: str, history: list[dict[str, Any]], prompt: dict[str, Any]) -> Any:
    """The next run's input: the history a client sends back, then its new prompt."""
    return RunAgentInput.model_validate(
        {**run_input(thread, run).model_dump(by_alias=True), "messages": [*history, prompt]}
    )


class Recorder:
    """The inner agent: runs ``make_stream(input)`` and keeps each event's wire text."""

    def __init__(self, make_stream: StreamFactory, encode: Callable[[BaseEvent], str]) -> None:
        self.make_stream, self.encode = make_stream, encode
        self.wire: list[str] = []

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        async for event in self.make_stream(input):
            self.wire.append(self.encode(event))
            yield event

    def events(self) -> list[dict[str, Any]]:
        """The captured events as decoded wire objects (SSE ``data:`` payloads or JSON lines)."""
        return [json.loads(line) for line in self.lines()]

    def lines(self) -> list[str]:
        """One JSON text per event, as a harness writes ``response.jsonl``."""
        out: list[str] = []
        for chunk in self.wire:
            data = [
                line.removeprefix("data:").strip()
                for line in chunk.splitlines()
                if line.startswith("data:")
            ]
            out.append("\n".join(data) if data else chunk.strip())
        return out


async def drain(recorder: Recorder, request: RunAgentInput) -> None:
    """Run the adapter alone (no storage) to capture its stream."""
    async for _ in recorder.run(request):
        pass


async def live(
    store: Store, recorder: Recorder, request: RunAgentInput, policy: str, **options: Any
) -> None:
    """Run the adapter inside ``StorageAgent`` (``write_policy=policy``)."""
    agent = StorageAgent(recorder, store, user_id=USER, write_policy=policy, **options)  # type: ignore[arg-type]
    async for _ in agent.run(request):
        pass


async def imported(
    store: Store, folder: Path, recorder: Recorder, request: RunAgentInput, **options: Any
) -> Any:
    """Write the captured stream as a run folder and import it; return the import report."""
    write_run_folder(folder, recorder, request)
    return await import_agui(store, folder, user_id=USER, thread_scope="thread", **options)


def write_run_folder(folder: Path, recorder: Recorder, request: RunAgentInput) -> None:
    """Lay a run out as harnesses do: ``request.json``, ``response.jsonl``, ``metadata.json``."""
    folder.mkdir(parents=True)
    body = request.model_dump(by_alias=True, exclude_none=True, mode="json")
    (folder / "request.json").write_text(json.dumps(body), encoding="utf-8")
    (folder / "response.jsonl").write_text(
        "".join(line + "\n" for line in recorder.lines()), encoding="utf-8"
    )
    (folder / "metadata.json").write_text(json.dumps({"harness": "test"}), encoding="utf-8")


async def fold(
    path: str,
    store: Store,
    tmp_path: Path,
    recorder: Recorder,
    request: RunAgentInput,
    **options: Any,
) -> list[dict[str, Any]]:
    """Store one run of the adapter by ``path``; return the events it sent (decoded)."""
    start = len(recorder.wire)
    if path == "import":
        await drain(recorder, request)
        captured = Recorder(recorder.make_stream, recorder.encode)
        captured.wire = recorder.wire[start:]
        await imported(store, tmp_path / f"run-{request.run_id}", captured, request, **options)
    else:
        await live(store, recorder, request, path, **options)
    decoded = Recorder(recorder.make_stream, recorder.encode)
    decoded.wire = recorder.wire[start:]
    return decoded.events()


def summary(message: Message) -> tuple[Any, ...]:
    """A stored message as the tests state it."""
    return (
        message.role.value,
        message.agui_id,
        message.content,
        message.status.value,
        message.tool_call_ref,
        [(c.agui_id, c.name, c.arguments) for c in message.tool_calls],
        [(r.content, r.encrypted_value) for r in message.reasonings],
        message.tokens,
    )


async def history(store: Store, thread: str) -> list[tuple[Any, ...]]:
    """Every visible message of the thread's chat, oldest first, as :func:`summary` tuples."""
    chat = await store.find_chat(USER, thread)
    assert chat is not None, f"no chat for thread {thread!r}"
    page = await store.list_messages(chat.chat_id, limit=200)
    assert not page.has_more
    return [summary(m) for m in page.items]


async def run_of(store: Store, thread: str, run_id: str) -> Run:
    """The stored run."""
    chat = await store.find_chat(USER, thread)
    assert chat is not None
    return await store.get_run(chat.chat_id, run_id)


def ids(events: list[dict[str, Any]], kind: str, key: str = "messageId") -> list[str]:
    """The distinct ``key`` values of events of type ``kind``, in stream order."""
    seen: list[str] = []
    for event in events:
        if event["type"] == kind and event.get(key) not in seen:
            seen.append(event[key])
    return seen


def client_messages(prompt: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The message list an AG-UI client builds from a run's events (ids as streamed).

    As ``@ag-ui/client`` does: a text message per ``TEXT_MESSAGE_START``; a tool call joins
    the message its ``parentMessageId`` names, or a new assistant message (id: the parent's,
    else the call's) when none is held; a tool message per ``TOOL_CALL_RESULT``.
    """
    out: list[dict[str, Any]] = [prompt]
    by_id: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            by_id[event["messageId"]] = {
                "id": event["messageId"],
                "role": "assistant",
                "content": "",
            }
            out.append(by_id[event["messageId"]])
        elif kind == "TEXT_MESSAGE_CONTENT":
            by_id[event["messageId"]]["content"] += event["delta"]
        elif kind == "TOOL_CALL_START":
            parent = event.get("parentMessageId") or event["toolCallId"]
            if parent not in by_id:
                by_id[parent] = {"id": parent, "role": "assistant", "content": ""}
                out.append(by_id[parent])
            function = {"name": event["toolCallName"], "arguments": ""}
            call = {"id": event["toolCallId"], "type": "function", "function": function}
            by_id[parent].setdefault("toolCalls", []).append(call)
            by_id[event["toolCallId"]] = function
        elif kind == "TOOL_CALL_ARGS":
            by_id[event["toolCallId"]]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            result = {"id": event["messageId"], "role": "tool", "content": event["content"]}
            out.append({**result, "toolCallId": event["toolCallId"]})
    return out
