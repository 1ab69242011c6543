"""Checking and applying event writes on one session row (shared by single and mixed batches).

Every batch is checked whole before anything is applied, which is what makes each call
all or nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from ._errors import ConflictError, DuplicateEventKey, NotFoundError, ValidationError
from ._records import MAX_DEDUP_KEY, EventPatch, NewEvent, check_string, encode_document
from ._state import EventRow, SessionRow

__all__ = ["apply_creates", "apply_patches", "check_creates", "check_deletes", "check_patches"]


def check_creates(row: SessionRow, events: Sequence[NewEvent]) -> list[str]:
    """Validate new events against the session; return their body wire texts.

    Raises:
        ValidationError / DocumentTooLarge: If an event breaks a rule.
        ConflictError: If an explicit sequence id is in use (or repeats).
        DuplicateEventKey: If a dedup key is stored already or repeats in the batch.
    """
    texts: list[str] = []
    duplicates: list[str] = []
    seen_keys: set[str] = set()
    explicit: set[int] = set()
    for index, event in enumerate(events):
        check_string(event.event_type, f"events[{index}].event_type", max_length=128)
        texts.append(encode_document(event.body, f"events[{index}].body"))
        if event.dedup_key is not None:
            check_string(event.dedup_key, f"events[{index}].dedup_key", max_length=MAX_DEDUP_KEY)
            if event.dedup_key in seen_keys or event.dedup_key in row.event_keys:
                duplicates.append(event.dedup_key)
            seen_keys.add(event.dedup_key)
        seq = event.sequence_id
        if seq is not None:
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise ValidationError(f"events[{index}].sequence_id must be a positive integer")
            if seq in explicit or seq in row.by_seq:
                raise ConflictError(f"events[{index}].sequence_id {seq} is already in use")
            explicit.add(seq)
    if duplicates:
        msg = f"event dedup keys already stored in session {row.session_id}: {duplicates}"
        raise DuplicateEventKey(msg, duplicates)
    return texts


def apply_creates(
    row: SessionRow, events: Sequence[NewEvent], texts: Sequence[str], now: float
) -> list[EventRow]:
    """Store checked events; those without a sequence id get the next ones, in order."""
    for event in events:
        if event.sequence_id is not None:
            row.next_event_seq = max(row.next_event_seq, event.sequence_id + 1)
    created: list[EventRow] = []
    for event, text in zip(events, texts, strict=True):
        seq = row.next_event_seq if event.sequence_id is None else event.sequence_id
        event_row = EventRow(
            event_id=f"ev_{secrets.token_hex(8)}",
            sequence_id=seq,
            event_type=event.event_type,
            dedup_key=event.dedup_key,
            body_text=text,
            version=secrets.token_hex(6),
            created_at=now,
            updated_at=now,
        )
        row.add_event(event_row)
        created.append(event_row)
    return created


def check_patches(row: SessionRow, patches: Sequence[EventPatch]) -> list[tuple[EventRow, str]]:
    """Validate patches; return each live target with its new body text.

    Raises:
        ValidationError / DocumentTooLarge: If an event repeats or a body breaks a rule.
        NotFoundError: If an event is missing or soft-deleted.
        ConflictError: If a patch's ``if_match`` is stale.
    """
    if len({p.event_id for p in patches}) != len(patches):
        raise ValidationError("an event is patched twice in one batch")
    targets: list[tuple[EventRow, str]] = []
    for index, patch in enumerate(patches):
        event = row.events.get(patch.event_id)
        if event is None or event.deleted_at is not None:
            raise NotFoundError(f"no event {patch.event_id!r} in session {row.session_id!r}")
        if patch.if_match is not None and patch.if_match != event.version:
            raise ConflictError(f"event {patch.event_id!r} changed since it was read")
        targets.append((event, encode_document(patch.body, f"patches[{index}].body")))
    return targets


def apply_patches(targets: Sequence[tuple[EventRow, str]], now: float) -> None:
    """Replace the bodies of checked targets; each gets a new version token."""
    for event, text in targets:
        event.body_text, event.version, event.updated_at = text, secrets.token_hex(6), now


def check_deletes(row: SessionRow, event_ids: Sequence[str], *, hard: bool) -> list[EventRow]:
    """Return the events to delete.

    Raises:
        ValidationError: If an event repeats.
        NotFoundError: If one is missing (or already soft-deleted, for a soft delete).
    """
    if len(set(event_ids)) != len(event_ids):
        raise ValidationError("an event is deleted twice in one batch")
    doomed: list[EventRow] = []
    missing: list[str] = []
    for event_id in event_ids:
        event = row.events.get(event_id)
        if event is None or (event.deleted_at is not None and not hard):
            missing.append(event_id)
        else:
            doomed.append(event)
    if missing:
        raise NotFoundError(f"no events {missing} in session {row.session_id!r}")
    return doomed
