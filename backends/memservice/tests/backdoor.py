"""Reading what the emulator stores without the driver's read path (the contract back door).

Decoding is written here again on purpose (placeholder codec, chunks): a bug in the
driver's own decoder must not hide a bug in what it wrote.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from uuid import UUID

from threadkeep_contract_tests import RawChat, RawMessage
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
