"""Reading what the emulator stores without the driver's read path (the contract back door).

Decoding is written here again on purpose (placeholder codec, chunks): a bug in the
driver's own decoder must not hide a bug in what it wrote.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from uuid import UUID

from threadkeep_contract_tests import DAMAGED_BODIES, RawChat, RawMessage
from threadkeep_memservice import MemServiceStore
from threadkeep_memservice.emulator import Event, MemoryService, Session

ZERO_WIDTH = "\u200b"


def plain(value: Any) -> Any:
    """Undo the placeholder codec: a leading zero-width space is dropped, once."""
    if isinstance(value, str):
        return value[1:] if value.startswith(ZERO_WIDTH) else value
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


async def chat_sessions(service: MemoryService, space_id: str) -> list[Session]:
    found: list[Session] = []
    before = None
    while True:
        batch = await service.list_sessions(
            space_id, description_prefix="//chat/", before=before, limit=200, include_deleted=True
        )
        found += batch
        if len(batch) < 200:
            return found
        before = batch[-1].sequence_id


async def all_events(service: MemoryService, space_id: str, session_id: str) -> list[Event]:
    found: list[Event] = []
    after = None
    while True:
        batch = await service.list_events(
            space_id, session_id, after=after, limit=200, include_deleted=True
        )
        found += batch
        if len(batch) < 200:
            return found
        after = batch[-1].sequence_id


def head_body(head: Event, chunks: dict[str, Event]) -> dict[str, Any]:
    """The message body of a head event, inline or reassembled from its chunks."""
    if "message" in head.body:
        return dict(plain(head.body["message"]))
    raw = b"".join(base64.b64decode(chunks[k].body["data"]) for k in head.body["chunks"]["keys"])
    return dict(json.loads(raw.decode("utf-8")))


async def raw_chats(store: MemServiceStore) -> list[RawChat]:
    sessions = await chat_sessions(store.driver.service, store.driver.space_id)
    chats = []
    for session in sessions:
        body = plain(session.metadata["chat"])
        deleted = body.get("deleted_at") is not None or session.deleted_at is not None
        chats.append(RawChat.from_body(body, deleted=deleted))
    return chats


async def raw_messages(store: MemServiceStore, chat_id: UUID) -> list[RawMessage]:
    service, space_id = store.driver.service, store.driver.space_id
    sessions = await service.list_sessions(
        space_id, description_prefix=f"//chat/{chat_id}/", limit=1, include_deleted=True
    )
    if not sessions:
        return []
    events = await all_events(service, space_id, sessions[0].session_id)
    chunks = {str(e.dedup_key): e for e in events if e.event_type == "chunk"}
    committed = {e.body["batch"] for e in events if e.event_type == "commit"}
    rows = []
    for head in events:
        if head.event_type not in ("message", "boundary"):
            continue
        cols = plain(head.body["cols"])
        if cols.get("batch") is not None and cols["batch"] not in committed:
            continue  # a staged part of a batch that never committed: not a stored message
        rows.append(
            RawMessage.from_body(
                head_body(head, chunks),
                chat_id=chat_id,
                seq=head.sequence_id,
                hidden=cols["deleted_at"] is not None,
            )
        )
    return rows


_DAMAGED_MESSAGES: dict[str, tuple[str, Any]] = {
    "body_not_json": ("message", "not json {"),
    "body_not_object": ("message", [1, 2]),
    "body_wrong_types": ("message", {"role": 5}),
    "body_wrong_native_type": ("message", 42),
    "timestamp": ("cols.created_at", "not-a-date"),
}


async def damage_message(
    store: MemServiceStore, chat_id: UUID, seq: int, damage: str
) -> str | None:
    """Write ``damage`` into the head event of message ``seq`` in the emulator's own state.

    Returns the part a ``CorruptRecord`` names (``"body"`` or ``"cols"``), or ``None`` for
    damage the service cannot hold (it keeps JSON, with no native types beyond it).
    """
    found = _DAMAGED_MESSAGES.get(damage)
    if found is None:
        return None
    path, value = found
    sessions = await store.driver.service.list_sessions(
        store.driver.space_id,
        description_prefix=f"//chat/{chat_id}/",
        limit=1,
        include_deleted=True,
    )
    state = store.driver.service._spaces[store.driver.space_id]
    row = state.sessions[sessions[0].session_id]
    event = row.events[row.by_seq[seq]]
    body = json.loads(event.body_text)
    if path == "message":
        body["message"] = value
    else:
        body["cols"]["created_at"] = value
    event.body_text = json.dumps(body)
    return "body" if path == "message" else "cols"


async def move_message(store: MemServiceStore, chat_id: UUID, seq: int, new_seq: int) -> str:
    """Move the head event of message ``seq`` to ``new_seq`` in the emulator's own state.

    The service keeps every session's sequence counter past every id it stores (an event
    written with an explicit ``sequence_id``, as an import or a restore writes it, moves
    the counter), so the moved event lands where the service itself would put it: a
    counter behind a stored event cannot happen on this backend, and the contract checks
    that appends after such an event still go after it.
    """
    sessions = await store.driver.service.list_sessions(
        store.driver.space_id,
        description_prefix=f"//chat/{chat_id}/",
        limit=1,
        include_deleted=True,
    )
    row = store.driver.service._spaces[store.driver.space_id].sessions[sessions[0].session_id]
    event = row.events[row.by_seq[seq]]
    row.remove_event(event)
    event.sequence_id = new_seq
    row.add_event(event)  # moves the counter past it, as the service always does
    return "followed"


async def damage_record(
    store: MemServiceStore, kind: str, chat_id: UUID, seq: int | None, damage: str
) -> str | None:
    """Write ``damage`` into a step event (``kind`` "step", by ``seq``) or a run session.

    A step is an event of its chat's session holding ``{"step": record}``; a run is a
    session of its own (``//run/active/<chat_id>/`` or ``//run/ended/...``) holding
    ``{"run": record}`` in its metadata. Returns ``"body"``, or ``None`` for damage that is
    not a body (these records have no separate timestamp field).
    """
    value = DAMAGED_BODIES.get(damage)
    if value is None:
        return None
    state = store.driver.service._spaces[store.driver.space_id]
    if kind == "step":
        sessions = await store.driver.service.list_sessions(
            store.driver.space_id, description_prefix=f"//chat/{chat_id}/", limit=1
        )
        row = state.sessions[sessions[0].session_id]
        event = row.events[row.by_seq[seq]]  # type: ignore[index]
        body = json.loads(event.body_text)
        body["step"] = value
        event.body_text = json.dumps(body)
        return "body"
    [session] = [
        s
        for prefix in ("//run/active/", "//run/ended/")
        for s in await store.driver.service.list_sessions(
            store.driver.space_id, description_prefix=f"{prefix}{chat_id}/", limit=10
        )
    ]
    session_row = state.sessions[session.session_id]
    metadata = json.loads(session_row.metadata_text)
    metadata["run"] = value
    session_row.metadata_text = json.dumps(metadata)
    return "body"
