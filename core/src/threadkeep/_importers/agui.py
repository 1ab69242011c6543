"""Recorded AG-UI event streams become chats (``threadkeep import PATH --format agui``).

Input (``PATH`` a file or a directory of them; a UTF-8 BOM is tolerated):

- an event stream: a JSON array of events, JSON Lines, or ``data:`` server-sent events
  (comments, ``id:``/``event:``/``retry:`` fields and multi-line data are handled); a JSON
  object mapping names to event arrays holds several named streams;
- a ``RunAgentInput`` request file beside its response stream, paired by name
  (``X#Turn_01.02.Request.Client...json`` with ``X#Turn_01.06.Response.Server...json``):
  the request's messages not yet stored are imported as the run's history first. Loose
  recorded shapes are accepted: messages without ``id`` get a deterministic one
  (``import:<position>:<hash of role and content>``, so a later turn echoing them finds
  them), and the 0.x ``binary`` content part becomes an image or document part.

A stream splits into runs at each ``RUN_STARTED``; each run is folded by
:class:`threadkeep.agui.StorageAgent` (``write_policy="buffered"``) exactly as a live run,
so what is stored equals what the wrapper stores: one message per message id with its
deltas folded, tool calls nested with their ids, names and argument strings, reasoning
folded into one record per reasoning message, ``RUN_ERROR`` runs ended ``errored``.

Keys are deterministic, so importing again changes nothing: the chat of a run is
``agui:<source>:<threadId>`` (``<source>`` is the file name, up to a ``#`` turn suffix, plus
``#<name>`` for a named stream) and a run already stored in it is skipped. Events that do
not parse (not JSON, an unknown shape, a required field missing) are skipped, with one
warning per file in the ``threadkeep.import`` log counting them and showing the first; a file
named directly that holds no event at all fails with one error saying the same.

Some recorders reuse an id, for example a tool call's id as its result's message id. The
run's single batch is then refused and its messages are written one by one: the message
whose id is taken keeps it in ``metadata["agui_id"]``. Nothing is lost; the import logs one
warning saying so (instead of the run wrapper's "not ended in one batch").
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ag_ui.core import BaseEvent, RunAgentInput, RunStartedEvent
from pydantic import ValidationError

from .._errors import InvalidArgument
from .._models import Message
from .._paging import MessageFilter
from ..agui._agent import StorageAgent
from ..agui._inbound import classify_inbound
from ..agui._wire import parse_event, read_event_text
from . import ImportReport, ProgressCallback

if TYPE_CHECKING:
    from .._store import Store

__all__ = ["import_agui", "normalize_request"]

_log = logging.getLogger("threadkeep.import")
_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".sse", ".txt", ".events"})
_PAIRED = re.compile(r"^(?P<stem>.+?)(?:\.\d+)?\.(?P<kind>Request|Response)\.")
_OWNER = "threadkeep-import"


@dataclass
class _Source:
    """One stream to import: its events, its request (if any), where it came from."""

    name: str
    events: list[BaseEvent] = field(default_factory=list)
    request: dict[str, Any] | None = None


@dataclass
class _Run:
    source: _Source
    thread_key: str
    run_id: str
    events: list[BaseEvent]
    request: RunAgentInput | None


async def import_agui(
    store: Store,
    path: str | PathLike[str],
    *,
    user_id: str,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import recorded AG-UI streams (and their requests) from a file or a directory.

    Args:
        store: An open store with the ``steps`` capability.
        path: A stream file, a request file (its response is found beside it), or a
            directory (every ``.json``/``.jsonl``/``.ndjson``/``.sse``/``.txt`` file in it,
            recursively, in name order).
        user_id: Owner of the imported chats.
        progress: Called as ``progress(0, runs_total)`` once every file is read, then as
            ``progress(runs_done, runs_total)`` after each run is stored.

    Returns:
        Counts of chats, messages and tool calls, created versus already present.

    Raises:
        InvalidArgument: If ``path`` does not exist, a file named directly holds no AG-UI
            events or request, or a directory holds no file that does.
        ThreadkeepError: Any error of the store.
    """
    runs = _runs(_sources(Path(path)))
    report = ImportReport()
    chats: set[str] = set()
    if progress is not None:
        progress(0, len(runs))  # read: writing starts
    for done, run in enumerate(runs, start=1):
        report.merge(await _import_run(store, user_id, run, chats))
        if progress is not None:
            progress(done, len(runs))
    return report


# -- reading ------------------------------------------------------------------------------


def _sources(path: Path) -> list[_Source]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
        if not files:
            kinds = ", ".join(sorted(_SUFFIXES))
            raise InvalidArgument(f"{path} holds no stream files ({kinds})")
        sources = _paired([(f, _read(f, strict=False)) for f in files])
        if not sources:
            msg = f"no file in {path} holds AG-UI events or a request ({len(files)} read)"
            raise InvalidArgument(msg)
        return sources
    if not path.is_file():
        raise InvalidArgument(f"{path}: no such file or directory")
    files = [path, *_siblings(path)]
    return _paired([(f, _read(f, strict=f == path)) for f in files])


def _siblings(path: Path) -> list[Path]:
    match = _PAIRED.match(path.name)
    if match is None:
        return []
    other = "Response" if match["kind"] == "Request" else "Request"
    return sorted(
        p
        for p in path.parent.iterdir()
        if p != path
        and (m := _PAIRED.match(p.name))
        and (m["stem"], m["kind"]) == (match["stem"], other)
    )


def _read(path: Path, *, strict: bool) -> list[_Source]:
    """Read one file; what does not parse is summed up in one line, never one per item.

    A file named directly (``strict``) that holds nothing importable fails with one error
    (the skipped items counted in it); otherwise one warning per file counts what was
    skipped and shows the first problem.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc
    parsed = read_event_text(text) if text.strip() else None
    skipped = list(parsed.problems) if parsed else []
    sources = _classify(path, parsed.items if parsed else [], skipped)
    summary = ""
    if skipped:
        count = f"{len(skipped)} item{'s' if len(skipped) > 1 else ''}"
        summary = f"{count} skipped as not AG-UI events (first: {skipped[0]})"
    if strict and not sources:
        msg = f"{path} holds no AG-UI events or RunAgentInput request"
        raise InvalidArgument(msg + (f": {summary}; is --format right?" if summary else ""))
    if summary:
        _log.warning("%s: %s", path, summary)
    return sources


def _classify(path: Path, items: list[Any], skipped: list[str]) -> list[_Source]:
    base = path.name.split("#", 1)[0]
    if len(items) == 1 and isinstance(items[0], dict):
        document = items[0]
        if "type" not in document and isinstance(document.get("messages"), list):
            return [_Source(base, request=document)]
        if "type" not in document and all(isinstance(v, list) for v in document.values()):
            return [
                _Source(f"{path.name}#{name}", _events(value, skipped, f"{name}: "))
                for name, value in document.items()
            ]
    events = _events(items, skipped)
    return [_Source(base, events)] if events else []


def _events(items: list[Any], skipped: list[str], prefix: str = "") -> list[BaseEvent]:
    """Return the items that parse as AG-UI events; add a line per other item to ``skipped``."""
    events: list[BaseEvent] = []
    for index, item in enumerate(items):
        try:
            events.append(parse_event(item))
        except InvalidArgument as exc:
            skipped.append(f"{prefix}event {index}: {exc}")
    return events


def _paired(read: list[tuple[Path, list[_Source]]]) -> list[_Source]:
    """Attach each request to the response stream of the same name stem."""
    requests: dict[tuple[Path, str], dict[str, Any]] = {}
    for path, sources in read:
        match = _PAIRED.match(path.name)
        for source in sources:
            if source.request is not None and match is not None:
                requests[(path.parent, match["stem"])] = source.request
    result: list[_Source] = []
    used: set[tuple[Path, str]] = set()
    for path, sources in read:
        match = _PAIRED.match(path.name)
        key = (path.parent, match["stem"]) if match else None
        for source in sources:
            if source.request is None:
                if key in requests and key is not None:
                    source.request = requests[key]
                    used.add(key)
                result.append(source)
            elif key is None or key not in requests:
                result.append(source)
    # A request whose response is missing is still history worth importing.
    result += [
        _Source(src.name, request=src.request)
        for path, sources in read
        for src in sources
        if src.request is not None
        and (m := _PAIRED.match(path.name)) is not None
        and (path.parent, m["stem"]) not in used
    ]
    return result


def _runs(sources: list[_Source]) -> list[_Run]:
    runs: list[_Run] = []
    for source in sources:
        request = normalize_request(source.request) if source.request else None
        segments = _segments(source.events) or [[]]
        for index, events in enumerate(segments):
            started = next((e for e in events if isinstance(e, RunStartedEvent)), None)
            first = request if index == 0 else None
            thread = started.thread_id if started else first.thread_id if first else "thread"
            run_id = started.run_id if started else first.run_id if first else None
            runs.append(
                _Run(
                    source=source,
                    thread_key=f"agui:{source.name}:{thread}",
                    run_id=run_id or f"import:{_digest(source.name, str(index))}",
                    events=events,
                    request=first,
                )
            )
    return runs


def _segments(events: list[BaseEvent]) -> list[list[BaseEvent]]:
    segments: list[list[BaseEvent]] = []
    for event in events:
        if isinstance(event, RunStartedEvent) or not segments:
            segments.append([])
        segments[-1].append(event)
    return segments


def normalize_request(request: dict[str, Any]) -> RunAgentInput:
    """Return a recorded request as a ``RunAgentInput`` (see the module docstring).

    Raises:
        InvalidArgument: If the request does not validate even after normalizing.
    """
    data = dict(request)
    data.setdefault("threadId", data.get("thread_id", "thread"))
    data.setdefault("runId", data.get("run_id", f"import:{_digest(json.dumps(request))}"))
    data["messages"] = [_normalize_message(m, i) for i, m in enumerate(data.get("messages", []))]
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise InvalidArgument(f"the recorded request is not a RunAgentInput: {exc}") from exc


def _normalize_message(message: Any, position: int) -> Any:
    if not isinstance(message, dict):
        return message
    data = dict(message)
    if isinstance(data.get("content"), list):
        data["content"] = [_normalize_part(p) for p in data["content"]]
    if not data.get("id"):
        shape = json.dumps([data.get("role"), data.get("content"), data.get("toolCalls")])
        data["id"] = f"import:{position}:{_digest(shape)}"
    return data


def _normalize_part(part: Any) -> Any:
    if not isinstance(part, dict) or part.get("type") != "binary":
        return part
    mime = part.get("mimeType") or part.get("mime_type") or ""
    if part.get("data") is not None:
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    else:
        source = {"type": "url", "value": part.get("url") or part.get("id") or ""}
        source |= {"mimeType": mime} if mime else {}
    return {"type": "image" if mime.startswith("image/") else "document", "source": source}


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


# -- writing ------------------------------------------------------------------------------


class _Replay:
    """An inner agent that yields recorded events."""

    def __init__(self, events: list[BaseEvent]) -> None:
        self.events = events

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        for event in self.events:
            yield event


async def _import_run(store: Store, user_id: str, run: _Run, chats: set[str]) -> ImportReport:
    """Import one run; ``chats`` holds the thread keys this import has counted already."""
    report = ImportReport()
    chat = await store.find_chat(user_id, run.thread_key)
    if chat is None:
        chat = await store.create_chat(user_id, run.thread_key, name=run.source.name)
        report.chats_created += 1
    elif run.thread_key not in chats:
        report.chats_present += 1
    chats.add(run.thread_key)
    if run.run_id in await _stored_runs(store, chat.chat_id, run.run_id):
        stored = await _run_messages(store, chat.chat_id, run.run_id)
        report.messages_present += len(stored)
        report.tool_calls_present += sum(len(m.tool_calls) for m in stored)
        return report
    if run.request is not None and run.request.messages:
        context = await store.context_messages(chat.chat_id)
        history, _ = await classify_inbound(
            store, chat.chat_id, run.request.messages, context, run_id=run.run_id, accept_any=True
        )
        await store.append_messages(chat.chat_id, history)
    agent = StorageAgent(
        _Replay(run.events), store, user_id=user_id, write_policy="buffered", owner=_OWNER
    )
    base = run.request or RunAgentInput(thread_id=run.thread_key, run_id=run.run_id, messages=[])
    replay_input = base.model_copy(
        update={"thread_id": run.thread_key, "run_id": run.run_id, "messages": []}
    )
    with _refused_batches() as refused:
        async for _event in agent.run(replay_input):
            pass
    stored = await _run_messages(store, chat.chat_id, run.run_id)
    if refused:
        _warn_refused(run, stored, refused)
    report.messages_created += len(stored)
    report.tool_calls_created += sum(len(m.tool_calls) for m in stored)
    return report


_BATCH_REFUSED = "not ended in one batch"
_AGENT_LOG = logging.getLogger("threadkeep.agui")


@dataclass
class _Refusals:
    """The run wrapper's "not ended in one batch" warnings, and whether errors followed."""

    warnings: list[str] = field(default_factory=list)
    errors: int = 0

    def __bool__(self) -> bool:
        return bool(self.warnings)


@contextmanager
def _refused_batches() -> Iterator[_Refusals]:
    """Collect (and hold back) the run wrapper's "not ended in one batch" warnings."""
    refused = _Refusals()

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            refused.errors += 1
        elif record.levelno == logging.WARNING and _BATCH_REFUSED in record.getMessage():
            refused.warnings.append(record.getMessage().removeprefix("threadkeep: "))
            return False
        return True

    _AGENT_LOG.addFilter(hold)
    try:
        yield refused
    finally:
        _AGENT_LOG.removeFilter(hold)


def _warn_refused(run: _Run, stored: list[Message], refused: _Refusals) -> None:
    moved = [
        repr(m.metadata["agui_id"])
        for m in stored
        if m.agui_id is None and m.metadata.get("agui_id")
    ]
    outcome = (
        f"{len(stored)} of its messages are stored; see the errors above for the rest"
        if refused.errors
        else f"all {len(stored)} of its messages are stored"
    )
    if moved:
        _log.warning(
            "%s: run %r reuses the message id %s of an earlier message of the chat, so its "
            "messages were written one by one and the repeated id is kept in "
            "metadata['agui_id']; %s",
            run.source.name,
            run.run_id,
            ", ".join(moved),
            outcome,
        )
    else:
        _log.warning(
            "%s: %s; its messages were then written one by one: %s",
            run.source.name,
            "; ".join(refused.warnings),
            outcome,
        )


async def _stored_runs(store: Store, chat_id: Any, run_id: str) -> set[str]:
    from .._errors import RunNotFound

    try:
        await store.get_run(chat_id, run_id)
    except RunNotFound:
        return set()
    return {run_id}


async def _run_messages(store: Store, chat_id: Any, run_id: str) -> list[Message]:
    messages: list[Message] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(
            chat_id, limit=200, cursor=cursor, message_filter=MessageFilter(run_id=run_id)
        )
        messages += page.items
        if not page.has_more:
            return messages
        cursor = page.next_cursor
