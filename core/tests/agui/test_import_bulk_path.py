"""``import --format agui``'s bulk path stores exactly what ``StorageAgent`` stores (every driver).

The same recordings are imported twice into one store: once as the importer does it (the
runs of new chats folded in memory, written in ``Store.load_chats`` batches), once with
that path turned off, so every run is replayed through ``StorageAgent`` against the store
one by one. The two histories (chats, messages, runs, steps) must be equal up to the ids
and timestamps each write assigns, and a re-import of either writes nothing. Chats of
several runs (a recording with two ``RUN_STARTED``, ``--thread-scope thread``) are
compared too: each run reads what the runs before it wrote.

``seq`` is compared as the order it gives (messages among messages, steps among steps):
the memservice driver numbers a chat's messages and steps in one sequence, so a batch
that writes a chat's messages before its steps numbers them differently from writes run
by run, in the same order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

import threadkeep._importers._agui_load as agui_load
from threadkeep import ChatFilter, Store
from threadkeep._importers._agui_bulk import Unsupported
from threadkeep._importers.agui import import_agui
from threadkeep.testing import count_store_writes

PROMPT = "What is 1+1?"


def text(message_id: str, *deltas: str, end: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    ]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": d} for d in deltas
    ]
    return events + ([{"type": "TEXT_MESSAGE_END", "messageId": message_id}] if end else [])


def call(call_id: str, name: str, args: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def run(thread: str, run_id: str, *body: dict[str, Any], end: str = "finished") -> list[Any]:
    start = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
    last = {"type": "RUN_FINISHED", "threadId": thread, "runId": run_id}
    return [start, *body, last] if end == "finished" else [start, *body]


STREAMS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    # a tool result with no messageId and its value under "result" (dialect 1)
    "tool-result": (
        [{"id": "msg-1", "role": "user", "content": PROMPT}],
        run(
            "t",
            "r",
            {"type": "STEP_STARTED", "stepName": "agent"},
            *call("c1", "calc", '{"a":1}'),
            {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "result": 2},
            *text("a1", "It is ", "2."),
            {"type": "STEP_FINISHED", "stepName": "agent"},
        ),
    ),
    # RUN_ERROR with its text under "error", in the middle of a message (dialects 2 and 6)
    "errored": (
        [{"id": "msg-1", "role": "user", "content": PROMPT}],
        run(
            "t",
            "r",
            *text("a1", "Work", end=False),
            {"type": "RUN_ERROR", "error": {"message": "model overloaded", "code": "529"}},
            end="none",
        ),
    ),
    # a snapshot after the stream (dialect 3), reasoning, usage, RAW and CUSTOM (dialect 5)
    "snapshot": (
        [{"id": "msg-1", "role": "user", "content": PROMPT}],
        run(
            "t",
            "r",
            {"type": "REASONING_START", "messageId": "th1"},
            {"type": "REASONING_MESSAGE_START", "messageId": "th1", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "th1", "delta": "think"},
            {"type": "REASONING_MESSAGE_END", "messageId": "th1"},
            {"type": "REASONING_END", "messageId": "th1"},
            *text("a1", "Hel"),
            {"type": "USAGE_METADATA", "input_tokens": 10, "output_tokens": 3},
            {"type": "RAW", "event": {"kind": "on_chat_model_end"}},
            {"type": "CUSTOM", "name": "progress", "value": {"pct": 100}},
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {"id": "msg-1", "role": "user", "content": PROMPT},
                    {"id": "a1", "role": "assistant", "content": "Hello"},
                    {"id": "a2", "role": "assistant", "content": "extra"},
                ],
            },
        ),
    ),
    # a prompt id reused with other content inside one request (dialect 4), a cut stream
    "reused-id": (
        [
            {"id": "msg-1", "role": "user", "content": "first"},
            {"id": "a0", "role": "assistant", "content": "ok"},
            {"id": "msg-1", "role": "user", "content": "second"},
        ],
        run("t", "r", *text("a1", "fine"), end="cut"),
    ),
    # the tool result reuses the id of the request's tool call message: the ordinary path
    "collision": (
        [
            {"id": "msg-1", "role": "user", "content": PROMPT},
            {
                "id": "asst-0",
                "role": "assistant",
                "toolCalls": [
                    {"id": "k1", "type": "function", "function": {"name": "ask", "arguments": "{}"}}
                ],
            },
            {"id": "k1", "role": "tool", "content": "yes", "toolCallId": "k1"},
        ],
        run(
            "t",
            "r",
            *call("k1", "ask", "{}"),
            {"type": "TOOL_CALL_RESULT", "messageId": "k1", "toolCallId": "k1", "content": "no"},
        ),
    ),
    # two runs in one recording (one chat): the ordinary path
    "two-runs": (
        [{"id": "msg-1", "role": "user", "content": PROMPT}],
        [*run("t", "r1", *text("a1", "one")), *run("t", "r2", *text("a2", "two"))],
    ),
}


def write_recordings(root: Path, names: list[str] | None = None) -> None:
    for name, (messages, events) in STREAMS.items():
        if names is not None and name not in names:
            continue
        folder = root / name
        folder.mkdir(parents=True)
        request = {"threadId": "t", "runId": events[0]["runId"], "messages": messages}
        (folder / "request.json").write_text(json.dumps(request))
        (folder / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        (folder / "metadata.json").write_text(json.dumps({"success": True}))


class _Ids:
    """Replaces ids and timestamps a write assigns by their order of first appearance."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items() if not _assigned(k)}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, UUID) or (isinstance(value, str) and _hexlike(value)):
            return self.seen.setdefault(str(value), f"id{len(self.seen)}")
        return value


def _assigned(key: str) -> bool:
    return key in {"created_at", "updated_at", "last_message_at", "lease_expires_at"}


def _hexlike(text: str) -> bool:
    head = text.split(":", 1)[0].split(".", 1)[0]
    return len(head) == 32 and all(c in "0123456789abcdef" for c in head)


async def history(store: Store, user: str) -> dict[str, Any]:
    """Every record of the user's chats, by thread id, with assigned ids and times replaced."""
    found: dict[str, Any] = {}
    page = await store.list_chats(ChatFilter(user_id=user), limit=200)
    for chat in sorted(page.items, key=lambda c: c.thread_id):
        ids = _Ids()
        messages = (await store.list_messages(chat.chat_id, limit=200)).items
        run_ids = sorted({m.run_id for m in messages if m.run_id} | {"r", "r1", "r2", "r#3"})
        runs, steps = [], []
        for run_id in run_ids:
            try:
                stored = await store.get_run(chat.chat_id, run_id)
            except Exception:  # noqa: BLE001 - a run id this chat does not have
                continue
            runs.append(stored.model_dump(exclude={"chat_id"}))
            steps += [
                s.model_dump(exclude={"chat_id"})
                for s in await store.get_steps(chat.chat_id, run_id)
            ]
        found[chat.thread_id.replace(user, "")] = ids(
            {
                "chat": chat.model_dump(include={"name", "metadata", "status", "agent_id"}),
                "messages": ranked(
                    [m.model_dump(exclude={"chat_id", "revision"}) for m in messages]
                ),
                "runs": runs,
                "steps": ranked(steps),
            }
        )
    return found


def ranked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records in ``seq`` order, each ``seq`` replaced by its rank (module docstring)."""
    ordered = sorted(records, key=lambda r: (r.get("seq") is None, r.get("seq") or 0))
    return [{**r, "seq": rank} if r.get("seq") is not None else r for rank, r in enumerate(ordered)]


async def test_the_bulk_path_stores_what_the_storage_agent_stores(
    every_store, tmp_path, monkeypatch
):
    root = tmp_path / "recordings"
    write_recordings(root)
    with count_store_writes(every_store) as bulk_writes:
        bulk = await import_agui(every_store, root, user_id="bulk", keep_events=True)
    assert bulk_writes.get("load_chats") == 1  # five new chats, one batch

    async def ordinary(*_: Any, **__: Any) -> None:
        raise Unsupported("the ordinary path, for comparison")

    monkeypatch.setattr(agui_load.RunBatch, "add", ordinary)
    with count_store_writes(every_store) as agent_writes:
        agent = await import_agui(every_store, root, user_id="agent", keep_events=True)
    assert "load_chats" not in agent_writes
    assert bulk.as_dict() == agent.as_dict()
    assert bulk.chats_created == 6
    assert bulk.messages_created == 4 + 2 + 4 + 4 + 5 + 3  # per recording, in name order

    stored, expected = await history(every_store, "bulk"), await history(every_store, "agent")
    assert list(stored) == [f"agui:{name}:t" for name in sorted(STREAMS)]
    assert stored == expected
    tool = stored["agui:tool-result:t"]
    assert [(m["role"], m["agui_id"], m["content"]) for m in tool["messages"]] == [
        ("user", "msg-1", PROMPT),
        ("assistant", tool["messages"][1]["agui_id"], ""),
        ("tool", tool["messages"][2]["agui_id"], "2"),
        ("assistant", "a1", "It is 2."),
    ]
    assert [r["status"] for r in stored["agui:errored:t"]["runs"]] == ["errored"]
    assert stored["agui:errored:t"]["runs"][0]["error"] == "model overloaded"
    assert [r["revision"] for r in tool["runs"]] == [1]
    assert [s["type"] for s in tool["steps"]] == ["input", "agui_step"]

    monkeypatch.undo()
    for user in ("bulk", "agent"):
        with count_store_writes(every_store) as again:
            report = await import_agui(every_store, root, user_id=user, keep_events=True)
        assert dict(again) == {}
        assert report.messages_present == bulk.messages_created
        assert report.chats_present == 6


@pytest.mark.parametrize("scope", ["thread"])
async def test_runs_sharing_a_chat_take_the_ordinary_path_and_prove_it(store, tmp_path, scope):
    root = tmp_path / "recordings"
    write_recordings(root)
    first = await import_agui(store, root, user_id="u", thread_scope=scope)
    assert first.chats_created == 1  # every recording uses thread "t"
    # Four requests repeat the prompt the first recording stored: present, not new.
    assert first.messages_present == 4
    with count_store_writes(store) as again:
        second = await import_agui(store, root, user_id="u", thread_scope=scope)
    assert dict(again) == {}
    assert second.messages_present == first.messages


async def test_a_changed_recording_is_imported_again_not_reported_present(store, tmp_path):
    root = tmp_path / "recordings"
    write_recordings(root)
    first = await import_agui(store, root, user_id="u")
    response = root / "tool-result" / "response.jsonl"
    events = [json.loads(line) for line in response.read_text().splitlines()]
    events[-1:-1] = text("a-late", "one more")  # before RUN_FINISHED
    response.write_text("".join(json.dumps(e) + "\n" for e in events))
    with count_store_writes(store) as writes:
        again = await import_agui(store, root, user_id="u")
    assert writes.total() > 0
    assert again.chats_present == 6  # the chat of the changed recording is found, not made
    # Its run is another recording's now ("r#2"): its records are new, the prompt is stored.
    assert again.messages_created == 4
    # The other chats' messages, and the prompt its request repeats (run "r" stored it).
    assert again.messages_present == first.messages_created - 4 + 1
    chat = await store.find_chat("u", "agui:tool-result:t")
    assert chat is not None
    late = await store.get_message_by_agui_id(chat.chat_id, "a-late")
    assert late is not None
    assert late.run_id == "r#2"


HISTORY: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    # the chat's first run: a prompt, a tool call and its result, an answer
    "a-first": (
        [{"id": "msg-1", "role": "user", "content": PROMPT}],
        run(
            "t",
            "r",
            *call("c1", "calc", '{"a":1}'),
            {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "content": "2"},
            *text("a1", "It is 2."),
        ),
    ),
    # the same run id again, its request repeating the history the first run stored
    "b-again": (
        [
            {"id": "msg-1", "role": "user", "content": PROMPT},
            {"id": "a1", "role": "assistant", "content": "It is 2."},
            {"id": "msg-2", "role": "user", "content": "And 2+2?"},
        ],
        run("t", "r", *text("b1", "4.")),
    ),
    # two runs in one recording; the second has no request
    "c-two-runs": (
        [{"id": "msg-3", "role": "user", "content": "Go on"}],
        [*run("t", "r1", *text("c1-text", "one")), *run("t", "r2", *text("c2", "two"))],
    ),
    # a prompt id reused with other content, an errored run
    "d-reused": (
        [{"id": "msg-1", "role": "user", "content": "something else"}],
        run(
            "t",
            "r",
            *text("d1", "Wor", end=False),
            {"type": "RUN_ERROR", "message": "overloaded"},
            end="none",
        ),
    ),
    # a snapshot naming messages earlier runs stored, and one of its own
    "e-snapshot": (
        [{"id": "msg-4", "role": "user", "content": "Summary?"}],
        run(
            "t",
            "r5",
            *text("e1", "Sum"),
            {
                "type": "MESSAGES_SNAPSHOT",
                "messages": [
                    {"id": "msg-1", "role": "user", "content": PROMPT},
                    {"id": "a1", "role": "assistant", "content": "It is 2."},
                    {"id": "msg-4", "role": "user", "content": "Summary?"},
                    {"id": "e1", "role": "assistant", "content": "Summary"},
                ],
            },
        ),
    ),
}


async def test_chats_of_several_runs_take_the_bulk_path_and_store_the_same(
    every_store, tmp_path, monkeypatch
):
    root = tmp_path / "recordings"
    monkeypatch.setattr(sys.modules[__name__], "STREAMS", HISTORY)
    write_recordings(root)
    with count_store_writes(every_store) as bulk_writes:
        bulk = await import_agui(
            every_store, root, user_id="bulk", thread_scope="thread", keep_events=True
        )
    assert bulk_writes.get("load_chats") == 1  # six runs of one chat, one batch
    assert "commit_run" not in bulk_writes  # no run was replayed against the store

    async def ordinary(*_: Any, **__: Any) -> None:
        raise Unsupported("the ordinary path, for comparison")

    monkeypatch.setattr(agui_load.RunBatch, "add", ordinary)
    agent = await import_agui(
        every_store, root, user_id="agent", thread_scope="thread", keep_events=True
    )
    assert bulk.as_dict() == agent.as_dict()
    assert (bulk.chats_created, bulk.messages_present) == (1, 2)  # b-again's msg-1 and a1
    stored, expected = await history(every_store, "bulk"), await history(every_store, "agent")
    assert list(stored) == ["t"]
    assert stored == expected
    chat = stored["t"]
    assert sorted(r["run_id"] for r in chat["runs"]) == ["r", "r#2", "r#3", "r1", "r2", "r5"]
    prompts = [m["agui_id"] for m in chat["messages"] if m["role"] == "user"]
    assert prompts == ["msg-1", "msg-2", "msg-3", "msg-1#2", "msg-4"]
    errored = [r for r in chat["runs"] if r["status"] == "errored"]
    assert [r["error"] for r in errored] == ["overloaded"]

    monkeypatch.undo()
    monkeypatch.setattr(sys.modules[__name__], "STREAMS", HISTORY)
    for user in ("bulk", "agent"):
        with count_store_writes(every_store) as again:
            report = await import_agui(
                every_store, root, user_id=user, thread_scope="thread", keep_events=True
            )
        assert dict(again) == {}
        assert report.messages_present == bulk.messages
