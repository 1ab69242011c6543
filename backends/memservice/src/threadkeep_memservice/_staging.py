"""Batches over the service's 200-event limit: staged parts and one commit marker.

One ``create_events`` call is atomic but holds at most 200 events, and an append of any size
must commit whole or not at all. A batch that needs more events is written
in parts:

- Every head event of the batch carries ``cols.batch = <batch id>`` (a fresh uuid hex).
- The parts go in order, each ``If-Match`` the session version the previous part returned,
  so nothing else (no other append, edit, hide or delete) can land in the chat between them:
  the batch's events are contiguous in the session and its ``seq``s are above every earlier
  one and below every later one (commit order holds).
- The **last** part holds the commit marker, a ``commit`` event with dedup key
  ``b:<batch id>``. That call is the batch's commit point.
- Readers respect it: a tagged head is visible only when its batch's marker is stored
  (:meth:`StagingHelpers._committed_heads`). A committed batch stays committed, so markers
  found are cached; within one read the answer for a batch is fixed, so a read never shows
  part of a batch.

A writer that fails between parts deletes what it staged (best effort). After a crash the
staged parts stay invisible; the next append that meets one of their keys (a retry of the
same messages) deletes those heads, conditional on the session version at which the marker
was seen absent, so a batch whose writer is still alive can never be half deleted and
then committed: its next part fails the ``If-Match`` and it starts over.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from ._base import MemServiceBase
from ._codec import MESSAGE_TYPES, chunk_keys_of, decode_string
from .emulator import (
    MAX_BATCH,
    Event,
    MemServiceError,
    NewEvent,
    NotFoundError,
    ServiceTimeout,
    Session,
)

__all__ = [
    "COMMIT_TYPE",
    "Memo",
    "StagingHelpers",
    "batch_of",
    "commit_key",
    "count_committed_heads",
    "slices",
    "staged_parts",
]

_log = logging.getLogger("threadkeep_memservice")

COMMIT_TYPE = "commit"
"""Event type of the commit marker of a batch written in several parts."""

Memo = dict[str, bool]
"""Batch id -> committed, as decided once within one read or write."""


def slices(items: Sequence[Any], size: int = MAX_BATCH) -> list[Sequence[Any]]:
    """Split ``items`` into consecutive slices of at most ``size`` (the batch limit)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def commit_key(batch: str) -> str:
    """Return the dedup key of a batch's commit marker (``b:`` + the batch id)."""
    return f"b:{batch}"


def batch_of(head: Event) -> str | None:
    """Return the batch id a head was staged under, or ``None`` (written in one call)."""
    cols = head.body.get("cols")
    batch = cols.get("batch") if isinstance(cols, dict) else None
    return None if batch is None else decode_string(str(batch))


def staged_parts(events: Sequence[NewEvent], batch: str) -> list[Sequence[NewEvent]]:
    """Tag the heads of ``events`` with ``batch`` and cut them, plus the marker, into calls.

    Args:
        events: The batch's head and chunk events, in order.
        batch: The batch id (non-empty, no leading placeholder: a uuid hex).

    Returns:
        Slices of at most ``MAX_BATCH`` events; the last one ends with the commit marker.
    """
    tagged = [
        dataclasses.replace(e, body={**e.body, "cols": {**e.body["cols"], "batch": batch}})
        if e.event_type in MESSAGE_TYPES
        else e
        for e in events
    ]
    marker = NewEvent(COMMIT_TYPE, {"batch": batch, "events": len(events)}, commit_key(batch))
    return slices([*tagged, marker])


def count_committed_heads(events: Iterable[Event]) -> int:
    """Count the message heads among ``events`` that belong to no batch or a committed one.

    For counting what a delete of *every* event of a session removed: a batch's marker is
    among the events when the batch committed.
    """
    markers = set()
    heads: dict[str | None, int] = {}
    for event in events:
        if event.event_type == COMMIT_TYPE:
            markers.add(str(event.body.get("batch")))
        elif event.event_type in MESSAGE_TYPES:
            batch = batch_of(event)
            heads[batch] = heads.get(batch, 0) + 1
    return sum(n for batch, n in heads.items() if batch is None or batch in markers)


class StagingHelpers(MemServiceBase):
    """Writing a batch in staged parts, and hiding the parts of batches not committed."""

    async def _committed_heads(
        self,
        session_id: str,
        heads: Sequence[Event],
        memo: Memo | None = None,
        *,
        include_deleted: bool = False,
    ) -> list[Event]:
        """Return ``heads`` without those of batches whose commit marker is not stored.

        Args:
            session_id: The chat's session.
            heads: Head events read from it.
            memo: Decisions already taken in this read (updated); pass the same dict for
                every page of one read so a batch is never half visible.
            include_deleted: Also read a soft-deleted chat's session.
        """
        memo = {} if memo is None else memo
        unknown: list[str] = []
        for batch in {b for h in heads if (b := batch_of(h)) is not None and b not in memo}:
            if self._committed_batches.get(batch):
                memo[batch] = True
            else:
                unknown.append(batch)
        for part in slices(sorted(unknown)):
            found = await self.service.get_events(
                self.space_id,
                session_id,
                dedup_keys=[commit_key(b) for b in part],
                include_deleted=include_deleted,
            )
            present = {e.dedup_key for e in found}
            for batch in part:
                memo[batch] = commit_key(batch) in present
                if memo[batch]:
                    self._committed_batches.put(batch, True)
        return [h for h in heads if (b := batch_of(h)) is None or memo[b]]

    async def _create_staged(
        self, session: Session, events: Sequence[NewEvent]
    ) -> tuple[list[Event], int]:
        """Write a batch of more than ``MAX_BATCH`` events in parts; see the module docs.

        Returns:
            ``(the created head events in order, the session's new version)``.

        Raises:
            MemServiceError: From the part that failed; the parts written before it are
                deleted again (best effort), except when the failed part was the last one
                and timed out: it may have committed the batch.
        """
        batch = uuid.uuid4().hex
        version = session.version
        created: list[Event] = []
        parts = staged_parts(events, batch)
        for index, part in enumerate(parts):
            try:
                written, version = await self.service.create_events(
                    self.space_id, session.session_id, part, if_match=version
                )
            except MemServiceError as exc:
                ambiguous = index == len(parts) - 1 and isinstance(exc, ServiceTimeout)
                if created and not ambiguous:
                    await self._discard_own(session.session_id, [e.event_id for e in created])
                raise
            created += written
        self._committed_batches.put(batch, True)
        return [e for e in created if e.event_type in MESSAGE_TYPES], version

    async def _discard_own(self, session_id: str, event_ids: Sequence[str]) -> None:
        """Delete the staged events of a batch this writer gave up (best effort).

        Unconditional: only its writer commits a batch, and this one will not. Events
        someone else removed already are skipped.
        """
        for part in slices(event_ids):
            try:
                try:
                    await self.service.delete_events(self.space_id, session_id, part, hard=True)
                except NotFoundError:
                    left = await self.service.get_events(self.space_id, session_id, event_ids=part)
                    if left:
                        ids = [e.event_id for e in left]
                        await self.service.delete_events(self.space_id, session_id, ids, hard=True)
            except MemServiceError as exc:
                _log.warning(
                    "staged events of an abandoned batch stay in session %s (invisible): %s",
                    session_id,
                    exc,
                )
                return

    async def _discard_staged(self, session: Session, heads: Sequence[Event]) -> Session:
        """Delete uncommitted staged heads (and their chunks) found in a write's way.

        Each delete is ``If-Match`` the version the caller saw the markers absent at
        (``session.version``, then the version the previous delete returned).

        Returns:
            ``session`` with its new version.

        Raises:
            ConflictError: If the session changed meanwhile (the batch may have committed):
                read it again and decide again.
            NotFoundError: If the session is gone.
        """
        ids: list[str] = []
        for head in heads:
            ids.append(head.event_id)
            for part in slices(chunk_keys_of(head)):
                chunks = await self.service.get_events(
                    self.space_id, session.session_id, dedup_keys=part
                )
                ids += [c.event_id for c in chunks]
        version = session.version
        for part in slices(ids):
            version = await self.service.delete_events(
                self.space_id, session.session_id, part, hard=True, if_match=version
            )
        return dataclasses.replace(session, version=version)
