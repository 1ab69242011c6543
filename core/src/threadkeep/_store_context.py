"""Boundaries and the model's context window (SPEC section 3, "Boundaries").

"Start over" draws a boundary line in the same thread (agent-chat-storage seed): the model
gets nothing from before it, the person keeps every message. Compaction is the same marker
carrying a summary of what it replaces. History pages show everything, markers included.
"""

from __future__ import annotations

from uuid import UUID

from ._errors import Conflict, InvalidArgument
from ._models import Boundary, Message, MessageKind, Role
from ._store_nested import NestedOps

__all__ = ["ContextOps", "trim_orphan_tool_results"]

_BATCH = 200
_MAX_REDRAWS = 64


def trim_orphan_tool_results(messages: list[Message]) -> list[Message]:
    """Drop tool results whose call is not in an earlier message of the window.

    A context window must never start with (or contain) a tool result whose call was cut
    off: model APIs reject a ``tool`` message that answers no visible call.
    """
    seen_calls: set[str] = set()
    kept: list[Message] = []
    for message in messages:
        if message.role is Role.TOOL and message.tool_call_ref not in seen_calls:
            continue
        for call in message.tool_calls:
            if call.agui_id:
                seen_calls.add(call.agui_id)
        kept.append(message)
    return kept


class ContextOps(NestedOps):
    """``start_over``, ``compact`` and ``context_messages``."""

    async def start_over(self, chat_id: UUID) -> Message | None:
        """Draw a "start over" boundary at the end of the chat.

        Idempotent: with nothing after the last boundary (or an empty chat) nothing is
        added, and concurrent calls draw one line (the boundary's ``agui_id`` is derived
        from the seq it follows).

        Returns:
            The boundary in effect (new or existing), or ``None`` for an empty chat.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
        """
        page = await self.list_messages(chat_id, limit=1)
        if not page.items:
            return None
        last = page.items[-1]
        if last.kind is MessageKind.BOUNDARY:
            return last
        return await self._draw_line(
            chat_id, f"threadkeep:start_over:{last.seq}", Boundary(reason="start_over"), ""
        )

    async def compact(self, chat_id: UUID, summary: str, upto_seq: int) -> Message:
        """Append a compaction boundary whose ``content`` summarizes messages up to a seq.

        After it, ``context_messages`` gives the summary first, then the messages with
        ``seq > upto_seq``. Idempotent per ``upto_seq``: the same call again returns the
        stored boundary; another summary for the same ``upto_seq`` raises
        ``IdempotencyConflict``.

        Args:
            chat_id: The chat.
            summary: The text that replaces the compacted messages for the model.
            upto_seq: The last seq the summary covers; at most the chat's newest seq.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``upto_seq`` is beyond the newest message.
        """
        page = await self.list_messages(chat_id, limit=1)
        newest = page.items[-1].seq if page.items else None
        if newest is None or upto_seq > newest or upto_seq < 0:
            msg = f"upto_seq {upto_seq} is not a seq of chat {chat_id} (newest: {newest})"
            raise InvalidArgument(msg)
        return await self._draw_line(
            chat_id,
            f"threadkeep:compaction:{upto_seq}",
            Boundary(reason="compaction", upto_seq=upto_seq),
            summary,
        )

    async def _draw_line(
        self, chat_id: UUID, agui_id: str, marker: Boundary, content: str
    ) -> Message:
        """Append a boundary idempotently under ``agui_id``; return the one in effect.

        A stored boundary with that id that was hidden since (``delete_messages``, an
        "undo") is passed over: the next id in the chain (``agui_id:seq``) is tried, so
        the line is drawn again instead of the hidden one being returned. Concurrent
        callers walk the same chain and meet on one boundary.

        Raises:
            Conflict: If the chain is implausibly long (a driver returning hidden rows).
        """
        for _ in range(_MAX_REDRAWS):
            boundary = self.message_model(
                role=Role.SYSTEM,
                kind=MessageKind.BOUNDARY,
                boundary=marker,
                content=content,
                agui_id=agui_id,
            )
            line = await self.append_message(chat_id, boundary)
            if line.deleted_at is None:
                return line
            agui_id = f"{agui_id}:{line.seq}"
        raise Conflict(f"chat {chat_id}: {_MAX_REDRAWS} hidden boundaries under {agui_id!r}")

    async def context_messages(
        self, chat_id: UUID, *, max_messages: int | None = None
    ) -> list[Message]:
        """Return what the model gets: the messages after the last boundary, oldest first.

        After a compaction the boundary (its ``content`` is the summary) comes first,
        followed by the messages after its ``upto_seq``; a later "start over" line cuts
        again. Boundaries are otherwise left out, and tool results whose call was cut off
        are dropped (:func:`trim_orphan_tool_results`).

        Args:
            chat_id: The chat.
            max_messages: Keep only the newest this many messages (the summary, if any,
                stays first).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``max_messages`` is below 1.
        """
        if max_messages is not None and max_messages < 1:
            raise InvalidArgument("max_messages must be at least 1")
        await self._require_hot_chat(chat_id)
        last = await self._last_boundary(chat_id)
        head: list[Message] = []
        after = 0
        if last is not None and last.boundary is not None:
            if last.boundary.reason == "compaction" and last.boundary.upto_seq is not None:
                head, after = [last], last.boundary.upto_seq
            else:
                after = last.seq or 0
        body = await self._collect_after(chat_id, after, exclude=last)
        if max_messages is not None:
            body = body[-max_messages:]
        return head + trim_orphan_tool_results(body)

    async def _collect_after(
        self, chat_id: UUID, after: int, exclude: Message | None
    ) -> list[Message]:
        collected: list[Message] = []
        while batch := await self._messages_after(chat_id, after, _BATCH):
            for message in batch:
                if message.kind is MessageKind.BOUNDARY:
                    if exclude is None or message.message_id != exclude.message_id:
                        collected = []  # a later line cuts what came before it
                    continue
                collected.append(message)
            after = batch[-1].seq or after
        return collected
