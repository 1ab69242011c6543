"""The SQL driver against the reference driver: one scripted scenario, identical transcripts.

Both stores get the same clock and the same client-chosen ids, so everything a read returns
must be equal field for field (chat ids, which the store generates, are replaced by labels).
The scenario touches every primitive: chat filters and pages, messages and their filters,
nested tool calls and reasonings, boundaries, steps, runs, the archive primitives, run
discarding, purge and erasure.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from threadkeep import (
    ChatFilter,
    ChatStatus,
    Message,
    MessageFilter,
    MessageKind,
    Reasoning,
    Role,
    RunStatus,
    Share,
    Step,
    StepStatus,
    Store,
    ToolCall,
    Viewer,
    open_store,
)
from threadkeep.testing import ManualClock

NAMES = ["Hello World", "straße", "a\x00b", "back\\slash", "\u4e2d\u6587 chat", "HELLO again"]


def _looks_like_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def uid(label: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, label)


class Transcript:
    """Collects what a store returns, with generated chat ids replaced by labels."""

    def __init__(self) -> None:
        self.lines: list[Any] = []
        self.labels: dict[str, str] = {}

    def label(self, chat_id: uuid.UUID, name: str) -> None:
        self.labels[str(chat_id)] = name

    def add(self, what: str, value: Any) -> None:
        self.lines.append((what, self._clean(value)))

    def _clean(self, value: Any) -> Any:
        if hasattr(value, "model_dump"):
            return self._clean(value.model_dump(mode="json"))
        if isinstance(value, uuid.UUID):
            value = str(value)
        if isinstance(value, dict):
            return {self._clean(k): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value]
        if isinstance(value, str) and _looks_like_uuid(value):
            # Ids the store generated (chats, boundaries): label them by first appearance.
            return self.labels.setdefault(value, f"id#{len(self.labels)}")
        return value


async def walk_chats(store: Store, t: Transcript, name: str, chat_filter: ChatFilter) -> None:
    cursor, pages = None, []
    while True:
        page = await store.list_chats(chat_filter, limit=2, cursor=cursor)
        pages.append([c.thread_id for c in page.items])
        if not page.has_more:
            break
        cursor = page.next_cursor
    t.add(f"chats {name}", pages)


async def walk_messages(
    store: Store, t: Transcript, name: str, chat_id: uuid.UUID, message_filter: MessageFilter
) -> None:
    cursor, items = None, []
    while True:
        page = await store.list_messages(
            chat_id, limit=3, cursor=cursor, message_filter=message_filter
        )
        items.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
    t.add(f"messages {name}", items)


async def chats_part(store: Store, t: Transcript, clock: ManualClock) -> dict[str, uuid.UUID]:
    ids: dict[str, uuid.UUID] = {}
    for i, name in enumerate(NAMES):
        chat = await store.create_chat(
            f"user-{i % 2}",
            f"thread-{i}",
            name=name,
            tenant_id="acme" if i < 4 else "other",
            team_id="red" if i % 3 == 0 else "blue",
            share=Share.TEAM if i % 2 == 0 else Share.PRIVATE,
            agent_id=f"agent-{i % 3}",
            channel="web" if i % 2 else "api\x00",
            metadata={"i": i, "nul": "\x00"},
        )
        t.label(chat.chat_id, f"chat:{i}")
        ids[f"thread-{i}"] = chat.chat_id
        t.add("created", chat)
        clock.advance(seconds=1)
    await store.delete_chat(ids["thread-5"])
    clock.advance(seconds=1)
    filters = {
        "all": ChatFilter(),
        "user-0": ChatFilter(user_id="user-0"),
        "tenant": ChatFilter(tenant_id="acme", team_id="red"),
        "agent+channel": ChatFilter(agent_id="agent-0", channel="api\x00"),
        "kw hello": ChatFilter(keyword="hello"),
        "kw ss": ChatFilter(keyword="SS"),
        "kw nul": ChatFilter(keyword="\x00"),
        "kw backslash": ChatFilter(keyword="\\"),
        "kw 0": ChatFilter(keyword="0"),
        "kw cjk": ChatFilter(keyword="\u6587"),
        "viewer": ChatFilter(visible_to=Viewer(user_id="user-1", team_id="red", tenant_id="acme")),
        "deleted only": ChatFilter(deleted="only"),
        "deleted include": ChatFilter(deleted="include", status=ChatStatus.ACTIVE),
        "idle": ChatFilter(idle_before=clock.now - timedelta(seconds=3)),
        "deleted before": ChatFilter(deleted="only", deleted_before=clock.now),
    }
    for name, chat_filter in filters.items():
        await walk_chats(store, t, name, chat_filter)
    return ids


async def messages_part(store: Store, t: Transcript, chat_id: uuid.UUID) -> None:
    calls = [ToolCall(tool_call_id=uid(f"call{i}"), agui_id=f"tc{i}", name="f") for i in range(2)]
    batch = [
        Message(
            message_id=uid(f"m{i}"),
            agui_id=f"a{i}",
            role=[Role.USER, Role.ASSISTANT, Role.TOOL][i % 3],
            content=f"message {i} \x00",
            run_id="run-1" if i < 4 else "run-2",
            block_id=f"b{i % 2}",
            tool_calls=calls if i == 1 else [],
            reasonings=[Reasoning(reasoning_id=uid("r1"), agui_id="rs1")] if i == 2 else [],
        )
        for i in range(7)
    ]
    t.add("append batch", await store.append_messages(chat_id, batch))
    t.add("retry", await store.append_messages(chat_id, batch[:2]))
    t.add("by agui", await store.get_message_by_agui_id(chat_id, "a3"))
    t.add("tool call", await store.get_tool_call(uid("call1")))
    t.add("tool call by agui", await store.get_tool_call_by_agui_id(chat_id, "tc0"))
    t.add("reasoning by agui", await store.get_reasoning_by_agui_id(chat_id, "rs1"))
    t.add("update call", await store.update_tool_call(uid("call0"), content="result\x00"))
    extra = ToolCall(tool_call_id=uid("call9"), agui_id="tc9", name="g", arguments='{"a":1}')
    t.add("append call", await store.append_tool_call(uid("m4"), extra))
    t.add("find appended call", await store.get_tool_call_by_agui_id(chat_id, "tc9"))
    t.add("update message", await store.update_message(uid("m5"), content="edited"))
    t.add("hidden", await store.delete_messages(chat_id, [uid("m6"), uid("m6"), uid("nope")]))
    t.add("boundary", await store.start_over(chat_id))
    t.add("boundary again", await store.start_over(chat_id))
    t.add(
        "after boundary", await store.append_message(chat_id, Message(role=Role.USER, content="x"))
    )
    t.add("context", await store.context_messages(chat_id))
    for name, message_filter in {
        "all": MessageFilter(),
        "roles": MessageFilter(roles=frozenset({Role.USER, Role.TOOL})),
        "run": MessageFilter(run_id="run-1", block_id="b1"),
        "boundaries": MessageFilter(kinds=frozenset({MessageKind.BOUNDARY})),
    }.items():
        await walk_messages(store, t, name, chat_id, message_filter)
    t.add("last", await store.get_last_messages([chat_id, uid("unknown")]))


async def steps_and_runs_part(
    store: Store, t: Transcript, chat_id: uuid.UUID, clock: ManualClock
) -> None:
    steps = [
        Step(
            step_id=uid(f"s{i}"),
            chat_id=chat_id,
            run_id="run-1",
            stack_id=f"st{min(i, 2)}",
            stack_parent_id=None if i == 0 else f"st{min(i, 2) - 1}",
            type="llm",
            status=StepStatus.COMPLETED if i < 2 else StepStatus.RUNNING,
        )
        for i in range(4)
    ]
    t.add("save steps", await store.save_steps(steps))
    t.add(
        "update step", await store.update_step(uid("s3"), status=StepStatus.FAILED, output={"e": 1})
    )
    t.add("run steps", await store.get_steps(chat_id, "run-1"))
    t.add("incomplete", await store.get_last_incomplete_step(chat_id))
    t.add("stack path", await store.get_stack_path("st2"))
    t.add("start", await store.start_run(chat_id, "run-1", owner="w1", lease_seconds=10))
    clock.advance(seconds=30)
    t.add("swept", await store.sweep_expired_runs())
    t.add("claim", await store.claim_run(chat_id, "run-1", owner="w2"))
    t.add("finish", await store.finish_run(chat_id, "run-1", owner="w2", status=RunStatus.COMPLETE))
    t.add("scan steps", await store.primitives.scan_steps(chat_id, 1, 10))


async def run_batch_part(store: Store, t: Transcript, chat_id: uuid.UUID) -> None:
    started = await store.begin_run(
        chat_id,
        "run-3",
        owner="w",
        messages=[Message(message_id=uid("in"), role=Role.USER, content="go", agui_id="in")],
    )
    t.add("begin run", started)
    t.add("begin again", await store.begin_run(chat_id, "run-3", owner="w"))
    step = Step(step_id=uid("s9"), chat_id=chat_id, run_id="run-3", stack_id="x", type="tool")
    reply = Message(message_id=uid("out"), role=Role.ASSISTANT, content="done", agui_id="out")
    ended = await store.end_run(
        chat_id, "run-3", owner="w", status=RunStatus.COMPLETE, messages=[reply], steps=[step]
    )
    t.add("end run", ended)
    t.add("run-3 steps", await store.get_steps(chat_id, "run-3"))


async def archive_part(store: Store, t: Transcript, chat_id: uuid.UUID) -> None:
    messages = await store.primitives.scan_messages(chat_id, 0, 1000)
    steps = await store.primitives.scan_steps(chat_id, 0, 1000)
    t.add("scan", messages)
    t.add("delete hot", await store.primitives.delete_hot_messages(chat_id))
    t.add("delete steps", await store.primitives.delete_hot_steps(chat_id))
    t.add("restore", await store.primitives.restore_messages(chat_id, messages))
    t.add("restore again", await store.primitives.restore_messages(chat_id, messages))
    t.add("restore steps", await store.primitives.restore_steps(chat_id, steps))
    t.add("rescan", await store.primitives.scan_messages(chat_id, 0, 1000))
    t.add("next append", await store.append_message(chat_id, Message(role=Role.USER, content="y")))
    t.add("found after restore", await store.get_tool_call_by_agui_id(chat_id, "tc9"))
    t.add("discard run-2", await store.discard_run(chat_id, "run-2"))
    await walk_messages(store, t, "after discard", chat_id, MessageFilter())
    t.add(
        "index ids", await store.primitives.index_archived_ids(chat_id, [uid("m1"), uid("call0")])
    )
    t.add("index again", await store.primitives.index_archived_ids(chat_id, [uid("m1"), uid("m2")]))
    t.add(
        "archived chat of", [await store.primitives.archived_chat_of(uid(x)) for x in ("m2", "zz")]
    )
    chat = await store.get_chat(chat_id)
    t.add("not archived", await store.primitives.delete_archived_rows(chat_id, chat.revision))
    flipped = chat.model_copy(update={"status": ChatStatus.ARCHIVED, "archive_ref": "ref"})
    archived = await store.primitives.update_chat(flipped, chat.revision)
    assert archived is not None
    t.add("archived", archived)
    t.add("stale revision", await store.primitives.delete_archived_rows(chat_id, chat.revision))
    t.add(
        "delete archived", await store.primitives.delete_archived_rows(chat_id, archived.revision)
    )
    t.add("after delete", await store.primitives.scan_messages(chat_id, 0, 100))


async def scenario(store: Store, clock: ManualClock) -> list[Any]:
    t = Transcript()
    ids = await chats_part(store, t, clock)
    await messages_part(store, t, ids["thread-0"])
    await steps_and_runs_part(store, t, ids["thread-0"], clock)
    await run_batch_part(store, t, ids["thread-0"])
    await archive_part(store, t, ids["thread-0"])
    t.add("restore deleted", await store.restore_chat(ids["thread-5"]))
    await store.delete_chat(ids["thread-5"])
    clock.advance(seconds=5)
    t.add("purged", await store.purge(clock.now))
    t.add("erase", await store.erase_user("user-1"))
    await walk_chats(store, t, "after erase", ChatFilter(deleted="include"))
    return t.lines


async def test_sql_transcript_equals_the_reference_driver(engine_url) -> None:
    url, options = engine_url
    reference_clock, sql_clock = ManualClock(), ManualClock()
    async with open_store("memory://", clock=reference_clock) as reference:
        expected = await scenario(reference, reference_clock)
    async with open_store(url, clock=sql_clock, **options) as store:
        got = await scenario(store, sql_clock)
    for (what, want), (what_got, value) in zip(expected, got, strict=True):
        assert what_got == what
        assert value == want, what
