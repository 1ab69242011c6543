"""``commit_run``: a run record with its messages and steps, in one transaction.

``Store.begin_run`` and ``Store.end_run`` call it, so a buffered run costs two writes and a
crash never leaves half of one: the run check, the appends (seqs reserved on the chat
document, as every append) and the step upserts commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from pymongo import ReturnDocument
from pymongo.errors import PyMongoError

from threadkeep import Message, PreparedMessage, Run, Step

from ._appends import MongoAppendsMixin
from ._base import Rollback, Session
from ._codec import Document
from ._errors import duplicate_key_pattern, is_duplicate_key, map_errors
from ._runs import MongoRunsMixin

__all__ = ["MongoCommitRunMixin"]

Committed = tuple[Run, list[tuple[Message, bool]], list[Step]]


@dataclass(frozen=True, slots=True)
class _RunBatch:
    run: Run
    expected_revision: int | None
    messages: Sequence[PreparedMessage]
    steps: Sequence[Step]
    now: datetime


class MongoCommitRunMixin(MongoRunsMixin, MongoAppendsMixin):
    """The atomic run batch on top of the append and step writes."""

    async def commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> Committed | None:
        work = partial(self._commit, _RunBatch(run, expected_revision, messages, steps, now))
        with map_errors("commit a run"):
            for attempt in range(2):
                try:
                    return await self._write(work)
                except PyMongoError as exc:
                    key = duplicate_key_pattern(exc) if is_duplicate_key(exc) else {}
                    # A concurrent begin_run inserted this run first: the run check failed.
                    if "run_id" in key:
                        return None
                    if "seq" not in key or attempt:
                        raise
                    # A message written around the store holds a reserved seq (issue 12).
                    await self._repair_next_seq(run.chat_id)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _commit(self, batch: _RunBatch, session: Session) -> Committed | None:
        run, expected_revision, now = batch.run, batch.expected_revision, batch.now
        messages, steps = batch.messages, batch.steps
        # Checks before writes, so that without transactions a refused batch writes nothing.
        hot = {"_id": run.chat_id, "writable": True}
        if await self._cols.chats.find_one(hot, {"_id": 1}, session=session) is None:
            raise Rollback(None)
        key = {"chat_id": run.chat_id, "run_id": {"$eq": run.run_id}}
        held = await self._cols.runs.find_one(key, {"revision": 1}, session=session)
        if (None if held is None else held["revision"]) != expected_revision:
            raise Rollback(None)
        results = await self._append(run.chat_id, messages, now, session) if messages else []
        if results is None:
            raise Rollback(None)
        doc: Document | None
        if expected_revision is None:
            doc = self._run_fields(run, run.revision)
            await self._cols.runs.insert_one(doc, session=session)
        else:
            doc = await self._cols.runs.find_one_and_update(
                {**key, "revision": expected_revision},
                {"$set": self._run_fields(run, expected_revision + 1)},
                return_document=ReturnDocument.AFTER,
                session=session,
            )
            if doc is None:
                raise Rollback(None)
        saved = await self._save(steps, now, session) if steps else []
        return self._run_from_doc(doc), results, saved
