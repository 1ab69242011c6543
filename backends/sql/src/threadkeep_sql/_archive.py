"""Hot-row primitives cold archiving needs (capability ``archive``).

Scan, delete and restore messages and steps; delete an archived chat's rows atomically on
its revision; and the archived-id index (``archived_ids``) that lets lookups by id find an
archived chat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import sqlalchemy as sa

from threadkeep import ChatStatus, Message, Step

from ._base import SqlBase, ref_values
from ._schema import MESSAGE_COLUMNS, archived_ids, chats, message_refs, messages, steps

__all__ = ["ArchiveMixin", "step_values"]

_m, _c = messages.c, chats.c

_SCAN = (
    sa.select(*MESSAGE_COLUMNS)
    .where(
        _m.chat_id == sa.bindparam("chat_id"),
        _m.seq > sa.bindparam("after"),
    )
    .order_by(_m.seq)
    .limit(sa.bindparam("limit"))
)
_LOCK_CHAT = (
    sa.select(_c.next_seq, _c.next_step_seq)
    .where(_c.chat_id == sa.bindparam("chat_id"))
    .with_for_update()
)


def step_values(step: Step, body: str) -> dict[str, Any]:
    """Return the ``steps`` row of a step whose ``seq`` is set."""
    return {
        "step_id": step.step_id,
        "chat_id": step.chat_id,
        "seq": step.seq,
        "run_id": step.run_id,
        "stack_id": step.stack_id,
        "status": step.status.value,
        "created_at": step.created_at,
        "updated_at": step.updated_at,
        "body": body,
    }


class ArchiveMixin(SqlBase):
    """``scan_messages``, ``delete_hot_messages``, ``restore_messages`` and the step pair."""

    async def scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        async with self._db.runner() as run:
            params = {"chat_id": chat_id, "after": after_seq, "limit": limit}
            rows = await run.all(_SCAN, params)
        return self._message_rows(rows)

    async def delete_hot_messages(self, chat_id: UUID) -> int:
        async with self._db.transaction() as conn:
            await conn.execute(sa.delete(message_refs).where(message_refs.c.chat_id == chat_id))
            result = await conn.execute(sa.delete(messages).where(_m.chat_id == chat_id))
        return result.rowcount

    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        archived = (
            sa.select(_c.seq)
            .where(
                _c.chat_id == chat_id,
                _c.status == ChatStatus.ARCHIVED.value,
                _c.revision == expected_revision,
            )
            .with_for_update()
        )
        async with self._db.transaction() as conn:
            if (await conn.execute(archived)).first() is None:
                return None
            await conn.execute(sa.delete(message_refs).where(message_refs.c.chat_id == chat_id))
            removed = await conn.execute(sa.delete(messages).where(_m.chat_id == chat_id))
            removed_steps = await conn.execute(sa.delete(steps).where(steps.c.chat_id == chat_id))
            await conn.execute(
                sa.update(chats).where(_c.chat_id == chat_id).values(revision=_c.revision + 1)
            )
        return {"messages": removed.rowcount, "steps": removed_steps.rowcount}

    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        wanted = list(dict.fromkeys(item_ids))
        if not wanted:
            return 0
        known = sa.select(archived_ids.c.item_id).where(archived_ids.c.item_id.in_(wanted))
        insert = self._upsert(archived_ids).on_conflict_do_nothing(
            index_elements=[archived_ids.c.item_id]
        )
        async with self._db.transaction() as conn:
            stored = set((await conn.execute(known)).scalars().all())
            fresh = [{"item_id": i, "chat_id": chat_id} for i in wanted if i not in stored]
            if fresh:
                await conn.execute(insert, fresh)
        return len(fresh)

    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        stmt = sa.select(archived_ids.c.chat_id).where(archived_ids.c.item_id == item_id)
        async with self._db.read() as conn:
            chat_id: UUID | None = (await conn.execute(stmt)).scalar()
        return chat_id

    async def restore_messages(self, chat_id: UUID, messages_: Sequence[Message]) -> int:
        async with self._db.transaction() as conn:
            counters = (await conn.execute(_LOCK_CHAT, {"chat_id": chat_id})).first()
            if counters is None:
                return 0
            wanted = [m for m in messages_ if m.seq is not None]
            ids = [m.message_id for m in wanted]
            stored = (
                set(
                    (
                        await conn.execute(
                            sa.select(_m.message_id).where(
                                _m.chat_id == chat_id, _m.message_id.in_(ids)
                            )
                        )
                    )
                    .scalars()
                    .all()
                )
                if ids
                else set()
            )
            fresh = [m for m in wanted if m.message_id not in stored]
            if not fresh:
                return 0
            rows = [self._restored_row(chat_id, m) for m in fresh]
            refs = [r for m in fresh for r in ref_values(m, chat_id, m.seq or 0)]
            await conn.execute(sa.insert(messages), rows)
            if refs:
                await conn.execute(sa.insert(message_refs), refs)
            top = max(m.seq or 0 for m in fresh) + 1
            await conn.execute(
                sa.update(chats)
                .where(_c.chat_id == chat_id, _c.next_seq < top)
                .values(next_seq=top)
            )
        return len(fresh)

    def _restored_row(self, chat_id: UUID, message: Message) -> dict[str, Any]:
        return {
            "chat_id": chat_id,
            "seq": message.seq,
            "message_id": message.message_id,
            "agui_id": message.agui_id,
            "role": message.role.value,
            "kind": message.kind.value,
            "run_id": message.run_id,
            "request_id": message.request_id,
            "block_id": message.block_id,
            "revision": message.revision,
            "created_at": message.created_at,
            "updated_at": message.updated_at,
            "deleted_at": message.deleted_at,
            "fingerprint": self.fingerprint(message),
            "body": self.message_body(message),
        }

    async def delete_hot_steps(self, chat_id: UUID) -> int:
        async with self._db.transaction() as conn:
            result = await conn.execute(sa.delete(steps).where(steps.c.chat_id == chat_id))
        return result.rowcount

    async def restore_steps(self, chat_id: UUID, steps_: Sequence[Step]) -> int:
        async with self._db.transaction() as conn:
            counters = (await conn.execute(_LOCK_CHAT, {"chat_id": chat_id})).first()
            if counters is None:
                return 0
            wanted = [s for s in steps_ if s.seq is not None]
            ids = [s.step_id for s in wanted]
            stored = (
                set(
                    (await conn.execute(sa.select(steps.c.step_id).where(steps.c.step_id.in_(ids))))
                    .scalars()
                    .all()
                )
                if ids
                else set()
            )
            fresh = [s for s in wanted if s.step_id not in stored]
            if not fresh:
                return 0
            rows = [step_values(s, self.record_body(s)) for s in fresh]
            await conn.execute(sa.insert(steps), rows)
            top = max(s.seq or 0 for s in fresh) + 1
            await conn.execute(
                sa.update(chats)
                .where(_c.chat_id == chat_id, _c.next_step_seq < top)
                .values(next_step_seq=top)
            )
        return len(fresh)
