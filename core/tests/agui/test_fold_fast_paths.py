"""The fold's quick paths give exactly what the general ones give.

- a buffered run folds a message's deltas in one loop (``fold_more_deltas``): the records
  equal those of the same events dispatched one by one;
- a record's snapshot is a copy when nothing needs repair (``Record._quick_snapshot``):
  equal to the dump, repair and validation it replaces;
- ``end_run`` tells a clean run or step from one its driver would refuse in pydantic-core
  (``_check_body``): the same outcome, error text included, as ``record_body``.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from threadkeep import Message, Reasoning, Role, Run, Step, ToolCall, open_store
from threadkeep._records import Records
from threadkeep._store_run_batch import _check_body, _coerced
from threadkeep.agui import StorageAgent, _state
from threadkeep.agui._state import Record
from threadkeep.agui._text import TextBuffer

_STORED_FIELDS = ("message_id", "chat_id", "seq", "revision", "created_at", "updated_at")


class DispatchEveryEvent(StorageAgent):
    """The fold without its per-delta quick path: every event goes through ``dispatch``."""

    def fold_delta_now(self, state: Any, event: BaseEvent) -> bool:
        return False


def _mixed_stream(kit: Any) -> list[BaseEvent]:
    deltas = ["plain ", "", "é ünïcode ", "\ud83d", "\ude00 pair split", "x" * 50]
    return [
        TextMessageStartEvent(message_id="a", role="assistant"),
        *[TextMessageContentEvent(message_id="a", delta=d) for d in deltas],
        TextMessageStartEvent(message_id="b", role="assistant"),
        TextMessageContentEvent(message_id="b", delta="other "),
        TextMessageContentEvent(message_id="a", delta="back to a "),
        StepStartedEvent(step_name="node"),
        *[TextMessageContentEvent(message_id="b", delta=f"{i} ") for i in range(40)],
        StepFinishedEvent(step_name="node"),
        TextMessageEndEvent(message_id="b"),
        *[TextMessageContentEvent(message_id="a", delta="y" * 30) for _ in range(5)],
        TextMessageEndEvent(message_id="a"),
    ]


async def _fold(kit: Any, agent_class: type[StorageAgent], limit: int) -> list[dict[str, Any]]:
    async with open_store("memory://", max_message_bytes=limit) as store:

        async def script(input: Any) -> Any:
            yield kit.started(input)
            for event in _mixed_stream(kit):
                yield event
            yield kit.finished(input)

        wrapper = agent_class(
            kit.Agent(script), store, user_id="u", write_policy="buffered", owner="w"
        )
        async for _ in wrapper.run(kit.run_input()):
            pass
        assert wrapper.persistence is not None
        await wrapper.persistence
        stored = await kit.history(store, "u", "thread-1")
        return [m.model_dump(exclude=set(_STORED_FIELDS)) for m in stored]


@pytest.mark.parametrize("limit", [16 * 2**20, 60])
async def test_deltas_folded_in_one_loop_store_what_dispatch_stores(kit: Any, limit: int) -> None:
    # 60 bytes: both messages pass the limit inside a run of deltas (stored truncated).
    quick = await _fold(kit, StorageAgent, limit)
    general = await _fold(kit, DispatchEveryEvent, limit)
    assert quick == general
    contents = {m["agui_id"]: m["content"] for m in quick}
    if limit > 1000:
        assert contents["a"].startswith("plain é ünïcode \U0001f600 pair split")
        assert contents["b"] == "other " + "".join(f"{i} " for i in range(40))
    else:
        assert "truncated" in next(m for m in quick if m["agui_id"] == "a")["metadata"]


def _record(metadata: dict[str, Any]) -> Record:
    call, reasoning = ToolCall(agui_id="c1", name="f"), Reasoning(agui_id="r1")
    message = Message(
        role=Role.ASSISTANT,
        agui_id="m1",
        metadata=metadata,
        tool_calls=[call, ToolCall(agui_id="c2", name="g", arguments="{}")],
        reasonings=[reasoning],
    )
    record = Record(message=message, key="m1")
    record.content.append("streamed text")
    record.tool_args[call.tool_call_id] = TextBuffer('{"a": 1}')
    record.reasoning_text[reasoning.reasoning_id] = TextBuffer("thinking")
    return record


@pytest.mark.parametrize(
    "metadata", [{}, {"k": "v", "n": [1, {"x": None}]}, {"k": "lone \udc00"}, {"\ud800": 1}]
)
@pytest.mark.parametrize("truncated", [False, True])
def test_quick_snapshot_equals_the_repairing_one(
    metadata: dict[str, Any], truncated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _record(metadata)
    if truncated:
        record.truncated_at, record.dropped_bytes = 13, 7
    quick = record.snapshot()
    monkeypatch.setattr(_state, "storable", lambda model: False)  # the general path
    general = record.snapshot()
    assert quick.model_dump() == general.model_dump()
    assert quick.tool_calls[0] is not record.message.tool_calls[0]  # its own nested records
    assert quick.metadata is not record.message.metadata


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


_VALUES = [
    None,
    1.5,
    "text",
    "NaN",
    "\ufffd",
    math.nan,
    -math.inf,
    "lone \ud800",
    {"k\udc00": 1},
    {math.nan: 1},
    {math.inf: 1},
    {1: "int key"},
    (1, 2),
    {"deep": {"x": [1, {"y": math.inf}]}},
    {"obj": object()},
    _deep(10),
    *(_deep(n) for n in range(60, 67)),
]


@pytest.mark.parametrize("value", _VALUES, ids=lambda v: repr(v)[:24])
@pytest.mark.parametrize("kind", ["run", "step"])
def test_quick_body_check_refuses_what_record_body_refuses(kind: str, value: Any) -> None:
    chat_id = uuid.uuid4()
    record = (
        Run(chat_id=chat_id, run_id="r", metadata={"v": value})
        if kind == "run"
        else Step(chat_id=chat_id, stack_id="s", type="t", input=value, output=value)
    )

    def outcome(check: Any) -> tuple[str, str] | None:
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - the outcomes are compared, errors included
            return type(exc).__name__, str(exc)
        return None

    expected = outcome(lambda: Records.record_body(record))
    assert outcome(lambda: _check_body(Records(), record)) == expected


_METADATA = [
    {},
    {"k": "v", "n": [1, 2.5, {"x": None, "t": True}]},
    {"when": datetime(2026, 1, 2, tzinfo=UTC)},
    {"pair": (1, 2)},
    {"nested": {1: "int key"}},
    {"obj": uuid.uuid4()},
]


class Tagged(Message):
    """A subclass: its validators may differ, so it is always dumped and validated."""

    tag: str = "t"


def _messages(metadata: dict[str, Any]) -> list[Any]:
    return [
        Message(role=Role.USER, content="hi", agui_id="u1", metadata=metadata, run_id="r"),
        Message(role=Role.ASSISTANT, content="calls", tool_calls=[ToolCall(name="f")]),
        Message(role=Role.USER, content="extra", extra_field={"a": [1]}),
        Tagged(role=Role.USER, content="subclass", metadata=metadata),
        {"role": "user", "content": "a mapping"},
    ]


@pytest.mark.parametrize("metadata", _METADATA, ids=lambda v: repr(v)[:24])
async def test_begin_run_copy_of_a_plain_message_equals_its_validation(
    metadata: dict[str, Any],
) -> None:
    async with open_store("memory://") as store:
        chat_id = uuid.uuid4()
        for message in _messages(metadata):
            general = store._ctx.messages._coerce_message(message, chat_id)
            quick = _coerced(message, chat_id)
            if quick is None:
                continue
            assert type(message) is Message
            assert not message.tool_calls
            assert quick.model_dump() == general.model_dump()
            assert quick.model_fields_set == general.model_fields_set
            assert quick.metadata is not message.metadata  # shares nothing with the caller
    plain = _coerced(_messages(_METADATA[1])[0], uuid.uuid4())
    assert plain is not None
    assert plain.metadata["n"] is not _METADATA[1]["n"]
    assert _coerced(_messages(_METADATA[2])[0], uuid.uuid4()) is None  # a datetime value


@pytest.mark.parametrize("metadata", _METADATA, ids=lambda v: repr(v)[:24])
async def test_stored_run_copy_equals_the_parsed_body(metadata: dict[str, Any]) -> None:
    pytest.importorskip("threadkeep_sql")
    from threadkeep_sql._commit import _stored_run

    now = datetime.now(UTC)
    run = Run(chat_id=uuid.uuid4(), run_id="r", owner="w", created_at=now, updated_at=now)
    run.metadata = metadata
    body = Records.record_body(run)
    parsed = Records.record_from_body(Run, body, revision=3)
    copied = _stored_run(run, 3)
    if copied is None:  # only where the round trip gives back another value
        assert parsed.metadata != metadata
        return
    assert copied == parsed
    assert copied.model_fields_set == parsed.model_fields_set
    assert copied.metadata is not run.metadata
    assert all(copied.metadata[k] is not v for k, v in metadata.items() if type(v) is list)
