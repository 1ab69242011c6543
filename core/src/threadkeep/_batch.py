"""Rules every driver applies inside its own atomic append, written once (issue 13).

A driver appends a batch of :class:`~threadkeep.PreparedMessage` inside one atomic step (a
transaction, a lock, a conditional write). Within that step it looks up which of the
batch's ``agui_id`` s the chat stores already, then calls :func:`resolve_batch`: the
idempotency rule (a retry of a stored ``agui_id`` returns the stored message if equal,
else raises) lives here and nowhere else, so every
driver raises the same :class:`~threadkeep.IdempotencyConflict` for the same input, before
it has written anything. :func:`fingerprint` is the one fingerprint of a stored message
(what ``PreparedMessage.fingerprint`` is for a new one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar
from uuid import UUID

from ._content import PreparedMessage
from ._encode import fingerprint_of
from ._errors import IdempotencyConflict
from ._models import Message

__all__ = ["fingerprint", "idempotency_conflict", "resolve_batch", "same_payload"]

S = TypeVar("S")


def fingerprint(message: Message) -> str:
    """Return the idempotency fingerprint of a stored or new message.

    Two messages sent with one ``agui_id`` are "the same" when their fingerprints match:
    store-assigned fields (``seq``, ``revision``, timestamps, ...) and ids the client did not
    choose do not count (computed in one pass with the body, ``threadkeep._encode``). For a message
    about to be written, ``PreparedMessage.fingerprint`` is this value already.

    Args:
        message: The message (extra fields of a ``Message`` subclass count).

    Returns:
        The fingerprint: the hex SHA-256 of the canonical JSON payload.

    Raises:
        pydantic_core.PydanticSerializationError: If an undeclared extra field holds a
            value with no JSON form (``Store.prepare`` refuses such a message first).
    """
    return fingerprint_of(message)


def same_payload(stored: Message, item: PreparedMessage) -> bool:
    """Whether a retry equals the stored message.

    The stored copy is read back as the store's ``message_model``; a retry written as
    another ``Message`` class differs from it only by that model's defaults, so it is
    compared after validating it as the stored class.

    Args:
        stored: The message stored under the retry's ``agui_id``.
        item: The retry, prepared.

    Returns:
        ``True`` when the fingerprints match (after that validation).
    """
    stored_fingerprint = fingerprint(stored)
    if stored_fingerprint == item.fingerprint:
        return True
    if type(stored) is type(item.message):
        return False
    try:
        as_stored = type(stored).model_validate(item.message.model_dump(serialize_as_any=True))
    except ValueError:
        return False
    return fingerprint(as_stored) == stored_fingerprint


def idempotency_conflict(chat_id: UUID, agui_id: str | None) -> IdempotencyConflict:
    """Return the error for an ``agui_id`` the chat stores with another payload.

    Args:
        chat_id: The chat appended to.
        agui_id: The client's id that is taken.

    Returns:
        An ``IdempotencyConflict`` that says nothing of the batch was written and what to
        do instead.
    """
    return IdempotencyConflict(
        f"agui_id {agui_id!r} is stored in chat {chat_id} with a different payload; nothing "
        "of the batch was written (use a new agui_id, or update_message to change it)"
    )


def resolve_batch(
    chat_id: UUID,
    batch: Sequence[PreparedMessage],
    stored: Callable[[str], tuple[str, S] | None],
) -> list[S | None]:
    """Decide, for each message of a batch, whether it is new or stored already.

    Call it inside the append's atomic step, after reading what the chat stores for the
    batch's ``agui_id`` s and before writing anything. A message without an ``agui_id`` is
    always new (``None`` never matches a stored ``""``).

    Args:
        chat_id: The chat appended to (named in the error).
        batch: The prepared messages, in order (``Store`` guarantees their ``agui_id`` s
            are distinct).
        stored: ``agui_id -> (fingerprint, record)`` of the message the chat stores with
            that id, or ``None``; ``record`` is whatever the driver returns for it (a
            ``Message``, a row, a seq). A ``dict``'s ``get`` will do.

    Returns:
        One entry per message, in order: the stored ``record`` for a message sent again
        with the same payload (not to be inserted, reported ``created=False``), ``None``
        for a message to insert.

    Raises:
        IdempotencyConflict: If a stored message has the ``agui_id`` of one of the batch
            with another fingerprint; the driver must then write nothing of the batch.
    """
    plan: list[S | None] = []
    for item in batch:
        agui_id = item.message.agui_id
        found = None if agui_id is None else stored(agui_id)
        if found is None:
            plan.append(None)
            continue
        held_fingerprint, record = found
        if held_fingerprint != item.fingerprint:
            raise idempotency_conflict(chat_id, agui_id)
        plan.append(record)
    return plan
