"""Turning a chat's events back into messages: chunks, visibility, locations, scans."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from uuid import UUID

from threadkeep import CorruptRecord, Message, rebuilt_each

from ._codec import (
    MESSAGE_TYPES,
    assemble_chunks,
    chunk_keys_of,
    columns_of,
    inline_body,
    parse_time,
)
from ._locators import Location
from ._staging import Memo, StagingHelpers
from ._staging import slices as batched
from .emulator import MAX_PAGE, Event, NotFoundError, Session

__all__ = ["ReadHelpers", "Visible", "batched"]

Visible = tuple[Session, Event, Message]
"""A visible message with the session and head event it was read from."""


_DAMAGE = (ValueError, TypeError, KeyError, AttributeError, RecursionError)
"""What decoding an event changed outside threadkeep raises."""


def _damaged(chat_id: UUID, head: Event, part: str, exc: BaseException) -> CorruptRecord:
    detail = f"does not decode ({type(exc).__name__}: {exc})"
    return CorruptRecord(
        "message", chat_id=chat_id, seq=head.sequence_id, column=part, detail=detail
    )


def is_hidden(head: Event) -> bool:
    """Return whether a head event's message is hidden (``delete_messages``)."""
    return columns_of(head).get("deleted_at") is not None


class ReadHelpers(StagingHelpers):
    """Materializing messages from head events and reading them by location.

    Every read of heads goes through :meth:`_committed_heads`: the staged parts of a batch
    not committed (yet, or ever) are not there for readers (see :mod:`._staging`).
    """

    async def _chunks_of(
        self, session_id: str, heads: Sequence[Event], *, include_deleted: bool = False
    ) -> list[Event]:
        """Return the chunk events of the large messages among ``heads`` (batched reads).

        ``include_deleted`` also reads a soft-deleted chat's session.
        """
        keys = [key for head in heads for key in chunk_keys_of(head)]
        chunks: list[Event] = []
        for batch in batched(keys):
            chunks += await self.service.get_events(
                self.space_id, session_id, dedup_keys=batch, include_deleted=include_deleted
            )
        return chunks

    async def _materialize(
        self,
        session_id: str,
        chat_id: UUID,
        heads: Sequence[Event],
        *,
        include_deleted: bool = False,
    ) -> list[Message]:
        """Return the messages of ``heads`` (fetching chunks of large ones in batches).

        ``include_deleted`` also reads a soft-deleted chat's session.
        """
        chunks = await self._chunks_of(session_id, heads, include_deleted=include_deleted)
        return rebuilt_each(heads, lambda head: self._message_of(head, chat_id, chunks))

    def _message_of(self, head: Event, chat_id: UUID, chunks: Sequence[Event]) -> Message:
        """Rebuild the message of a head event.

        Raises:
            CorruptRecord: If the event's columns, body or chunks do not decode (an event
                changed outside threadkeep), naming the chat, seq and part.
        """
        try:
            cols = columns_of(head)
            revision = int(cols["revision"])
            times = {k: parse_time(cols.get(k)) for k in ("created_at", "updated_at", "deleted_at")}
        except _DAMAGE as exc:
            raise _damaged(chat_id, head, "cols", exc) from exc
        try:
            body: str | dict[str, object] | None = inline_body(head)
            if body is None:
                body = assemble_chunks(head, chunks)
        except _DAMAGE as exc:
            raise _damaged(chat_id, head, "body", exc) from exc
        return self.message_from_row(
            body, chat_id=chat_id, seq=head.sequence_id, revision=revision, **times
        )

    async def _visible_at(self, location: Location, message_id: UUID | None) -> Visible | None:
        """Read the visible message at ``location`` (three point reads), or ``None``.

        ``None`` when the chat's session is gone or deleted, the event is missing (a stale
        locator), the event holds another message than ``message_id``, it is hidden, or it
        is a staged part of a batch that has not committed.
        """
        if location.event_key is None:
            return None
        try:
            session = await self.service.get_session(self.space_id, location.session_id)
            events = await self.service.get_events(
                self.space_id, location.session_id, dedup_keys=[location.event_key]
            )
        except NotFoundError:
            return None
        chat = self._chat_of(session)
        if chat.deleted_at is not None or chat.chat_id != location.chat_id or not events:
            return None
        head = events[0]
        other = message_id is not None and columns_of(head)["message_id"] != str(message_id)
        if head.event_type not in MESSAGE_TYPES or is_hidden(head) or other:
            return None
        if not await self._committed_heads(location.session_id, [head]):
            return None  # staged by a batch that has not committed
        (message,) = await self._materialize(location.session_id, chat.chat_id, [head])
        return session, head, message

    async def _chunk_ids(self, session_id: str, head: Event) -> list[str]:
        """Return the event ids of a head's chunks (``[]`` for an inline message)."""
        ids: list[str] = []
        for batch in batched(chunk_keys_of(head)):
            events = await self.service.get_events(self.space_id, session_id, dedup_keys=batch)
            ids += [e.event_id for e in events]
        return ids

    async def _heads(
        self,
        session_id: str,
        *,
        types: Sequence[str] = MESSAGE_TYPES,
        after: int | None = None,
        before: int | None = None,
        descending: bool = False,
        page: int = MAX_PAGE,
        include_deleted: bool = False,
    ) -> AsyncIterator[list[Event]]:
        """Yield pages of a session's committed head events in sequence order (keyset).

        Pages may come out shorter than ``page`` (heads of uncommitted batches are left
        out); the walk ends after the service's last page. ``include_deleted`` also reads
        a soft-deleted chat's session (threadkeep soft-deletes events only with it).
        """
        memo: Memo = {}
        while True:
            events = await self.service.list_events(
                self.space_id,
                session_id,
                event_types=types,
                after=after,
                before=before,
                limit=page,
                descending=descending,
                include_deleted=include_deleted,
            )
            committed = await self._committed_heads(
                session_id, events, memo, include_deleted=include_deleted
            )
            if committed:
                yield committed
            if len(events) < page:
                return
            if descending:
                before = events[-1].sequence_id
            else:
                after = events[-1].sequence_id
