"""Turning a chat's events back into messages: chunks, visibility, locations, scans."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from uuid import UUID

from threadkeep import BackendUnavailable, Message

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


def is_hidden(head: Event) -> bool:
    """Return whether a head event's message is hidden (``delete_messages``)."""
    return columns_of(head).get("deleted_at") is not None


class ReadHelpers(StagingHelpers):
    """Materializing messages from head events and reading them by location.

    Every read of heads goes through :meth:`_committed_heads`: the staged parts of a batch
    not committed (yet, or ever) are not there for readers (see :mod:`._staging`).
    """

    async def _materialize(
        self, session_id: str, chat_id: UUID, heads: Sequence[Event]
    ) -> list[Message]:
        """Return the messages of ``heads`` (fetching chunks of large ones in batches)."""
        keys = [key for head in heads for key in chunk_keys_of(head)]
        chunks: list[Event] = []
        for batch in batched(keys):
            chunks += await self.service.get_events(self.space_id, session_id, dedup_keys=batch)
        return [self._message_of(head, chat_id, chunks) for head in heads]

    def _message_of(self, head: Event, chat_id: UUID, chunks: Sequence[Event]) -> Message:
        cols = columns_of(head)
        body: str | dict[str, object] | None = inline_body(head)
        if body is None:
            try:
                body = assemble_chunks(head, chunks)
            except ValueError as exc:
                raise BackendUnavailable(f"a stored message is damaged: {exc}") from exc
        return self.message_from_row(
            body,
            chat_id=chat_id,
            seq=head.sequence_id,
            revision=int(cols["revision"]),
            created_at=parse_time(cols.get("created_at")),
            updated_at=parse_time(cols.get("updated_at")),
            deleted_at=parse_time(cols.get("deleted_at")),
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
    ) -> AsyncIterator[list[Event]]:
        """Yield pages of a session's committed head events in sequence order (keyset).

        Pages may come out shorter than ``page`` (heads of uncommitted batches are left
        out); the walk ends after the service's last page.
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
            )
            committed = await self._committed_heads(session_id, events, memo)
            if committed:
                yield committed
            if len(events) < page:
                return
            if descending:
                before = events[-1].sequence_id
            else:
                after = events[-1].sequence_id
