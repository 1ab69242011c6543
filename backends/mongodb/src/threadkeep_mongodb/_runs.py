"""Steps and runs (capability ``steps``): ``{prefix}steps`` and ``{prefix}runs``.

A new step's seq is reserved like a message's: ``$inc`` of ``next_step_seq`` on the chat
document, in the transaction that writes the steps. A run is claimed with a compare-and-set
on its ``revision``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from pymongo import ReplaceOne, ReturnDocument
from pymongo.errors import PyMongoError

from threadkeep import Run, RunStatus, Step, rebuilt_each

from ._base import MongoBase, Session
from ._codec import Document, from_us, required, step_document, to_us
from ._errors import is_duplicate_key, map_errors

__all__ = ["MongoRunsMixin"]


class MongoRunsMixin(MongoBase):
    """The step and run primitives."""

    # -- steps ---------------------------------------------------------------------------

    def _step_from_doc(self, doc: Document) -> Step:
        # the document's chat_id: a damaged body's CorruptRecord still names the chat
        return self.record_from_body(
            Step,
            required(doc, "body"),
            chat_id=required(doc, "chat_id"),
            seq=required(doc, "seq"),
        )

    async def save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        with map_errors("save steps"):
            return await self._write(lambda s: self._save(steps, now, s))

    async def _save(self, steps: Sequence[Step], now: datetime, session: Session) -> list[Step]:
        ids = list({s.step_id for s in steps})
        cursor = self._cols.steps.find(
            {"_id": {"$in": ids}}, {"seq": 1, "created_us": 1}, session=session
        )
        known: dict[UUID, tuple[int, datetime | None]] = {
            doc["_id"]: (doc["seq"], from_us(doc["created_us"])) async for doc in cursor
        }
        next_seq = await self._reserve_step_seqs(steps, known, session)
        stored: list[Step] = []
        for step in steps:
            if step.step_id in known:
                seq, created = known[step.step_id]
            elif step.chat_id in next_seq:
                seq, created = next_seq[step.chat_id], step.created_at or now
                next_seq[step.chat_id] += 1
                known[step.step_id] = (seq, created)
            else:
                continue  # its chat does not exist
            update = {"seq": seq, "created_at": created, "updated_at": now}
            stored.append(step.model_copy(update=update))
        if stored:
            writes = [
                ReplaceOne({"_id": s.step_id}, step_document(s, self.record_body(s)), upsert=True)
                for s in stored
            ]
            await self._cols.steps.bulk_write(writes, ordered=True, session=session)
        return stored

    async def _reserve_step_seqs(
        self,
        steps: Sequence[Step],
        known: dict[UUID, tuple[int, datetime | None]],
        session: Session,
    ) -> dict[UUID, int]:
        """Reserve seqs for the new steps of each chat; return each chat's first new seq."""
        wanted: dict[UUID, set[UUID]] = {}
        for step in steps:
            if step.step_id not in known:
                wanted.setdefault(step.chat_id, set()).add(step.step_id)
        first: dict[UUID, int] = {}
        for chat_id, new_ids in wanted.items():
            chat = await self._cols.chats.find_one_and_update(
                {"_id": chat_id},
                {"$inc": {"next_step_seq": len(new_ids)}},
                projection={"next_step_seq": 1},
                return_document=ReturnDocument.AFTER,
                session=session,
            )
            if chat is not None:
                first[chat_id] = chat["next_step_seq"] - len(new_ids)
        return first

    async def get_step(self, step_id: UUID) -> Step | None:
        with map_errors("read a step"):
            doc = await self._cols.steps.find_one({"_id": step_id})
        return None if doc is None else self._step_from_doc(doc)

    async def _steps_where(
        self, query: Document, *, descending: bool = False, limit: int = 0
    ) -> list[Step]:
        sort = [("seq", -1 if descending else 1)]
        with map_errors("read steps"):
            cursor = self._cols.steps.find(query, sort=sort, limit=limit)
            return [self._step_from_doc(doc) async for doc in cursor]

    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        return await self._steps_where({"chat_id": chat_id, "run_id": {"$eq": run_id}})

    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        return await self._steps_where({"stack_id": {"$eq": stack_id}})

    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        query = {"chat_id": chat_id, "completed": False}
        found = await self._steps_where(query, descending=True, limit=1)
        return found[0] if found else None

    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        query = {"chat_id": chat_id, "seq": {"$gt": after_seq}}
        return await self._steps_where(query, limit=limit)

    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        with map_errors("discard a run"):
            return await self._write(lambda s: self._discard(chat_id, run_id, s))

    async def _discard(self, chat_id: UUID, run_id: str, session: Session) -> dict[str, int]:
        query = {"chat_id": chat_id, "run_id": {"$eq": run_id}}
        cursor = self._cols.messages.find(query, {"body_id": 1}, session=session)
        body_ids = [doc["body_id"] async for doc in cursor if "body_id" in doc]
        messages = await self._cols.messages.delete_many(query, session=session)
        if body_ids:
            await self._cols.chunks.delete_many({"body_id": {"$in": body_ids}}, session=session)
        if messages.deleted_count:
            await self._cols.chats.update_one(
                {"_id": chat_id}, {"$inc": {"revision": 1}}, session=session
            )
        steps = await self._cols.steps.delete_many(query, session=session)
        runs = await self._cols.runs.delete_one(query, session=session)
        return {
            "messages": messages.deleted_count,
            "steps": steps.deleted_count,
            "runs": runs.deleted_count,
        }

    # -- runs ----------------------------------------------------------------------------

    def _run_from_doc(self, doc: Document) -> Run:
        return self.record_from_body(
            Run,
            required(doc, "body"),
            chat_id=required(doc, "chat_id"),
            revision=required(doc, "revision"),
        )

    def _run_fields(self, run: Run, revision: int) -> Document:
        return {
            "chat_id": run.chat_id,
            "run_id": run.run_id,
            "revision": revision,
            "active": run.status is RunStatus.ACTIVE,
            "lease_expires_us": to_us(run.lease_expires_at),
            "body": self.record_body(run),
        }

    async def insert_run(self, run: Run) -> Run:
        key = {"chat_id": run.chat_id, "run_id": {"$eq": run.run_id}}
        with map_errors("start a run"):
            try:
                await self._cols.runs.update_one(
                    key, {"$setOnInsert": self._run_fields(run, run.revision)}, upsert=True
                )
            except PyMongoError as exc:
                if not is_duplicate_key(exc):  # a concurrent insert of this run won
                    raise
            doc = await self._cols.runs.find_one(key)
        assert doc is not None
        return self._run_from_doc(doc)

    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        with map_errors("read a run"):
            doc = await self._cols.runs.find_one({"chat_id": chat_id, "run_id": {"$eq": run_id}})
        return None if doc is None else self._run_from_doc(doc)

    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        query = {
            "chat_id": run.chat_id,
            "run_id": {"$eq": run.run_id},
            "revision": expected_revision,
        }
        with map_errors("update a run"):
            doc = await self._cols.runs.find_one_and_update(
                query,
                {"$set": self._run_fields(run, expected_revision + 1)},
                return_document=ReturnDocument.AFTER,
            )
        return None if doc is None else self._run_from_doc(doc)

    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        query = {"active": True, "lease_expires_us": {"$lt": to_us(now)}}
        with map_errors("find expired runs"):
            cursor = self._cols.runs.find(query, sort=[("lease_expires_us", 1)], limit=limit)
            return rebuilt_each([doc async for doc in cursor], self._run_from_doc)
