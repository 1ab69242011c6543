"""The emulator's stored rows and the indexes its listings use.

Bodies and metadata are kept as their JSON wire text, so every read hands out a fresh copy
and nothing a caller does to a returned record reaches the store.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

from ._records import Event, Session, Space

__all__ = ["EventRow", "SessionRow", "SpaceState"]


@dataclass
class EventRow:
    """One stored event."""

    event_id: str
    sequence_id: int
    event_type: str
    dedup_key: str | None
    body_text: str
    version: str
    created_at: float
    updated_at: float
    deleted_at: float | None = None

    def record(self, session_id: str) -> Event:
        """Return the event as the service hands it out (a fresh copy of the body)."""
        return Event(
            event_id=self.event_id,
            session_id=session_id,
            sequence_id=self.sequence_id,
            event_type=self.event_type,
            dedup_key=self.dedup_key,
            body=json.loads(self.body_text),
            version=self.version,
            created_at=self.created_at,
            updated_at=self.updated_at,
            deleted_at=self.deleted_at,
        )


@dataclass
class SessionRow:
    """One stored session with its events, indexed by id, dedup key and sequence id."""

    session_id: str
    space_id: str
    sequence_id: int
    dedup_key: str | None
    description: str | None
    participants: tuple[str, ...]
    metadata_text: str
    created_at: float
    updated_at: float
    version: int = 1
    deleted_at: float | None = None
    next_event_seq: int = 1
    events: dict[str, EventRow] = field(default_factory=dict)
    event_keys: dict[str, str] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    by_seq: dict[int, str] = field(default_factory=dict)

    def record(self) -> Session:
        """Return the session as the service hands it out (a fresh copy of the metadata)."""
        return Session(
            session_id=self.session_id,
            space_id=self.space_id,
            sequence_id=self.sequence_id,
            dedup_key=self.dedup_key,
            description=self.description,
            participants=self.participants,
            metadata=json.loads(self.metadata_text),
            version=self.version,
            created_at=self.created_at,
            updated_at=self.updated_at,
            deleted_at=self.deleted_at,
        )

    def touch(self, now: float) -> None:
        """Count one write: the version grows by one."""
        self.version += 1
        self.updated_at = now

    def add_event(self, row: EventRow) -> None:
        """Store an event and index it."""
        self.events[row.event_id] = row
        bisect.insort(self.seqs, row.sequence_id)
        self.by_seq[row.sequence_id] = row.event_id
        if row.dedup_key is not None:
            self.event_keys[row.dedup_key] = row.event_id
        self.next_event_seq = max(self.next_event_seq, row.sequence_id + 1)

    def remove_event(self, row: EventRow) -> None:
        """Remove an event for good."""
        del self.events[row.event_id]
        index = bisect.bisect_left(self.seqs, row.sequence_id)
        del self.seqs[index]
        del self.by_seq[row.sequence_id]
        self.release_key(row)

    def release_key(self, row: EventRow) -> None:
        """Free an event's dedup key (it was deleted)."""
        if row.dedup_key is not None and self.event_keys.get(row.dedup_key) == row.event_id:
            del self.event_keys[row.dedup_key]

    def scan(self, after: int | None, before: int | None, descending: bool) -> list[EventRow]:
        """Return the events with ``after < sequence_id < before``, in sequence order."""
        low = 0 if after is None else bisect.bisect_right(self.seqs, after)
        high = len(self.seqs) if before is None else bisect.bisect_left(self.seqs, before)
        window = self.seqs[low:high]
        if descending:
            window.reverse()
        return [self.events[self.by_seq[s]] for s in window]


@dataclass
class SpaceState:
    """One space: its sessions and the listing indexes (description, participant)."""

    space: Space
    sessions: dict[str, SessionRow] = field(default_factory=dict)
    live_keys: dict[str, str] = field(default_factory=dict)
    next_session_seq: int = 1
    by_seq: dict[int, str] = field(default_factory=dict)
    descriptions: list[tuple[str, int]] = field(default_factory=list)
    participants: dict[str, set[int]] = field(default_factory=dict)

    def index(self, row: SessionRow) -> None:
        """Add a session to the listing indexes."""
        self.by_seq[row.sequence_id] = row.session_id
        if row.description is not None:
            bisect.insort(self.descriptions, (row.description, row.sequence_id))
        for participant in row.participants:
            self.participants.setdefault(participant, set()).add(row.sequence_id)

    def unindex(self, row: SessionRow) -> None:
        """Remove a session from the listing indexes."""
        del self.by_seq[row.sequence_id]
        if row.description is not None:
            entry = (row.description, row.sequence_id)
            index = bisect.bisect_left(self.descriptions, entry)
            del self.descriptions[index]
        for participant in row.participants:
            members = self.participants[participant]
            members.discard(row.sequence_id)
            if not members:
                del self.participants[participant]

    def with_prefix(self, prefix: str) -> set[int]:
        """Return the sequence ids of sessions whose description starts with ``prefix``."""
        found: set[int] = set()
        index = bisect.bisect_left(self.descriptions, (prefix, -1))
        while index < len(self.descriptions):
            description, seq = self.descriptions[index]
            if not description.startswith(prefix):
                break
            found.add(seq)
            index += 1
        return found

    def with_participant(self, participant: str) -> set[int]:
        """Return the sequence ids of sessions listing ``participant``."""
        return set(self.participants.get(participant, ()))
