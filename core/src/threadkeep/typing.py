"""Protocols and type aliases of threadkeep's public API, in one documented place.

Code that consumes chat history (an agent wrapper, a web handler, a test fake) should
depend on these structural types, not on :class:`threadkeep.Store`: any object with these
methods is accepted. Every ``Store`` satisfies
all of them; the contract suite checks drivers against the rules their docstrings state.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable
from uuid import UUID

from ._archive._objects import ObjectInfo
from ._models import Chat, Message, MessageInput, Reasoning, Share, ToolCall
from ._paging import ChatFilter, MessageFilter, Page, Viewer
from ._runs import Run, RunStatus, Step

__all__ = [
    "ArchiveStore",
    "ChatRepository",
    "JSONValue",
    "MessageInput",
    "MessageRepository",
    "RunRepository",
    "StoreLike",
]

JSONValue = dict[str, Any] | list[Any] | str | int | float | bool | None
"""A JSON-compatible value (metadata, step input/output, action payloads)."""


@runtime_checkable
class ChatRepository(Protocol):
    """Chats: one live chat per ``(user_id, thread_id)``, soft delete, keyset pages."""

    async def create_chat(
        self,
        user_id: str,
        thread_id: str,
        *,
        agent_id: str | None = None,
        channel: str | None = None,
        tenant_id: str | None = None,
        team_id: str | None = None,
        name: str | None = None,
        share: Share = ...,
        metadata: dict[str, Any] | None = None,
    ) -> Chat:
        """Return the live chat of the key, creating it; idempotent under concurrency."""
        ...

    async def get_chat(self, chat_id: UUID, *, viewer: Viewer | None = None) -> Chat:
        """Return a live chat; raise ``ChatNotFound`` if missing, deleted or not visible."""
        ...

    async def find_chat(
        self, user_id: str, thread_id: str, *, tenant_id: str | None = None
    ) -> Chat | None:
        """Return the live chat of ``(tenant_id, user_id, thread_id)``, or ``None``."""
        ...

    async def rename_chat(self, chat_id: UUID, name: str) -> Chat:
        """Set the chat's name; raise ``ChatNotFound`` if it is not live."""
        ...

    async def delete_chat(self, chat_id: UUID) -> Chat:
        """Soft-delete; every read path hides the chat. Raise ``ChatNotFound`` if not live."""
        ...

    async def restore_chat(self, chat_id: UUID) -> Chat:
        """Bring back a deleted (or archived) chat; ``Conflict`` if its key is taken."""
        ...

    async def list_chats(
        self,
        chat_filter: ChatFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Chat]:
        """Return a page of chats, newest first; ``limit`` 1..200 (capped), signed cursors."""
        ...


@runtime_checkable
class MessageRepository(Protocol):
    """Messages with nested tool calls and reasonings; ``seq`` is the only order."""

    async def append_message(self, chat_id: UUID, message: MessageInput) -> Message:
        """Append; idempotent on ``agui_id`` (``IdempotencyConflict`` on a different payload)."""
        ...

    async def append_messages(
        self, chat_id: UUID, messages: Sequence[MessageInput]
    ) -> list[Message]:
        """Append a batch, all or nothing."""
        ...

    async def get_message(self, message_id: UUID) -> Message:
        """Return a visible message; raise ``MessageNotFound`` otherwise."""
        ...

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        """Return the chat's visible message with this client id, or ``None``."""
        ...

    async def update_message(self, message_id: UUID, /, **changes: Any) -> Message:
        """Change fields of a visible message (compare-and-set on its revision)."""
        ...

    async def delete_messages(self, chat_id: UUID, message_ids: Sequence[UUID]) -> int:
        """Hide messages; return how many were visible."""
        ...

    async def append_tool_call(self, message_id: UUID, tool_call: ToolCall) -> ToolCall:
        """Append a tool call to a message; idempotent on its ``agui_id``."""
        ...

    async def update_tool_call(self, tool_call_id: UUID, /, **changes: Any) -> ToolCall:
        """Change a tool call; raise ``MessageNotFound`` if no visible message holds it."""
        ...

    async def get_tool_call_by_agui_id(self, chat_id: UUID, agui_id: str) -> ToolCall | None:
        """Return the chat's visible tool call with this client id, or ``None``."""
        ...

    async def append_reasoning(self, message_id: UUID, reasoning: Reasoning) -> Reasoning:
        """Append a reasoning to a message; idempotent on its ``agui_id``."""
        ...

    async def update_reasoning(self, reasoning_id: UUID, /, **changes: Any) -> Reasoning:
        """Change a reasoning; raise ``MessageNotFound`` if no visible message holds it."""
        ...

    async def list_messages(
        self,
        chat_id: UUID,
        *,
        limit: int = 50,
        cursor: str | None = None,
        message_filter: MessageFilter | None = None,
        viewer: Viewer | None = None,
    ) -> Page[Message]:
        """Return a page of history, newest page first, items oldest to newest."""
        ...

    async def get_last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """Map each hot chat with a visible message to its newest (archived: left out)."""
        ...

    async def start_over(self, chat_id: UUID) -> Message | None:
        """Draw a "start over" boundary (idempotent)."""
        ...

    async def compact(self, chat_id: UUID, summary: str, upto_seq: int) -> Message:
        """Append a compaction boundary carrying ``summary``."""
        ...

    async def context_messages(
        self, chat_id: UUID, *, max_messages: int | None = None
    ) -> list[Message]:
        """Return what the model gets: messages after the last boundary."""
        ...


@runtime_checkable
class RunRepository(Protocol):
    """Steps and runs: resume, compare-and-set claims, leases (capability ``steps``)."""

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """Insert or replace steps atomically; new steps get a seq."""
        ...

    async def get_steps(self, chat_id: UUID, run_id: str) -> list[Step]:
        """Return a run's steps in order."""
        ...

    async def get_last_incomplete_step(self, chat_id: UUID) -> Step | None:
        """Return the chat's newest step that is not completed."""
        ...

    async def get_stack_path(self, stack_id: str) -> list[str]:
        """Return stack ids from the root call to ``stack_id``."""
        ...

    async def start_run(
        self, chat_id: UUID, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Record that ``owner`` executes the run under a lease."""
        ...

    async def claim_run(
        self, chat_id: UUID, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Take an ended or expired run to resume it; ``Conflict`` for a second claimer."""
        ...

    async def finish_run(
        self,
        chat_id: UUID,
        run_id: str,
        *,
        owner: str,
        status: RunStatus,
        error: str | None = None,
    ) -> Run:
        """End the owner's active run."""
        ...

    async def sweep_expired_runs(self, *, limit: int = 100) -> list[Run]:
        """Mark runs whose lease expired as interrupted."""
        ...


@runtime_checkable
class StoreLike(ChatRepository, MessageRepository, Protocol):
    """A chat and message repository that is opened and closed (every ``Store``)."""

    async def open(self) -> Any:
        """Connect; return the store."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class ArchiveStore(Protocol):
    """Object storage for cold bundles (``file:///path``, ``s3://bucket/prefix``).

    Keys are relative to the store's root URL (``check_key`` rules). Every method maps
    native errors to ``BackendUnavailable`` (unreachable, timeouts: retry) or
    ``ArchiveError`` (refused, misconfigured, missing object). The archive section of the
    contract suite (``threadkeep.testing_archive.ArchiveStoreContract``) checks each rule.
    """

    schemes: ClassVar[tuple[str, ...]]
    url: str

    async def open(self) -> Any:
        """Connect; return the store. ``BackendUnavailable`` if it cannot be reached."""
        ...

    async def close(self) -> None:
        """Release connections; idempotent."""
        ...

    def ref_for(self, key: str) -> str:
        """Return the URL of the object at ``key`` (root URL + ``/`` + key)."""
        ...

    async def put(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
    ) -> ObjectInfo:
        """Store the concatenated ``chunks`` at ``key``, streamed, with string ``metadata``.

        Create-only by default: ``Conflict`` if an object exists at ``key``. With
        ``if_match``, replace only the object whose etag is ``if_match`` (``Conflict`` if
        it is missing or another). Nothing is visible at ``key`` until the whole body is
        stored; a failed put leaves what was there before.
        """
        ...

    def get(self, key: str) -> AsyncIterator[bytes]:
        """Yield the object's bytes in chunks; ``ArchiveError`` if there is no object."""
        ...

    async def head(self, key: str) -> ObjectInfo | None:
        """Return the object's size, etag and metadata, or ``None`` if there is none."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove the object; return whether one was there. Idempotent."""
        ...

    def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield every object whose key starts with ``prefix``, in key order."""
        ...


if TYPE_CHECKING:
    from ._store import Store

    def _store_satisfies_the_protocols(store: Store) -> tuple[StoreLike, RunRepository]:
        # Checked by mypy only: a Store signature drifting from a protocol fails type checks.
        return store, store
