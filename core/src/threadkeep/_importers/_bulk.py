"""Batched writes and proof reads of the record importers (``Store.load_chats``/``find_chats``).

A file of many small records (an OpenAI-format transcript: one chat per record) costs a
lookup, ``create_chat``, ``load_messages`` and the proof's ``update_chat`` per record on the
one-record path (:func:`._write.store_conversation`). Here the lookups go
:data:`LOOKUP_BATCH` records per ``Store.find_chats`` read, and records whose chat does not
exist yet go :data:`WRITE_MESSAGES` messages' worth per ``Store.load_chats`` call: one
transaction writing the chats, their messages and their proofs together (SQL), so a proof
never names a record that is not stored whole. A record whose chat exists (an import that
stopped part-way, or another file's) takes the one-record path, which checks every message
against what is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import IdempotencyConflict
from .._store_chat_load import ChatLoad
from . import ImportReport

if TYPE_CHECKING:
    from .._content import PreparedMessage
    from .._models import Message
    from .._store import Store

__all__ = ["LOOKUP_BATCH", "WRITE_MESSAGES", "ChatBatch", "Conversation", "proof_of"]

LOOKUP_BATCH = 500
"""Conversations whose chats one ``find_chats`` read looks up."""

WRITE_MESSAGES = 5000
"""Messages per ``load_chats`` call (a record with more is written on its own)."""

WRITE_CHATS = 1000
"""Chats per ``load_chats`` call at most."""


class Conversation(Protocol):
    """One converted record: its chat's key, name and metadata, and its messages."""

    @property
    def thread_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def where(self) -> str: ...


def proof_of(conversation: Conversation, digest: str) -> dict[str, Any]:
    """The ``metadata["source"]`` that proves a record stored whole: its digest and counts."""
    counts = {
        "messages": len(conversation.messages),
        "tool_calls": sum(len(m.tool_calls) for m in conversation.messages),
    }
    return {
        "source": {
            **conversation.metadata.get("source", {}),
            "digest": digest,
            "counts": counts,
        }
    }


@dataclass
class ChatBatch:
    """Conversations of new chats waiting for one ``load_chats`` call (see the module docstring).

    Args:
        store: The open store.
        user_id: Owner of the chats.
    """

    store: Store
    user_id: str
    pending: list[tuple[Conversation, str, Sequence[Message | PreparedMessage]]] = field(
        default_factory=list
    )
    size: int = 0

    def full(self) -> bool:
        """Whether the batch holds enough to be written."""
        return self.size >= WRITE_MESSAGES or len(self.pending) >= WRITE_CHATS

    def add(
        self, record: Conversation, digest: str, messages: Sequence[Message | PreparedMessage]
    ) -> None:
        """Add a checked record (its messages as ``load_messages`` takes them)."""
        self.pending.append((record, digest, messages))
        self.size += len(messages)

    async def flush(self) -> tuple[ImportReport, list[Conversation]]:
        """Write the batch; return its counts and the records whose chat existed by then.

        Those records (a concurrent import created their chat meanwhile) are for the
        one-record path. Nothing of them was written.

        Raises:
            IdempotencyConflict: If a record repeats a message id with other content.
            ThreadkeepError: Any error of the store; nothing of the batch is written.
        """
        pending, self.pending, self.size = self.pending, [], 0
        if not pending:
            return ImportReport(), []
        items = [
            ChatLoad(
                user_id=self.user_id,
                thread_id=record.thread_id,
                name=record.name,
                metadata=record.metadata,
                messages=messages,
                proof=proof_of(record, digest),
            )
            for record, digest, messages in pending
        ]
        try:
            results = await self.store.load_chats(items)
        except IdempotencyConflict as exc:
            msg = f"a record of this import repeats a message id with other content: {exc}"
            raise IdempotencyConflict(msg) from exc
        report = ImportReport()
        taken: list[Conversation] = []
        for (record, _, _), result in zip(pending, results, strict=True):
            if not result.created:
                taken.append(record)
                continue
            report.chats_created += 1
            report.messages_created += result.messages
            report.messages_present += result.present
            report.tool_calls_created += result.tool_calls
            report.tool_calls_present += result.tool_calls_present
        return report, taken
