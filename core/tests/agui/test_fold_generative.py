"""The fold against generated streams: every meant record stored once, in order, whole.

Hypothesis draws a conversation (``fold_model.py``: runs of interleaved text messages,
parallel tool calls, results, reasoning, in every event form the protocol allows and real
stacks vary) and folds it three ways, live through ``StorageAgent`` under both write
policies and through ``import_agui`` (``threadkeep import --format agui``) from run folders.
After each run the chat must hold exactly the records the model says the stream means
(``fold_model.expected``: an oracle computed from the generator's own model, not from the
fold), by ``seq``; the run's status must follow its end; delivering the last run again (a
retry) must store nothing new; the three paths must store the same thing.

Memory and SQLite under the ``ci`` profile's example count; PostgreSQL on a few examples.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from hypothesis import HealthCheck, example, given, settings

from threadkeep import Message, Store
from threadkeep._importers.agui import import_agui
from threadkeep.agui import StorageAgent


def _load(name: str, file: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


model = _load("_agui_fold_model", "fold_model.py")
shapes = _load("_agui_fold_generative_shapes", "test_stack_shapes.py")

PATHS = ("incremental", "buffered", "import")
# The store fixture serves every example (each uses its own user); the profile's own
# suppressions (``too_slow`` on a loaded machine) are kept, not replaced.
FIXTURE_OK = settings(
    suppress_health_check=[
        *settings.default.suppress_health_check,
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
    ]
)
# A conversation is cheap to fold (tens of ms on memory and SQLite): twice the
# profile's count (``ci``: 60 per store, about 15 s on two loaded cores), a tenth on
# PostgreSQL, where every example costs round trips to the shared server.
EXAMPLES = settings.default.max_examples * 2
PG_EXAMPLES = max(5, settings.default.max_examples // 3)


def request(conversation: Any, index: int) -> dict[str, Any]:
    run = conversation.runs[index]
    return {
        "threadId": model.THREAD,
        "runId": run.run_id,
        "messages": model.request_messages(conversation, index),
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


async def fold_run(
    path: str, store: Store, user: str, folder: Path, conversation: Any, index: int
) -> None:
    """Store run ``index`` of the conversation by ``path``."""
    events = model.render(conversation, index)
    body = request(conversation, index)
    if path == "import":
        run_dir = folder / f"{index:02d}-{conversation.runs[index].run_id}"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "request.json").write_text(json.dumps(body), encoding="utf-8")
        (run_dir / "response.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
        )
        await import_agui(store, run_dir, user_id=user, thread_scope="thread")
        return
    live = [shapes.live_event(e) for e in events]

    class Agent:
        async def run(self, _input: RunAgentInput) -> Any:
            for event in live:
                yield event

    agent = StorageAgent(Agent(), store, user_id=user, write_policy=path)  # type: ignore[arg-type]
    [_ async for _ in agent.run(RunAgentInput.model_validate(body))]


def summary(message: Message) -> tuple[Any, ...]:
    return (
        message.role.value,
        message.agui_id,
        message.content if message.role.value != "reasoning" else "",
        message.status.value,
        message.tool_call_ref,
        [(c.agui_id, c.name, c.arguments, c.status.value) for c in message.tool_calls],
        [(r.content, r.encrypted_value) for r in message.reasonings],
    )


async def stored(store: Store, user: str) -> list[Message]:
    chat = await store.find_chat(user, model.THREAD)
    if chat is None:
        return []
    page = await store.list_messages(chat.chat_id, limit=500)
    assert not page.has_more
    seqs = [m.seq for m in page.items]
    assert seqs == sorted(seqs)
    return list(page.items)


def run_expectation(run: Any) -> tuple[str, str | None]:
    if run.end == "finished":
        return "complete", None
    if run.end == "cut":
        return "interrupted", ...  # type: ignore[return-value]
    return "errored", None if run.end == "error:none" else "boom"


async def check_conversation(store: Store, tmp: Path, conversation: Any) -> None:
    results: dict[str, list[tuple[Any, ...]]] = {}
    for path in PATHS:
        user = f"u-{uuid.uuid4().hex[:12]}"
        folder = tmp / user
        for index, run in enumerate(conversation.runs):
            await fold_run(path, store, user, folder, conversation, index)
            messages = await stored(store, user)
            want = model.expected(conversation, index)
            got_records = [summary(m) for m in messages]
            assert got_records == want, _diff(path, index, conversation, got_records, want)
            chat = await store.find_chat(user, model.THREAD)
            assert chat is not None
            status, error = run_expectation(run)
            got = await store.get_run(chat.chat_id, run.run_id)
            assert got.status.value == status, (path, index)
            if error is not ...:
                assert got.error == error, (path, index, got.error)
            _check_snapshot_notes(run, messages)
        if conversation.replay:
            before = [summary(m) for m in await stored(store, user)]
            last = len(conversation.runs) - 1
            await fold_run(path, store, user, folder / "again", conversation, last)
            assert [summary(m) for m in await stored(store, user)] == before, path
        results[path] = [summary(m) for m in await stored(store, user)]
    assert results["incremental"] == results["buffered"] == results["import"]


def _diff(path: str, index: int, conversation: Any, got: list[Any], want: list[Any]) -> str:
    lines = [f"path {path}, after run {index}", "stored:", *map(repr, got), "expected:"]
    lines += [*map(repr, want), "requests and streams:"]
    for i in range(index + 1):
        lines.append(json.dumps(request(conversation, i)["messages"]))
        lines += [json.dumps(e) for e in model.render(conversation, i)]
    return "\n".join(lines)


def _check_snapshot_notes(run: Any, messages: list[Message]) -> None:
    """A disagreeing snapshot text is kept in the record's ``agui_snapshot`` metadata."""
    call = model._snapshot_call(run)
    if call is not None:
        (record,) = [
            m
            for m in messages
            if m.run_id == run.run_id and call.id in [c.agui_id for c in m.tool_calls]
        ]
        note = record.metadata.get("agui_snapshot", {}).get("tool_calls")
        assert note == {call.id: model.SNAPSHOT_ARGUMENTS}
    target = model._snapshot_target(run)
    if target is None:
        return
    snap = model._snapshot_text(run, target)
    if snap == target.text or snap.startswith(target.text):
        return
    (record,) = [m for m in messages if m.agui_id == target.id and m.run_id == run.run_id]
    assert record.metadata.get("agui_snapshot", {}).get("content") == snap


# -- the failures Hypothesis found, shrunk, each fixed in the fold -------------------------

M = model


def _text(id_: str, pieces: list[str], *, chunked: bool = False, ended: bool = True) -> Any:
    return M.Text(id_, M.repair_join(pieces), pieces, chunked, False, ended, [])


def _run(index: int, segments: list[Any], **fields: Any) -> Any:
    base = {
        "run_id": f"run-{index}",
        "prompt_id": "msg-1" if index == 1 else f"user-{index}",
        "prompt": "",
        "history": "none",
        "segments": segments,
        "end": "finished",
        "error_inside": False,
        "snapshot": "none",
        "snake": False,
    }
    return M.Run(**{**base, **fields})


def _group(*texts: Any) -> Any:
    """Texts streamed one after the other (no calls)."""
    order = [i for i, t in enumerate(texts) if not t.chunked for _ in range(len(t.pieces) + 1)]
    return M.Group(list(texts), order, [], [], [], False)


# 1. A TEXT_MESSAGE_CHUNK message directly followed by RUN_ERROR was closed `complete` before
#    the error (chunks have no end event): it ends `errored`, as an unended START does.
CHUNK_THEN_ERROR = M.Conversation(
    [_run(1, [_group(_text("txt-1", ["00"], chunked=True))], end="error:message")], False
)
# 2. A MESSAGES_SNAPSHOT disagreeing with the streamed text, then the next run echoing the
#    client's list (which holds the snapshot's text) under fresh ids (LlamaIndex, ADK): the
#    echo named nothing stored, the run was refused (INVALID_INPUT) and the prompt lost.
DISAGREE_THEN_FRESH_ECHO = M.Conversation(
    [
        _run(1, [_group(_text("txt-1", [""]), _text("txt-2", ["0"]))], snapshot="disagree"),
        _run(2, [], history="fresh"),
    ],
    False,
)
# 3. A surrogate pair split across two deltas, then a snapshot extending the text: the
#    strict-prefix test compared the unjoined halves with the snapshot's character, so the
#    extension was taken for a disagreement and the snapshot's longer text dropped.
SPLIT_PAIR_THEN_LONGER_SNAPSHOT = M.Conversation(
    [_run(1, [_group(_text("txt-1", ["0\ud800", "\udc00"], ended=False))], snapshot="extend")],
    False,
)

# 4. A reasoning phase whose REASONING_MESSAGE_END and REASONING_END never came, then a
#    THINKING_* phase: the second phase's reasoning was folded into the first phase's
#    message. The new phase's start ends the unended one; each is its own message.
UNENDED_PHASE_THEN_THINKING = M.Conversation(
    [
        _run(
            1,
            [
                M.Reasoning("think-1", "0", ["0"], "events", False, False, "sig=="),
                M.Reasoning("think-2", "0", ["0"], "thinking", False, True, None),
            ],
        )
    ],
    False,
)


def _call_turn(run: int, text_id: str, result_id: str, result: str, **fields: Any) -> Any:
    """A run whose one text holds ``call_0`` (numbered per turn), answered by ``result_id``."""
    call = M.Call("call_0", "get_weather", "{}", ["{}"], False, False, True, None)
    call.result = M.Result(result, result_id, "content")
    text = M.Text(text_id, "", [""], False, False, True, [call])
    return _run(run, [M.Group([text], [0, 0], [0, 0], [0], [], False)], **fields)


# 5. Calls numbered per turn: run 2 calls `call_0` again, and its snapshot lists run 1's
#    result for `call_0` too. That one matched (by toolCallId) run 2's result, which took
#    run 1's text. A snapshot tool message whose id the run began with is that message.
CALL_0_AGAIN_WITH_A_SNAPSHOT = M.Conversation(
    [
        _call_turn(1, "txt-1", "res-1", "0"),
        _call_turn(2, "txt-2", "res-2", "", history="ids", snapshot="equal"),
    ],
    False,
)


def _parentless_calls(*ids: str) -> Any:
    """A group of calls naming no parent at a run's start (no text events), unanswered."""
    calls = [M.Call(i, "get_weather", "{}", ["{}"], False, False, True, None) for i in ids]
    text = M.Text(None, "", [], False, False, True, calls)
    return M.Group([text], [], [n for n in range(len(ids)) for _ in (0, 1)], [], [], True)


# 6. Calls numbered per turn, parentless in run 1 (the client names that assistant message
#    by its first call's id, `call_0`), and run 2 calls `call_0` again under a text of its
#    own: the snapshot's earlier message `call_0` matched run 2's call by that id, and run
#    2's message took run 1's calls (stored twice). A message the run began with is that
#    earlier message whatever call ids this run streams.
PARENTLESS_CALL_0_THEN_CALL_0 = M.Conversation(
    [
        _run(1, [_parentless_calls("call_0", "call_1")]),
        _call_turn(2, "txt-2", "res-2", "", history="ids", snapshot="equal"),
    ],
    False,
)
# The same with run 2's call parentless too: the snapshot then lists two messages `call_0`
# (run 1's, the run began with it, and run 2's own); CI run 1 of session 25 drew it.
PARENTLESS_CALL_0_TWICE = M.Conversation(
    [
        _run(1, [_parentless_calls("call_0", "call_1")]),
        _run(2, [_parentless_calls("call_0")], history="ids", snapshot="equal"),
    ],
    False,
)


@settings(FIXTURE_OK, max_examples=EXAMPLES)
@example(conversation=CHUNK_THEN_ERROR)
@example(conversation=PARENTLESS_CALL_0_THEN_CALL_0)
@example(conversation=PARENTLESS_CALL_0_TWICE)
@example(conversation=DISAGREE_THEN_FRESH_ECHO)
@example(conversation=SPLIT_PAIR_THEN_LONGER_SNAPSHOT)
@example(conversation=UNENDED_PHASE_THEN_THINKING)
@example(conversation=CALL_0_AGAIN_WITH_A_SNAPSHOT)
@given(conversation=model.conversations())
async def test_generated_streams_store_what_they_mean(store, tmp_path, conversation):
    await check_conversation(store, tmp_path / uuid.uuid4().hex[:8], conversation)


@pytest.mark.parametrize("any_store", ["postgresql"], indirect=True)
@settings(FIXTURE_OK, max_examples=PG_EXAMPLES)
@given(conversation=model.conversations())
async def test_generated_streams_on_postgresql(any_store, tmp_path, conversation):
    await check_conversation(any_store, tmp_path / uuid.uuid4().hex[:8], conversation)
