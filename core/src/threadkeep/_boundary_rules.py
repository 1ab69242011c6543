"""Where a boundary cuts the model's context, and the rules a compaction boundary follows.

``compact`` draws its boundary through ``append_messages``, so the rules here hold on every
path that writes a compaction boundary: ``compact``, and a boundary passed to
``append_message``/``append_messages`` directly (a replayed or migrated history).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from ._errors import InvalidArgument
from ._models import Message, MessageKind

__all__ = ["boundary_cut", "check_compactions", "is_compaction"]


def is_compaction(message: Message) -> bool:
    """Return whether ``message`` is a compaction boundary (a boundary with a summary)."""
    return message.boundary is not None and message.boundary.reason == "compaction"


def boundary_cut(boundary: Message) -> int:
    """Return the last seq a boundary takes out of the model's context (its "cut").

    A compaction cuts up to its ``upto_seq`` (its summary stands in for those messages);
    a "start over" line cuts everything up to itself (its own ``seq``).
    """
    marker = boundary.boundary
    if marker is not None and marker.reason == "compaction" and marker.upto_seq is not None:
        return marker.upto_seq
    return boundary.seq or 0


def check_compactions(
    chat_id: UUID,
    batch: Sequence[Message],
    newest: int | None,
    cut: int,
    retries: frozenset[str] = frozenset(),
) -> None:
    """Refuse a batch whose compaction boundaries break ``compact``'s rules.

    A compaction's ``upto_seq`` is at least 1, at most the chat's newest seq before the
    batch (a summary covers messages already stored; seqs of the batch are assigned at
    commit), and at least the current cut: the cut only moves forward. Inside the batch,
    a compaction moves the cut to its ``upto_seq`` and a "start over" line past every
    stored message.

    Args:
        chat_id: The chat, for the error messages.
        batch: The messages to append, in order.
        newest: The chat's newest visible seq before the batch (``None``: no messages).
        cut: The current cut (:func:`boundary_cut` of the last visible boundary, else 0).
        retries: ``agui_id`` values already stored in the chat: those messages are
            retries (the append returns the stored message or raises
            ``IdempotencyConflict``), never new boundaries, so they are not checked.

    Raises:
        InvalidArgument: Naming the boundary's position in the batch and the rule broken.
    """
    for index, message in enumerate(batch):
        if message.kind is not MessageKind.BOUNDARY or message.agui_id in retries:
            continue
        if not is_compaction(message):
            cut = (newest or 0) + 1  # a new "start over" line cuts every stored message
            continue
        upto = message.boundary.upto_seq if message.boundary is not None else None
        where = f"compaction boundary (message {index} of the batch) of chat {chat_id}"
        if upto is None:
            msg = f"{where} has no upto_seq; give the last seq its summary covers"
            raise InvalidArgument(msg)
        if upto < 1 or newest is None or upto > newest:
            msg = (
                f"{where}: upto_seq {upto} is not a seq of the chat's stored messages "
                f"(newest: {newest}); a summary covers messages already stored"
            )
            raise InvalidArgument(msg)
        if upto < cut:
            msg = (
                f"{where}: upto_seq {upto} is below the current cut (seq {cut}); a "
                "compaction only moves the cut forward: summarize up to a seq >= the cut"
            )
            raise InvalidArgument(msg)
        cut = upto
