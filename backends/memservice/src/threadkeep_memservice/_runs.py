"""Runs (capability ``steps``): one session per run, claimed by ``If-Match``.

A run is a session with ``dedup_key = "run:" + sha256(chat_id NUL run_id)`` (insert if
absent = create adopting the key), the run record in its metadata, and the description
``//run/active/<chat_id>/`` or ``//run/ended/<chat_id>/``: the sweeper lists the prefix
``//run/active/`` (an indexed listing of active runs, never the space). Its ``revision`` is
the session version minus one, so a compare-and-set is an ``If-Match`` update.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from uuid import UUID

from threadkeep import Run, RunStatus, skip_damaged

from ._codec import decode_strings, encode_strings
from ._errors import mapped
from ._steps import StepPrimitives, chat_in
from .emulator import MAX_BATCH, ConflictError, NotFoundError, Session

__all__ = ["RunPrimitives"]

_ACTIVE = "//run/active/"
_ENDED = "//run/ended/"


def _run_key(chat_id: UUID, run_id: str) -> str:
    digest = hashlib.sha256(f"{chat_id}\0{run_id}".encode()).hexdigest()
    return f"run:{digest}"


def _description(run: Run) -> str:
    prefix = _ACTIVE if run.status is RunStatus.ACTIVE else _ENDED
    return f"{prefix}{run.chat_id}/"


class RunPrimitives(StepPrimitives):
    """The run primitives of the driver SPI, and run records in purges and discards."""

    def _run_of(self, session: Session) -> Run:
        body = decode_strings(session.metadata.get("run"))
        columns: dict[str, object] = {"revision": session.version - 1}
        chat_id = chat_in(session.description)  # from the key, not the body: it may be damaged
        if chat_id is not None:
            columns["chat_id"] = chat_id
        return self.record_from_body(Run, body, **columns)

    def _run_document(self, run: Run) -> dict[str, object]:
        return {"run": encode_strings(json.loads(self.record_body(run)))}

    async def _run_session(self, chat_id: UUID, run_id: str) -> Session | None:
        try:
            return await self.service.find_session(
                self.space_id, dedup_key=_run_key(chat_id, run_id)
            )
        except NotFoundError:
            return None

    @mapped
    async def insert_run(self, run: Run) -> Run:
        session, _ = await self.service.create_session(
            self.space_id,
            dedup_key=_run_key(run.chat_id, run.run_id),
            description=_description(run),
            metadata=self._run_document(run),
        )
        return self._run_of(session)

    @mapped
    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        session = await self._run_session(chat_id, run_id)
        return None if session is None else self._run_of(session)

    @mapped
    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        session = await self._run_session(run.chat_id, run.run_id)
        if session is None or session.version - 1 != expected_revision:
            return None
        try:
            written = await self.service.update_session(
                self.space_id,
                session.session_id,
                if_match=expected_revision + 1,
                description=_description(run),
                metadata=self._run_document(run),
            )
        except (ConflictError, NotFoundError):
            return None
        return self._run_of(written)

    @mapped
    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        expired: list[Run] = []
        before = None
        while True:
            sessions = await self.service.list_sessions(
                self.space_id, description_prefix=_ACTIVE, before=before, limit=200
            )
            for session in sessions:
                run = skip_damaged(self._run_of, session)
                if run is None:  # damaged: left out of a sweep (Store.sweep_expired_runs)
                    continue
                lease = run.lease_expires_at
                if run.status is RunStatus.ACTIVE and lease is not None and lease < now:
                    expired.append(run)
                    if len(expired) == limit:
                        return expired
            if len(sessions) < 200:
                return expired
            before = sessions[-1].sequence_id

    @mapped
    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        counts = {"messages": 0, "steps": 0, "runs": 0}
        found = await self._chat_session(chat_id, include_deleted=False)
        if found is not None:
            async with self._chat_lock(chat_id):
                counts.update(await self._delete_run_events(found[0], chat_id, run_id))
        session = await self._run_session(chat_id, run_id)
        if session is not None:
            await self.service.purge_session(self.space_id, session.session_id)
            counts["runs"] = 1
        return counts

    async def _delete_run_events(
        self, session: Session, chat_id: UUID, run_id: str
    ) -> dict[str, int]:
        """Hard-delete the run's messages (with their chunks) and steps from the chat."""
        doomed: list[str] = []
        messages = 0
        async for heads in self._heads(session.session_id):
            for head, message in zip(
                heads, await self._materialize(session.session_id, chat_id, heads), strict=True
            ):
                if message.run_id == run_id:
                    messages += 1
                    doomed.append(head.event_id)
                    doomed += await self._chunk_ids(session.session_id, head)
        steps = [
            e.event_id
            for e in await self._step_events(session.session_id)
            if self._step_of(e).run_id == run_id
        ]
        everything = doomed + steps
        for start in range(0, len(everything), MAX_BATCH):
            await self.service.batch_events(
                self.space_id, session.session_id, deletes=everything[start : start + MAX_BATCH]
            )
        self._hot_sessions.pop(session.session_id)
        return {"messages": messages, "steps": len(steps)}

    async def _purge_chat_records(self, chat_id: UUID) -> dict[str, int]:
        runs = 0
        for prefix in (_ACTIVE, _ENDED):
            while batch := await self.service.list_sessions(
                self.space_id, description_prefix=f"{prefix}{chat_id}/", limit=200
            ):
                for session in batch:
                    await self.service.purge_session(self.space_id, session.session_id)
                    runs += 1
        return {"runs": runs}
