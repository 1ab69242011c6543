"""``Store``: the one public face of a store; it holds a driver and delegates by concern."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, final
from uuid import UUID

from ._capabilities import Capabilities
from ._clock import Clock
from ._content import DEFAULT_MAX_MESSAGE_BYTES, PreparedMessage
from ._corrupt import CorruptRecordsPolicy
from ._driver import Driver
from ._errors import InvalidArgument
from ._models import Chat, Message, MessageInput, Reasoning, Share, ToolCall
from ._paging import DEFAULT_PAGE_LIMIT, ChatFilter, MessageFilter, Page, Viewer
from ._previews import DEFAULT_PREVIEW_CHARS, ChatPreview, PreviewOps
from ._primitives import Primitives
from ._runs import Run, RunStatus, Step
from ._schema_migrations import SchemaMigrations
from ._store_chat_load import ChatLoad, ChatLoadOps, ChatLoadResult
from ._store_chats import ChatOps, ErasureReceipt
from ._store_context import ContextOps
from ._store_copy import CopyOps
from ._store_core import StoreContext
from ._store_load import DEFAULT_LOAD_BATCH, LoadInput, LoadOps, LoadReport
from ._store_messages import MessageOps
from ._store_nested import NestedOps
from ._store_run_batch import RunBatchOps
from ._store_runs import RunOps
from ._store_steps import StepOps

__all__ = ["Store"]


@final
class Store:
    """Durable chat history on one backend: the public API, over a driver it holds.

    A store is opened and closed around use::

        async with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
            chat = await store.create_chat("user-1", "thread-1")
            await store.append_message(chat.chat_id, Message(role="user", content="hi"))
            page = await store.list_messages(chat.chat_id)

    The public methods (chats, messages, nested tool calls and reasonings, boundaries and
    context, steps and runs) implement the store's rules once for every driver: argument and
    content checks, signed cursors, idempotency checks, compare-and-set retries. The store
    holds a driver (:attr:`driver`, an object implementing
    :class:`threadkeep.driver.Driver`, usually built from a URL by :func:`open_store`); its
    logic lives in components by concern that share one context, and ``Store`` is final:
    a driver plugs in by being held, never by subclassing (``docs/writing-a-driver.md``).

    Every method may raise ``BackendUnavailable`` when the backend fails, and every id
    argument accepts a ``UUID`` or its text form.

    Args:
        driver: The driver (an object implementing :class:`threadkeep.driver.Driver`).
        cursor_secret: Secret that signs cursors (at least 16 bytes). Without one the store
            keeps a generated secret, so processes sharing the store accept each other's
            cursors.
        clock: Source of timestamps (tz-aware); timestamps are informational, ``seq`` orders.
        max_message_bytes: Limit on a message's payload in UTF-8 bytes (default 16 MiB).
        message_model: The ``Message`` subclass messages are read back as.
        chat_model: The ``Chat`` subclass chats are read back as.
        auto_migrate: ``False``: ``open()`` never changes the schema; a store whose schema
            is older than the code raises ``SchemaOutdated`` naming ``threadkeep migrate``
            (for an application user that may not run DDL). Default ``True``; also the
            ``auto_migrate`` setting (``THREADKEEP_AUTO_MIGRATE``).
        corrupt_records: ``"raise"`` (default) or ``"skip"``: what page reads do on a
            damaged row (``CorruptRecord``).

    Raises:
        InvalidArgument: If an option is unknown or of the wrong kind, or the cursor secret
            is too short.
        TypeError: If ``driver`` is not a driver, or its ``capabilities`` declare
            ``steps``/``archive`` without the protocol's methods.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        msg = (
            "threadkeep.Store is final: a driver is held (Store(driver)), never a subclass; "
            "see docs/writing-a-driver.md"
        )
        raise TypeError(msg)

    def __init__(
        self,
        driver: Driver,
        *,
        cursor_secret: str | bytes | None = None,
        clock: Clock | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        message_model: type[Message] = Message,
        chat_model: type[Chat] = Chat,
        auto_migrate: bool = True,
        corrupt_records: CorruptRecordsPolicy = "raise",
        **unknown: Any,
    ) -> None:
        ctx = StoreContext(
            driver,
            cursor_secret=cursor_secret,
            clock=clock,
            max_message_bytes=max_message_bytes,
            message_model=message_model,
            chat_model=chat_model,
            auto_migrate=auto_migrate,
            corrupt_records=corrupt_records,
            unknown=unknown,
        )
        self._ctx = ctx
        self._chats = ctx.chats = ChatOps(ctx)
        self._messages = ctx.messages = MessageOps(ctx)
        self._nested = ctx.nested = NestedOps(ctx)
        self._context = ctx.context = ContextOps(ctx)
        self._steps = ctx.steps = StepOps(ctx)
        self._runs = ctx.runs = RunOps(ctx)
        self._run_batch = ctx.run_batch = RunBatchOps(ctx)
        self._previews = ctx.previews = PreviewOps(ctx)
        self._load = ctx.load = LoadOps(ctx)
        self._copy = ctx.copy = CopyOps(ctx)
        self._chat_load = ChatLoadOps(ctx)
        # Each public method below delegates to its component; binding the component's
        # method on the instance once saves that extra call on every call (the class
        # methods stay what documentation, introspection and threadkeep.sync read).
        for name, part in _DELEGATED:
            setattr(self, name, getattr(getattr(self, part), name))

    # -- the driver and the settings --------------------------------------------------

    @property
    def driver(self) -> Driver:
        """The driver this store holds (for operators and tests: driver-specific extras)."""
        return self._ctx.raw_driver

    @property
    def primitives(self) -> Primitives:
        """The driver's primitives as the store calls them, derived defaults included.

        For code at the driver level (the archiver, the contract suite's back door):
        every primitive of :mod:`threadkeep.driver` is an attribute, whether the driver
        implements it or core derives it (or it raises ``CapabilityNotSupported``).
        """
        return self._ctx.driver

    @property
    def capabilities(self) -> Capabilities:
        """What this store can do (``steps``/``archive``: the driver's protocols).

        The other flags are the properties the driver declares in its ``capabilities``.
        """
        return self._ctx.capabilities

    @property
    def schemes(self) -> tuple[str, ...]:
        """The URL schemes the driver serves (its ``schemes``; empty if it names none)."""
        return tuple(getattr(self._ctx.raw_driver, "schemes", ()))

    @property
    def url(self) -> str:
        """The driver's URL (its ``url``; empty if it has none)."""
        return self._ctx.url

    @property
    def auto_migrate(self) -> bool:
        """May ``open()`` upgrade the schema (drivers that have one)?"""
        return self._ctx.auto_migrate

    @property
    def corrupt_records(self) -> CorruptRecordsPolicy:
        """``"raise"`` or ``"skip"``: what page reads do on a damaged row (``CorruptRecord``)."""
        return self._ctx.corrupt_records

    @property
    def max_message_bytes(self) -> int:
        """Limit on a message's payload in UTF-8 bytes."""
        return self._ctx.records.max_message_bytes

    @property
    def message_model(self) -> type[Message]:
        """The ``Message`` subclass messages are read back as."""
        return self._ctx.records.message_model

    @property
    def chat_model(self) -> type[Chat]:
        """The ``Chat`` subclass chats are read back as."""
        return self._ctx.records.chat_model

    def now(self) -> datetime:
        """Return the store clock's current instant, in UTC.

        Raises:
            InvalidArgument: If the clock returns a naive datetime.
        """
        return self._ctx.now()

    def prepare(self, message: Message) -> PreparedMessage:
        """Check and encode a message with this store's limits, as an append does.

        ``load_messages`` takes the result as it is, so a caller that checks a whole batch
        first (an importer checks a file before writing any of it) encodes it once.

        Args:
            message: The message to write.

        Returns:
            The message with its JSON body and idempotency fingerprint.

        Raises:
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            PayloadTooLarge: If the payload is over ``max_message_bytes`` (UTF-8 bytes of
                text, not of JSON) or the rest over ``ENVELOPE_ALLOWANCE_BYTES``.
            InvalidArgument: If ``message`` is not a :class:`Message` (validate a mapping
                first: ``Message.model_validate(mapping)``).
        """
        given: object = message  # typed callers pass a Message; untyped ones may not
        if not isinstance(given, Message):
            msg = (
                f"prepare takes a Message, not {type(given).__name__} (validate a mapping "
                "first: Message.model_validate(mapping))"
            )
            raise InvalidArgument(msg)
        return self._ctx.records.prepare(message)

    # -- lifecycle --------------------------------------------------------------------

    def schema_migrations(self) -> SchemaMigrations | None:
        """Return the schema upgrades of this store's database, or ``None`` if it has none.

        Works on an unopened store (``threadkeep migrate`` uses it): the driver's, when it
        implements :class:`threadkeep.driver.MigratingDriver`.

        Returns:
            A :class:`threadkeep.SchemaMigrations`, or ``None``.
        """
        return self._ctx.driver.schema_migrations()

    async def open(self) -> Self:
        """Connect (creating or migrating the schema) and load the cursor secret.

        Returns:
            The store itself, so ``store = await open_store(url).open()`` works.

        Raises:
            BackendUnavailable: If the backend cannot be reached.
        """
        await self._ctx.open()
        return self

    async def close(self) -> None:
        """Release connections. Idempotent; the store can be opened again.

        Raises:
            BackendUnavailable: If the backend fails while closing (the store is closed
                all the same).
        """
        await self._ctx.close()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def is_open(self) -> bool:
        """Whether :meth:`open` has succeeded and :meth:`close` not been called since."""
        return self._ctx.is_open

    # -- chats ------------------------------------------------------------------------------

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
        share: Share = Share.PRIVATE,
        metadata: dict[str, Any] | None = None,
    ) -> Chat:
        """Return the live chat of ``(tenant_id, user_id, thread_id)``, creating it if none.

        Idempotent under concurrency: N parallel calls for one key return one chat and never
        raise for the race. When the chat exists, the other arguments are
        ignored and the stored chat is returned unchanged. After the chat is deleted, the
        same key creates a new chat. The tenant is part of the key: a caller naming tenant
        B never gets tenant A's chat (nor a chat without a tenant), but B's own.

        Args:
            user_id: The owner (non-empty).
            thread_id: The caller's thread key (non-empty), for example the AG-UI thread id.
            agent_id: The agent the chat talks to.
            channel: Where the chat happens (``"widget"``, ``"telegram"``, ``"api"``...).
            tenant_id: The tenant, part of the chat's identity (``None`` is a tenant of its
                own); filters never return another tenant's chats.
            team_id: The owner's team (used when ``share`` is ``team``).
            name: A display name.
            share: ``private`` (owner only) or ``team`` (a :class:`Share` or its value).
            metadata: JSON-compatible application data (a dict; no NaN or infinity).

        Returns:
            The stored chat, with ``chat_id``, ``seq`` and timestamps set.

        Raises:
            InvalidArgument: If an argument does not validate (for example an empty id), or
                an id is not a ``str``, has surrounding whitespace or holds a control
                character (``as_key``), or the name is not a ``str``.
            InvalidContent: If a string holds a lone surrogate, or metadata holds NaN or
                infinity.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.create_chat(
            user_id,
            thread_id,
            agent_id=agent_id,
            channel=channel,
            tenant_id=tenant_id,
            team_id=team_id,
            name=name,
            share=share,
            metadata=metadata,
        )

    async def get_chat(
        self,
        chat_id: UUID | str,
        *,
        viewer: Viewer | Mapping[str, Any] | None = None,
        include_deleted: bool = False,
    ) -> Chat:
        """Return a live chat (active or archived).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            viewer: When given (a :class:`Viewer` or a mapping of its fields), the chat
                must be visible to this viewer (:func:`chat_visible_to`).
            include_deleted: ``True`` (an operator's read): a soft-deleted chat is
                returned too, with its ``deleted_at`` set, as ``restore_chat`` can bring
                it back; a purged chat is still not found.

        Returns:
            The chat as stored (an archived chat is not rehydrated).

        Raises:
            ChatNotFound: If the chat does not exist, is deleted (unless
                ``include_deleted``), or is not visible to ``viewer``.
            InvalidArgument: If ``chat_id`` is not an id, ``viewer`` does not validate or
                ``include_deleted`` is not a ``bool``.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.get_chat(chat_id, viewer=viewer, include_deleted=include_deleted)

    async def find_chat(
        self, user_id: str, thread_id: str, *, tenant_id: str | None = None
    ) -> Chat | None:
        """Return the live chat of ``(tenant_id, user_id, thread_id)``, or ``None``.

        Args:
            user_id: The owner (non-empty).
            thread_id: The caller's thread key (non-empty).
            tenant_id: The tenant (part of the chat's identity). ``None`` finds only a chat
                without a tenant: a tenant's chat is never found without naming it.

        Returns:
            The live chat (active or archived), or ``None`` if there is none (deleted chats
            are not found).

        Raises:
            InvalidArgument: If ``user_id``, ``thread_id`` or ``tenant_id`` is not a clean,
                non-empty ``str`` (``as_key``).
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.find_chat(user_id, thread_id, tenant_id=tenant_id)

    async def update_chat(self, chat_id: UUID | str, /, **changes: Any) -> Chat:
        """Change a live chat's descriptive fields.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            **changes: Any of ``name``, ``agent_id``, ``channel``, ``team_id``, ``share``,
                ``metadata`` (replaced whole). ``tenant_id`` is part of the chat's identity
                (like ``user_id`` and ``thread_id``) and does not change.

        Returns:
            The updated chat (``revision`` and ``updated_at`` advanced).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id, a field is not changeable or a
                value does not validate.
            InvalidContent: If a string holds a lone surrogate, or metadata NaN/infinity.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.update_chat(chat_id, **changes)

    async def rename_chat(self, chat_id: UUID | str, name: str | None) -> Chat:
        """Set a live chat's display name (``update_chat(chat_id, name=name)``).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            name: The new name, or ``None`` to clear it.

        Returns:
            The updated chat.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id or ``name`` is not text.
            InvalidContent: If the name holds a lone surrogate.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.rename_chat(chat_id, name)

    async def delete_chat(self, chat_id: UUID | str) -> Chat:
        """Soft-delete a chat: every read path hides it and its messages from now on.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The deleted chat (``deleted_at`` set). ``restore_chat`` brings it back; ``purge``
            removes it for good.

        Raises:
            ChatNotFound: If the chat does not exist or is already deleted.
            InvalidArgument: If ``chat_id`` is not an id.
            Conflict: If the chat kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.delete_chat(chat_id)

    async def restore_chat(self, chat_id: UUID | str) -> Chat:
        """Bring back a soft-deleted chat, and rehydrate it if it is archived.

        A live, active chat is returned unchanged.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The live, active chat.

        Raises:
            ChatNotFound: If the chat does not exist (or was purged).
            Conflict: If another live chat now holds its ``(tenant_id, user_id, thread_id)``.
            InvalidArgument: If ``chat_id`` is not an id.
            ArchiveError / ArchiveIntegrityError / UnknownDriver: If its bundle cannot be
                read back (see ``docs/archive.md``).
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.restore_chat(chat_id)

    async def list_chats(
        self,
        chat_filter: ChatFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
    ) -> Page[Chat]:
        """Return one page of chats, newest created first (keyset on the store's chat seq).

        Args:
            chat_filter: Which chats (a :class:`ChatFilter` or a mapping of its fields;
                default: every live chat). Never crosses ``tenant_id`` when one is given.
            limit: Chats per page (count); default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page, issued for the same filter.

        Returns:
            ``Page[Chat]``: ``items`` run oldest to newest within the page, ``next_cursor``
            walks to older chats, ``has_more`` says whether there are any.

        Raises:
            InvalidArgument: If ``limit`` is not an integer of at least 1, or the filter
                does not validate (for example a naive datetime).
            InvalidCursor: If the cursor is foreign, altered or for another filter.
            BackendUnavailable: If the backend fails.
        """
        return await self._chats.list_chats(chat_filter, limit=limit, cursor=cursor)

    async def purge(self, deleted_before: datetime) -> int:
        """Remove for good every chat soft-deleted before ``deleted_before``.

        A purged chat's archived bundle (named by its ``archive_ref``) is deleted first.

        Args:
            deleted_before: The cutoff, a timezone-aware ``datetime``: chats whose
                ``deleted_at`` is earlier go (the retention period is the caller's choice,
                for example ``datetime.now(UTC) - timedelta(days=30)``).

        Returns:
            How many chats were removed (their messages, steps, runs and bundles go with
            them).

        Raises:
            InvalidArgument: If ``deleted_before`` is not an aware ``datetime``.
            BackendUnavailable / ArchiveError: If a bundle cannot be deleted; that chat
                and the ones after it stay, so run ``purge`` again.
        """
        return await self._chats.purge(deleted_before)

    async def erase_user(self, user_id: str) -> ErasureReceipt:
        """Remove every chat of a person (live, deleted and archived) and all it holds.

        Each chat's bundle goes first, then its hot records, so a failure leaves something
        a retry finds.

        Args:
            user_id: The person (non-empty), as chats' ``user_id``.

        Returns:
            An :class:`ErasureReceipt` whose ``stores`` always holds ``"hot"`` and
            ``"archive"`` counts (zeros for an unknown person), each record counted once.

        Raises:
            InvalidArgument: If ``user_id`` is not a non-empty ``str``.
            BackendUnavailable / ArchiveError / UnknownDriver: If a bundle or the backend
                cannot be reached; what was erased stays erased, so run it again.
        """
        return await self._chats.erase_user(user_id)

    # -- messages ---------------------------------------------------------------------------

    async def append_message(self, chat_id: UUID | str, message: MessageInput) -> Message:
        """Append one message; :meth:`append_messages` with a batch of one.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            message: A ``Message`` (or subclass) or a mapping of its fields
                (:data:`threadkeep.typing.MessageInput`).

        Returns:
            The stored message (``seq``, ``revision``, timestamps set), or the message
            already stored under its ``agui_id`` when the payload is equal.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            IdempotencyConflict: If its ``agui_id`` is stored with a different payload.
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            PayloadTooLarge: If it is over ``max_message_bytes`` (payload, UTF-8 bytes) or
                its other fields over 1 MiB of JSON; nothing is written.
            InvalidArgument: If ``chat_id`` is not an id, the message does not validate,
                or it is a compaction boundary that breaks ``compact``'s rules (see
                :meth:`append_messages`).
            BackendUnavailable: If the backend fails; nothing is written.
        """
        return await self._messages.append_message(chat_id, message)

    async def append_messages(
        self, chat_id: UUID | str, messages: Sequence[MessageInput]
    ) -> list[Message]:
        """Append messages in order, all or nothing.

        The store assigns each a ``seq`` strictly greater than every earlier one of the chat.
        A message whose ``agui_id`` is already stored in the chat is not stored again: the
        stored message is returned in its place when the payload is equal (ids the store
        generated are not compared), so retries never duplicate. An archived chat is
        restored first.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            messages: A list or tuple of ``Message`` instances (subclasses keep their
                fields) or mappings. ``created_at`` may be given (tz-aware,
                informational); ``seq`` is ignored. The payload of each (content, tool-call
                arguments and results, reasoning) is at most ``max_message_bytes`` UTF-8
                bytes (default 16 MiB); everything else at most 1 MiB of JSON.

        Returns:
            The stored messages, aligned with ``messages``.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            IdempotencyConflict: If an ``agui_id`` is stored with a different payload (or
                repeats in the batch with different payloads); nothing is written.
            InvalidContent: If a string holds a lone surrogate, or a float is NaN or
                infinite; nothing is written.
            PayloadTooLarge: If a message is over the limits above; nothing is written.
            InvalidArgument: If ``chat_id`` is not an id, ``messages`` is not a list, a
                message does not validate, or a compaction boundary breaks ``compact``'s
                rules (its ``upto_seq`` is missing, below the current cut, or beyond the
                newest seq stored before the batch; a retry of a stored boundary is
                a retry, not held to them); nothing is written.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails; nothing is written.
        """
        return await self._messages.append_messages(chat_id, messages)

    async def get_message(self, message_id: UUID | str) -> Message:
        """Return a visible message by id (an archived chat holding it is rehydrated).

        Args:
            message_id: The message (a ``UUID`` or its text form).

        Returns:
            The message, as the store's ``message_model``.

        Raises:
            MessageNotFound: If it does not exist, is hidden, or its chat is deleted.
            InvalidArgument: If ``message_id`` is not an id.
            ArchiveError / ArchiveIntegrityError: If its archived chat cannot be read back.
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.get_message(message_id)

    async def get_message_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Message | None:
        """Return the chat's visible message with this client id, or ``None``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            agui_id: The client's message id, for example the AG-UI id.

        Returns:
            The message, or ``None`` if the chat holds no visible message with that id
            (also when the chat does not exist or is deleted).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``agui_id`` is not a ``str``.
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.get_message_by_agui_id(chat_id, agui_id)

    async def update_message(self, message_id: UUID | str, /, **changes: Any) -> Message:
        """Change fields of a visible message (content, status, in_progress, metadata, ...).

        Concurrent updates are serialized by a compare-and-set on the message's revision,
        retried a bounded number of times.

        Args:
            message_id: The message (a ``UUID`` or its text form).
            **changes: New field values; not any of :data:`IMMUTABLE_MESSAGE_FIELDS`.

        Returns:
            The stored message (``revision`` incremented).

        Raises:
            MessageNotFound: If the message is not visible.
            InvalidArgument: If ``message_id`` is not an id, a field is immutable or a
                value does not validate.
            InvalidContent / PayloadTooLarge: As for appends; nothing is written.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.update_message(message_id, **changes)

    async def delete_messages(self, chat_id: UUID | str, message_ids: Sequence[UUID | str]) -> int:
        """Hide single messages (edits, redactions): every read path skips them from now on.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            message_ids: A list of message ids (``UUID`` or text each); ids of other chats,
                unknown or already hidden ones are skipped.

        Returns:
            How many of them were visible before (a count).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If an id is malformed or ``message_ids`` is not a list.
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.delete_messages(chat_id, message_ids)

    async def list_messages(
        self,
        chat_id: UUID | str,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        message_filter: MessageFilter | Mapping[str, Any] | None = None,
        viewer: Viewer | Mapping[str, Any] | None = None,
    ) -> Page[Message]:
        """Return one page of a chat's history, boundaries included.

        The first page is the newest; items run oldest to newest; ``next_cursor`` walks to
        older messages. Keyset on ``seq``: a page 500,000 messages deep costs what the first
        does, and a walk yields every message once even while messages are appended.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            limit: Messages per page (count); default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page of the same chat and filter.
            message_filter: Roles, kinds, run, request or block to keep: a
                :class:`MessageFilter` or a mapping of its fields.
            viewer: When given (a :class:`Viewer` or a mapping), the chat must be visible
                to this viewer.

        Returns:
            ``Page[Message]``: ``items`` oldest to newest, ``next_cursor`` to older ones,
            ``has_more``.

        Raises:
            ChatNotFound: If the chat does not exist, is deleted or is not visible.
            InvalidArgument: If ``chat_id`` is not an id, ``limit`` is not an integer of
                at least 1, or the filter or viewer does not validate.
            InvalidCursor: If the cursor is foreign, altered, or for another chat/filter.
            CorruptRecord: If a row of the page is damaged (on a ``corrupt_records="skip"``
                store the page leaves it out and lists it in ``Page.corrupt`` instead).
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.list_messages(
            chat_id, limit=limit, cursor=cursor, message_filter=message_filter, viewer=viewer
        )

    async def get_last_messages(self, chat_ids: Sequence[UUID | str]) -> dict[UUID, Message]:
        """Map each hot chat of ``chat_ids`` that has a visible message to its newest one.

        One query for any number of chats (a chat list's previews). Deleted, unknown and
        archived chats are left out: an archived chat's messages are in the archive, and
        rehydrating every listed chat to show one preview would undo archiving (see
        ``docs/archive.md``). Read an archived chat with :meth:`list_messages`, which
        brings it back.

        Args:
            chat_ids: A list of chat ids (``UUID`` or text each); repeats are read once.

        Returns:
            ``{chat_id (UUID): newest visible message}``, for hot chats only.

        Raises:
            InvalidArgument: If ``chat_ids`` is not a list or an id is malformed.
            BackendUnavailable: If the backend fails.
        """
        return await self._messages.get_last_messages(chat_ids)

    # -- tool calls and reasonings ----------------------------------------------------------

    async def append_tool_call(
        self, message_id: UUID | str, tool_call: ToolCall | Mapping[str, Any]
    ) -> ToolCall:
        """Append a tool call to a visible message.

        Idempotent on ``agui_id`` within the message: an equal tool call already there is
        returned; a different one with the same ``agui_id`` raises ``IdempotencyConflict``.

        Args:
            message_id: The message (a ``UUID`` or its text form).
            tool_call: A :class:`ToolCall` (or subclass) or a mapping of its fields;
                ``arguments`` is stored byte for byte.

        Returns:
            The stored tool call (``message_id`` set).

        Raises:
            MessageNotFound: If the message is not visible.
            IdempotencyConflict: As above.
            InvalidArgument: If ``message_id`` is not an id or the tool call does not
                validate.
            InvalidContent / PayloadTooLarge: If the grown message cannot be stored.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.append_tool_call(message_id, tool_call)

    async def append_reasoning(
        self, message_id: UUID | str, reasoning: Reasoning | Mapping[str, Any]
    ) -> Reasoning:
        """Append a reasoning to a visible message (idempotent on ``agui_id``).

        Args:
            message_id: The message (a ``UUID`` or its text form).
            reasoning: A :class:`Reasoning` (or subclass) or a mapping of its fields.

        Returns:
            The stored reasoning (``message_id`` set).

        Raises:
            MessageNotFound: If the message is not visible.
            IdempotencyConflict: If its ``agui_id`` is stored with another payload.
            InvalidArgument: If ``message_id`` is not an id or the reasoning does not
                validate.
            InvalidContent / PayloadTooLarge: If the grown message cannot be stored.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.append_reasoning(message_id, reasoning)

    async def update_tool_call(self, tool_call_id: UUID | str, /, **changes: Any) -> ToolCall:
        """Change fields of a tool call (``arguments``, ``content``, ``status``, ``name``...).

        Args:
            tool_call_id: The tool call (a ``UUID`` or its text form).
            **changes: New field values; not ``tool_call_id``, ``agui_id`` or
                ``message_id``.

        Returns:
            The stored tool call.

        Raises:
            MessageNotFound: If no visible message holds the tool call.
            InvalidArgument: If ``tool_call_id`` is not an id, an id field is changed or a
                value does not validate.
            InvalidContent / PayloadTooLarge: If the changed message cannot be stored.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.update_tool_call(tool_call_id, **changes)

    async def update_reasoning(self, reasoning_id: UUID | str, /, **changes: Any) -> Reasoning:
        """Change fields of a reasoning (``content``, ``status``, ``encrypted_value``...).

        Args:
            reasoning_id: The reasoning (a ``UUID`` or its text form).
            **changes: New field values; not ``reasoning_id``, ``agui_id`` or
                ``message_id``.

        Returns:
            The stored reasoning.

        Raises:
            MessageNotFound: If no visible message holds the reasoning.
            InvalidArgument: If ``reasoning_id`` is not an id, an id field is changed or a
                value does not validate.
            InvalidContent / PayloadTooLarge: If the changed message cannot be stored.
            Conflict: If the message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.update_reasoning(reasoning_id, **changes)

    async def get_tool_call(self, tool_call_id: UUID | str) -> ToolCall:
        """Return a tool call by id (an archived chat holding it is rehydrated).

        Args:
            tool_call_id: The tool call (a ``UUID`` or its text form).

        Returns:
            The tool call, ``message_id`` naming the message that holds it.

        Raises:
            MessageNotFound: If no visible message holds it.
            InvalidArgument: If ``tool_call_id`` is not an id.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.get_tool_call(tool_call_id)

    async def get_reasoning(self, reasoning_id: UUID | str) -> Reasoning:
        """Return a reasoning by id (an archived chat holding it is rehydrated).

        Args:
            reasoning_id: The reasoning (a ``UUID`` or its text form).

        Returns:
            The reasoning, ``message_id`` naming the message that holds it.

        Raises:
            MessageNotFound: If no visible message holds it.
            InvalidArgument: If ``reasoning_id`` is not an id.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.get_reasoning(reasoning_id)

    async def get_tool_call_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> ToolCall | None:
        """Return the chat's visible tool call with this client id (newest), or ``None``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            agui_id: The client's tool-call id.

        Returns:
            The tool call in the newest visible message holding one with that id, or
            ``None`` (also when the chat does not exist or is deleted).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``agui_id`` is not a ``str``.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.get_tool_call_by_agui_id(chat_id, agui_id)

    async def get_reasoning_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Reasoning | None:
        """Return the chat's visible reasoning with this client id (newest), or ``None``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            agui_id: The client's reasoning id.

        Returns:
            The reasoning in the newest visible message holding one with that id, or
            ``None`` (also when the chat does not exist or is deleted).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``agui_id`` is not a ``str``.
            BackendUnavailable: If the backend fails.
        """
        return await self._nested.get_reasoning_by_agui_id(chat_id, agui_id)

    # -- boundaries and context -------------------------------------------------------------

    async def start_over(self, chat_id: UUID | str) -> Message | None:
        """Draw a "start over" boundary at the end of the chat.

        Idempotent: when the newest message is already a "start over" line (or the chat
        is empty) nothing is added, and concurrent calls draw one line (the boundary's
        ``agui_id`` is derived from the seq it follows). A compaction boundary as the
        newest message does not count: its summary still reaches the model, so a line is
        drawn after it and ``context_messages`` is then empty.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The "start over" line in effect (new or existing), or ``None`` for an empty
            chat.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails.
        """
        return await self._context.start_over(chat_id)

    async def compact(self, chat_id: UUID | str, summary: str, upto_seq: int) -> Message:
        """Append a compaction boundary whose ``content`` summarizes messages up to a seq.

        After it, ``context_messages`` gives the summary first, then the messages with
        ``seq > upto_seq``. The cut only moves forward: ``upto_seq`` may not be below the
        current cut (the ``upto_seq`` of the compaction in effect, or the seq of the last
        "start over" line). Idempotent per ``upto_seq``: the same call again returns the
        stored boundary; another summary for the same ``upto_seq`` raises
        ``IdempotencyConflict``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            summary: The text that replaces the compacted messages for the model (not
                empty or only whitespace).
            upto_seq: The last seq the summary covers: at least 1, at least the current
                cut, at most the chat's newest seq.

        Returns:
            The compaction boundary (new, or the equal one already stored).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id, ``summary`` is empty, or
                ``upto_seq`` is not an integer in the range above; nothing is written.
            IdempotencyConflict: If a compaction up to ``upto_seq`` holds another summary.
            InvalidContent / PayloadTooLarge: If the summary cannot be stored.
            Conflict: If the chat changed state (archived meanwhile) during the append.
            BackendUnavailable: If the backend fails.
        """
        return await self._context.compact(chat_id, summary, upto_seq)

    async def context_messages(
        self, chat_id: UUID | str, *, max_messages: int | None = None
    ) -> list[Message]:
        """Return what the model gets: the messages after the current cut, oldest first.

        The last boundary sets the cut. After a compaction the boundary (its ``content``
        is the summary) comes first, followed by the messages after its ``upto_seq``;
        earlier compaction markers it supersedes are left out and cut nothing, while a
        "start over" line always cuts everything before it. Boundaries are otherwise left
        out, and tool results whose call was cut off are dropped
        (:func:`trim_orphan_tool_results`).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            max_messages: Keep only the newest this many messages (a count; the summary,
                if any, stays first).

        Returns:
            The window, oldest first.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id or ``max_messages`` is not an
                integer of at least 1.
            CorruptRecord: If a message of the window is damaged (left out instead on a
                ``corrupt_records="skip"`` store).
            BackendUnavailable: If the backend fails.
        """
        return await self._context.context_messages(chat_id, max_messages=max_messages)

    # -- steps ------------------------------------------------------------------------------

    async def save_steps(self, steps: Sequence[Step]) -> list[Step]:
        """Insert or replace steps by ``step_id``, atomically (the buffered exit write).

        New steps get a store-assigned ``seq``, increasing within their chat.

        Args:
            steps: A list of :class:`Step` (or subclass) instances or mappings of fields.

        Returns:
            The stored steps, in input order.

        Raises:
            ChatNotFound: If a step's chat does not exist or is deleted.
            InvalidArgument: If ``steps`` is not a list or a step does not validate.
            InvalidContent: If a string holds a lone surrogate, or a float is NaN or
                infinite; nothing is written.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.save_steps(steps)

    async def update_step(self, step_id: UUID | str, /, **changes: Any) -> Step:
        """Change a step's fields (``status``, ``output``, ``error``, ``space_snapshot``...).

        Args:
            step_id: The step (a ``UUID`` or its text form).
            **changes: New field values; not ``step_id``, ``chat_id``, ``seq`` or
                ``created_at``.

        Returns:
            The stored step.

        Raises:
            StepNotFound: If there is no such step.
            InvalidArgument: If ``step_id`` is not an id, an id field or ``seq`` is
                changed, or a value does not validate.
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.update_step(step_id, **changes)

    async def get_step(self, step_id: UUID | str) -> Step:
        """Return a step.

        Args:
            step_id: The step (a ``UUID`` or its text form).

        Returns:
            The step.

        Raises:
            StepNotFound: If there is no such step.
            InvalidArgument: If ``step_id`` is not an id.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.get_step(step_id)

    async def get_steps(self, chat_id: UUID | str, run_id: str) -> list[Step]:
        """Return a run's steps in seq order (an archived chat is rehydrated first).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).

        Returns:
            The steps, oldest seq first (empty if there are none).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``run_id`` is not text.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.get_steps(chat_id, run_id)

    async def get_last_incomplete_step(self, chat_id: UUID | str) -> Step | None:
        """Return the chat's newest step that is not ``completed`` (where a resume starts).

        An archived chat is rehydrated first.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).

        Returns:
            The step, or ``None`` if every step is completed (or there are none).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.get_last_incomplete_step(chat_id)

    async def get_stack_steps(self, stack_id: str) -> list[Step]:
        """Return the steps of one stack node (one agent's part of a nested call), in order.

        Args:
            stack_id: The stack node (non-empty).

        Returns:
            Its steps, oldest first (empty if there are none).

        Raises:
            InvalidArgument: If ``stack_id`` is not a non-empty ``str``.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.get_stack_steps(stack_id)

    async def get_stack_path(self, stack_id: str) -> list[str]:
        """Return the stack ids from the root call down to ``stack_id`` (root first).

        Args:
            stack_id: The stack node (non-empty).

        Returns:
            The path of stack ids, root first, ``stack_id`` last.

        Raises:
            StepNotFound: If no step has ``stack_id`` (or an ancestor has no steps).
            Conflict: If the parent links form a cycle or are deeper than 256.
            InvalidArgument: If ``stack_id`` is not a non-empty ``str``.
            CapabilityNotSupported: If the driver does not store steps.
            BackendUnavailable: If the backend fails.
        """
        return await self._steps.get_stack_path(stack_id)

    # -- runs -------------------------------------------------------------------------------

    async def get_run(self, chat_id: UUID | str, run_id: str) -> Run:
        """Return a run.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).

        Returns:
            The run record.

        Raises:
            RunNotFound: If there is none.
            InvalidArgument: If ``chat_id`` is not an id or ``run_id`` is not text.
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.get_run(chat_id, run_id)

    async def start_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Record that ``owner`` starts executing a run, holding it for ``lease_seconds``.

        Idempotent for the same owner (the lease is renewed).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker (non-empty).
            lease_seconds: How long the claim lasts without a heartbeat (seconds, > 0).

        Returns:
            The run record (``active``, owned by ``owner``).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            Conflict: If the run exists under another owner or has ended (use
                :meth:`claim_run` to resume an ended run).
            InvalidArgument: If an id is malformed or ``lease_seconds`` is not positive (or is
                over a century).
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.start_run(chat_id, run_id, owner=owner, lease_seconds=lease_seconds)

    async def heartbeat_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Extend ``owner``'s lease on an active run.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker holding the run (non-empty).
            lease_seconds: The new lease from now (seconds, > 0).

        Returns:
            The run record with the extended lease.

        Raises:
            Conflict: If the run is not active or ``owner`` no longer holds it (a sweeper or
                another worker took it).
            RunNotFound: If there is no such run.
            InvalidArgument: If an id is malformed or ``lease_seconds`` is not positive (or is
                over a century).
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.heartbeat_run(
            chat_id, run_id, owner=owner, lease_seconds=lease_seconds
        )

    async def finish_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        status: RunStatus | str,
        error: str | None = None,
    ) -> Run:
        """End ``owner``'s active run as ``complete``, ``interrupted`` or ``errored``.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker holding the run (non-empty).
            status: The end status (a :class:`RunStatus` or its value), not ``active``.
            error: What went wrong, for an errored run.

        Returns:
            The ended run record.

        Raises:
            InvalidArgument: If ``status`` is ``active`` or not a status, or an id is
                malformed.
            Conflict: If ``owner`` does not hold the active run.
            RunNotFound: If there is no such run.
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.finish_run(chat_id, run_id, owner=owner, status=status, error=error)

    async def claim_run(
        self, chat_id: UUID | str, run_id: str, *, owner: str, lease_seconds: float = 60.0
    ) -> Run:
        """Take an interrupted or errored run (or an active one whose lease expired) to resume it.

        A compare-and-set: of concurrent claimers exactly one succeeds.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker taking it (non-empty).
            lease_seconds: The lease from now (seconds, > 0).

        Returns:
            The run record (``active``, owned by ``owner``).

        Raises:
            RunNotFound: If there is no such run.
            Conflict: If the run is complete, or held under a live lease (a second claimer).
            InvalidArgument: If an id is malformed or ``lease_seconds`` is not positive (or is
                over a century).
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.claim_run(chat_id, run_id, owner=owner, lease_seconds=lease_seconds)

    async def sweep_expired_runs(self, *, limit: int = 100) -> list[Run]:
        """Mark active runs whose lease expired as interrupted, with their open records.

        For each: the run becomes ``interrupted``; its in-progress messages, tool calls and
        reasonings become ``interrupted``; its pending/running steps become ``interrupted``.

        Args:
            limit: At most this many runs per call (a count, at least 1).

        Returns:
            The runs this call marked (a concurrent sweeper marks the others). A run whose
            stored row is damaged is left alone (reading it raises ``CorruptRecord``;
            ``threadkeep check`` lists it): one damaged row must not stop the sweeper for
            every other run of the store (issue 12).

        Raises:
            InvalidArgument: If ``limit`` is not an integer of at least 1.
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.sweep_expired_runs(limit=limit)

    async def finalize_run_records(
        self, chat_id: UUID | str, run_id: str, status: RunStatus | str
    ) -> int:
        """Give a run's still-open messages, nested records and steps their end status.

        ``complete`` -> complete / completed, ``interrupted`` -> interrupted,
        ``errored`` -> errored / failed. Records already
        ended keep their status.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            status: The run's end status (a :class:`RunStatus` or its value), not ``active``.

        Returns:
            How many messages and steps changed.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If an id is malformed or ``status`` is not an end status.
            Conflict: If a message kept changing under concurrent writers.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.finalize_run_records(chat_id, run_id, status)

    async def discard_run(self, chat_id: UUID | str, run_id: str) -> dict[str, int]:
        """Remove every record of a run for good ("an errored turn stores nothing").

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).

        Returns:
            Counts removed per kind (``messages``, ``steps``, ``runs``).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``run_id`` is not text.
            BackendUnavailable: If the backend fails.
        """
        return await self._runs.discard_run(chat_id, run_id)

    # -- buffered runs ----------------------------------------------------------------------

    async def begin_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        lease_seconds: float = 60.0,
        messages: Sequence[MessageInput] = (),
    ) -> Run:
        """Start ``owner``'s run (or renew its lease) and append the run's input, in one write.

        Like :meth:`start_run` followed by :meth:`append_messages`, as one ``commit_run``
        batch: all of it or nothing is written. Idempotent for the same owner while the run
        is active (a resumed run's owner continues it after :meth:`claim_run`).

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker executing the run (non-empty).
            lease_seconds: The lease (seconds, > 0, at most about a century); renew it
                with :meth:`heartbeat_run`.
            messages: The run's input (usually the new user messages); the rules of
                :meth:`append_messages` apply.

        Returns:
            The run record (``active``, owned by ``owner``).

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            Conflict: If the run exists under another owner or has ended.
            IdempotencyConflict / InvalidContent / PayloadTooLarge / InvalidArgument: As for
                :meth:`append_messages` (also for a malformed id or a lease that is not
                positive); nothing is written.
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails; nothing is written.
        """
        return await self._run_batch.begin_run(
            chat_id, run_id, owner=owner, lease_seconds=lease_seconds, messages=messages
        )

    async def end_run(
        self,
        chat_id: UUID | str,
        run_id: str,
        *,
        owner: str,
        status: RunStatus | str,
        messages: Sequence[MessageInput] = (),
        steps: Sequence[Step] = (),
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
        current: Run | None = None,
    ) -> Run:
        """End ``owner``'s active run and write its records, in one write.

        Like :meth:`append_messages`, :meth:`save_steps` and :meth:`finish_run` together,
        as one ``commit_run`` batch (the buffered policy's exit write). Records already
        stored keep their status; pass the run's records with their end status.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            run_id: The run (non-empty).
            owner: The worker holding the run (non-empty).
            status: ``complete``, ``interrupted`` or ``errored`` (or the :class:`RunStatus`).
            messages: Messages to append (the rules of :meth:`append_messages` apply).
            steps: Steps of the chat (instances or mappings) to insert or replace by
                ``step_id``.
            error: What went wrong, for an errored run.
            metadata: Merged into the run's ``metadata`` (a dict; no NaN or infinity).
            current: The run as this caller last got it (from :meth:`begin_run`,
                :meth:`heartbeat_run` or :meth:`claim_run`), used instead of reading it
                first. The write is a compare-and-set on its ``revision``, so a copy that
                is no longer current only costs the read: the run is then read and
                checked as without it. One of another chat or run is ignored.

        Returns:
            The ended run.

        Raises:
            InvalidArgument: If ``status`` is ``active`` or not a status, a step is of
                another chat or does not validate, an id is malformed, or ``metadata`` is
                not a dict.
            Conflict: If ``owner`` does not hold the active run (a sweeper or another
                worker took it); nothing is written.
            RunNotFound: If there is no such run.
            IdempotencyConflict / InvalidContent / PayloadTooLarge: As for
                :meth:`append_messages`; nothing is written.
            CapabilityNotSupported: If the driver does not store runs.
            BackendUnavailable: If the backend fails; nothing is written.
        """
        return await self._run_batch.end_run(
            chat_id,
            run_id,
            owner=owner,
            status=status,
            messages=messages,
            steps=steps,
            error=error,
            metadata=metadata,
            current=current,
        )

    async def run_context(
        self, chat_id: UUID | str, *, agui_ids: Sequence[str] = ()
    ) -> tuple[list[Message], dict[str, Message]]:
        """Return what a run reads before it begins: its context and the messages it names.

        The same as :meth:`context_messages` and one :meth:`get_message_by_agui_id` per
        id, in one round trip where the driver can (the optional
        :class:`threadkeep.driver.RunContextDriver`): ``StorageAgent`` reads the chat's
        context for the inner agent and looks up the client's new message ids before
        every run.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            agui_ids: Client message ids to look up (for example the run's new inbound
                messages).

        Returns:
            ``(context, held)``: the context window, oldest first (exactly
            ``context_messages(chat_id)``), and each id of ``agui_ids`` that a visible
            message of the chat holds, mapped to that message.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            InvalidArgument: If ``chat_id`` is not an id or an id is not a ``str``.
            CorruptRecord: If a message read is damaged (as those calls raise it).
            BackendUnavailable: If the backend fails.
        """
        return await self._run_batch.run_context(chat_id, agui_ids=agui_ids)

    # -- previews ---------------------------------------------------------------------------

    async def list_chat_previews(
        self,
        chat_filter: ChatFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
    ) -> Page[ChatPreview]:
        """Return one page of chats, newest created first, each with its newest message.

        The page of ``list_chats(chat_filter, limit=limit, cursor=cursor)`` (same chats, same
        order, same ``has_more``; its cursors are interchangeable with this method's), each
        chat paired with what ``get_last_messages`` would give it, cut to a preview, in one
        call to the driver (one query on SQL).

        Args:
            chat_filter: Which chats (a :class:`ChatFilter` or a mapping of its fields;
                default: every live chat), for example ``{"user_id": "u-1"}``.
            limit: Chats per page (count); default 50, capped at 200.
            cursor: ``next_cursor`` of the previous page (of this method or of
                ``list_chats``), issued for the same filter.
            preview_chars: At most this many code points of each preview's text (an
                integer >= 0; default 200). ``0`` returns no text, only the other fields.

        Returns:
            ``Page[ChatPreview]``: ``items`` run oldest to newest within the page (as
            ``list_chats``), ``next_cursor`` walks to older chats. On a
            ``corrupt_records="skip"`` store, ``corrupt`` lists damaged chat rows left out;
            a chat whose newest message is damaged is kept (see ``ChatPreview``).

        Raises:
            InvalidArgument: If ``limit`` or ``preview_chars`` is not an integer in range,
                or the filter does not validate.
            InvalidCursor: If the cursor is foreign, altered or for another filter.
            CorruptRecord: If a chat row, or a chat's newest message, is damaged (unless
                the store reads past damaged rows).
            BackendUnavailable: If the backend fails.
        """
        return await self._previews.list_chat_previews(
            chat_filter, limit=limit, cursor=cursor, preview_chars=preview_chars
        )

    # -- bulk load --------------------------------------------------------------------------

    async def load_messages(
        self,
        chat_id: UUID | str,
        messages: Iterable[LoadInput] | AsyncIterable[LoadInput],
        *,
        batch_size: int = DEFAULT_LOAD_BATCH,
    ) -> LoadReport:
        """Append a large history in batches on the driver's bulk path; idempotent.

        Messages are appended in the order given, ``batch_size`` at a time, each batch as
        :meth:`append_messages` would append it (same checks, same ``seq`` rules, all or
        nothing per batch) but through the driver's bulk primitive: PostgreSQL writes a
        batch with ``COPY``, SQLite with one multi-row insert, and other drivers fall back
        to ``insert_messages``. Unlike ``append_messages`` it returns counts, not the
        stored messages, so memory stays bounded by one batch however long the history.

        A re-run of the same load writes nothing: every message carrying an ``agui_id``
        that the chat stores already is found and skipped (give each message an
        ``agui_id`` to be able to re-run; one without is written again each time).
        Batches before a failing one stay written, so a re-run after a failure completes
        the rest.

        Args:
            chat_id: The chat (a ``UUID`` or its text form).
            messages: ``Message`` instances, mappings of their fields
                (:data:`threadkeep.typing.MessageInput`), or what :meth:`prepare`
                returned for a message (a :class:`PreparedMessage`: its body and
                fingerprint are written as they are, not computed again; only the
                payload limit of this store is checked again, so prepare messages with
                a store of the same ``max_message_bytes`` or less), as a list, any
                iterable (a generator reading a file) or an async iterable; consumed
                once, in order. Kinds may be mixed.
            batch_size: Messages per batch (count, 1 to :data:`MAX_LOAD_BATCH`, default
                :data:`DEFAULT_LOAD_BATCH`).

        Returns:
            A :class:`LoadReport`: messages (and their tool calls) created and already
            present, and the number of batches written.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted (nothing is written).
            IdempotencyConflict: If an ``agui_id`` is stored with a different payload, or
                repeats in one batch with different payloads; that batch is not written.
            InvalidContent / PayloadTooLarge / InvalidArgument: As for
                :meth:`append_messages` (and for a ``batch_size`` out of range,
                ``messages`` that is not iterable, or a ``PreparedMessage`` whose fields
                are not a message, a body text and a fingerprint); that batch is not
                written.
            Conflict: If the chat changed state (archived meanwhile) during a batch.
            BackendUnavailable: If the backend fails; that batch is not written.
        """
        return await self._load.load_messages(chat_id, messages, batch_size=batch_size)

    async def find_chats(
        self, user_id: str, thread_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Chat]:
        """Return the live chats of many thread ids of one user, in as few reads as it can.

        What :meth:`find_chat` returns for each id, looked up 1,000 ids per read on a
        driver with the ``find_live_chats`` primitive (SQL: one indexed ``IN`` read), one
        read per id otherwise. An importer finds the chats a file's records were imported
        into before with it.

        Args:
            user_id: The owner.
            thread_ids: The thread ids (repeats are looked up once).
            tenant_id: The tenant (part of a chat's key), or ``None``.

        Returns:
            ``{thread_id: chat}`` for each id that has a live chat; ids without one are
            left out.

        Raises:
            InvalidArgument: If an id is not a clean, non-empty ``str``, or ``thread_ids``
                is not a list of them.
            BackendUnavailable: If the backend fails.
        """
        return await self._chat_load.find_chats(user_id, thread_ids, tenant_id=tenant_id)

    async def load_chats(self, chats: Sequence[ChatLoad]) -> list[ChatLoadResult]:
        """Write many new chats, each with its messages, runs and steps, in one batch.

        The bulk path of importers: where ``create_chat`` + ``load_messages`` +
        ``end_run`` cost several round trips per chat, the whole batch goes through the
        driver's ``load_chats`` primitive (one transaction on SQL: multi-row inserts, and
        ``COPY`` for the messages on PostgreSQL); a driver without it gets the same writes
        chat by chat. Every record is checked first, exactly as those calls check it (the
        chat as ``create_chat``, messages as ``load_messages``, runs and steps as
        ``end_run``/``save_steps``), so a bad item writes nothing of the batch. A chat
        whose key a live chat holds already is skipped whole (``created=False``); its
        records are for the caller's ordinary path. A chat's ``proof`` entries reach its
        metadata only together with all of its records (see :class:`ChatLoad`).

        Args:
            chats: :class:`ChatLoad` items, keys distinct. Keep a batch to what one
                transaction should hold (importers send about 5,000 messages per call).

        Returns:
            One :class:`ChatLoadResult` per item, in order.

        Raises:
            InvalidArgument / InvalidContent / PayloadTooLarge: If an item or a record in
                it is malformed (the message names it), two items share a key, a
                ``chat_id`` or a ``message_id``, or a run or step names another chat;
                nothing is written.
            IdempotencyConflict: If an item repeats an ``agui_id`` with another payload;
                nothing is written.
            Conflict: If an item's ``chat_id`` (or a message's ``message_id``) is a stored
                record's already; nothing of the batch is written on a driver with the
                primitive, the chats before it are on one without.
            CapabilityNotSupported: If an item has runs or steps and the store lacks the
                ``steps`` capability.
            BackendUnavailable: If the backend fails; nothing of the batch is written on
                a driver with the primitive.
        """
        return await self._chat_load.load_chats(chats)

    # -- copies between stores --------------------------------------------------------------

    async def scan_messages(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Message]:
        """Return a hot chat's messages with ``seq > after_seq``, oldest first, hidden included.

        Unlike ``list_messages`` it returns soft-deleted messages too (with ``deleted_at``
        set): a copy keeps them until ``purge``. An archived chat's messages are in its
        bundle, not here.

        Args:
            chat_id: The chat (deleted chats included).
            after_seq: Return messages after this seq (0: from the first).
            limit: At most this many (1 to 1000).

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or ``after_seq``/``limit`` are out of
                range.
            CapabilityNotSupported: If the driver lacks the ``archive`` capability.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.scan_messages(chat_id, after_seq=after_seq, limit=limit)

    async def scan_steps(
        self, chat_id: UUID | str, *, after_seq: int = 0, limit: int = 200
    ) -> list[Step]:
        """Return a chat's steps with ``seq > after_seq``, oldest first.

        Raises:
            InvalidArgument: As :meth:`scan_messages`.
            CapabilityNotSupported: If the driver lacks the ``steps`` capability.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.scan_steps(chat_id, after_seq=after_seq, limit=limit)

    async def copy_chat(self, chat: Chat) -> bool:
        """Insert ``chat`` exactly as given, store-assigned fields included.

        Its ``chat_id``, timestamps, status, archive reference and deletion are kept; the
        store assigns only its store-wide ``seq``.

        Idempotent: a chat whose ``chat_id`` is stored already is left as it is. To copy a
        soft-deleted chat with its records, pass it with ``deleted_at=None``, copy its
        records, then call :meth:`copy_deletion` (what ``threadkeep copy`` does).

        Args:
            chat: The chat as read from another store.

        Returns:
            ``True`` if it was inserted, ``False`` if it was there already.

        Raises:
            Conflict: If another live chat holds its ``(user_id, thread_id)``.
            InvalidArgument: If ``chat`` is not a ``Chat``.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.copy_chat(chat)

    async def copy_deletion(self, chat: Chat) -> bool:
        """Mark a copied chat deleted as ``chat`` (from the source) is, once its records are in.

        A soft-deleted chat is copied live (``copy_chat`` of it with ``deleted_at=None``),
        its messages, steps and runs copied into it, and then this marks it deleted with
        the source's ``deleted_at``: some drivers take no records into a deleted chat, and
        a restore here then gives back everything. Idempotent: a chat deleted here already,
        or a ``chat`` not deleted, is left as it is.

        Args:
            chat: The chat as read from the source store.

        Returns:
            ``True`` if the chat was marked deleted here, ``False`` if nothing changed.

        Raises:
            ChatNotFound: If the chat is not here (``copy_chat`` it first).
            InvalidArgument: If ``chat`` is not a ``Chat``.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.copy_deletion(chat)

    async def copy_messages(self, chat_id: UUID | str, messages: Sequence[Message]) -> int:
        """Insert messages exactly as given (ids, seqs, timestamps, deletion, revision).

        Idempotent: messages whose ``message_id`` is stored already are skipped. The chat
        must exist (see :meth:`copy_chat`) and not be archived.

        Returns:
            How many were inserted.

        Raises:
            InvalidArgument: If ``chat_id`` is not an id, a message has no ``seq`` or is
                of another chat.
            Conflict: If the chat is archived here.
            CapabilityNotSupported: If the driver lacks the ``archive`` capability.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.copy_messages(chat_id, messages)

    async def copy_steps(self, chat_id: UUID | str, steps: Sequence[Step]) -> int:
        """Insert steps exactly as given (ids, seqs, timestamps); stored ``step_id``s skipped.

        Returns:
            How many were inserted.

        Raises:
            InvalidArgument: If ``chat_id`` is not an id or a step is of another chat.
            CapabilityNotSupported: If the driver lacks ``steps`` or ``archive``.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.copy_steps(chat_id, steps)

    async def copy_run(self, run: Run) -> bool:
        """Insert a run record exactly as given (status, owner, lease, error, timestamps).

        Idempotent: a run stored already (same chat and ``run_id``) is left as it is.

        Returns:
            ``True`` if it was inserted.

        Raises:
            ChatNotFound: If its chat does not exist here.
            CapabilityNotSupported: If the driver lacks the ``steps`` capability.
            BackendUnavailable: If the backend fails.
        """
        return await self._copy.copy_run(run)


_DELEGATED: tuple[tuple[str, str], ...] = (
    ("create_chat", "_chats"),
    ("get_chat", "_chats"),
    ("find_chat", "_chats"),
    ("update_chat", "_chats"),
    ("rename_chat", "_chats"),
    ("delete_chat", "_chats"),
    ("restore_chat", "_chats"),
    ("list_chats", "_chats"),
    ("purge", "_chats"),
    ("erase_user", "_chats"),
    ("append_message", "_messages"),
    ("append_messages", "_messages"),
    ("get_message", "_messages"),
    ("get_message_by_agui_id", "_messages"),
    ("update_message", "_messages"),
    ("delete_messages", "_messages"),
    ("list_messages", "_messages"),
    ("get_last_messages", "_messages"),
    ("append_tool_call", "_nested"),
    ("append_reasoning", "_nested"),
    ("update_tool_call", "_nested"),
    ("update_reasoning", "_nested"),
    ("get_tool_call", "_nested"),
    ("get_reasoning", "_nested"),
    ("get_tool_call_by_agui_id", "_nested"),
    ("get_reasoning_by_agui_id", "_nested"),
    ("start_over", "_context"),
    ("compact", "_context"),
    ("context_messages", "_context"),
    ("save_steps", "_steps"),
    ("update_step", "_steps"),
    ("get_step", "_steps"),
    ("get_steps", "_steps"),
    ("get_last_incomplete_step", "_steps"),
    ("get_stack_steps", "_steps"),
    ("get_stack_path", "_steps"),
    ("get_run", "_runs"),
    ("start_run", "_runs"),
    ("heartbeat_run", "_runs"),
    ("finish_run", "_runs"),
    ("claim_run", "_runs"),
    ("sweep_expired_runs", "_runs"),
    ("finalize_run_records", "_runs"),
    ("discard_run", "_runs"),
    ("begin_run", "_run_batch"),
    ("end_run", "_run_batch"),
    ("run_context", "_run_batch"),
    ("list_chat_previews", "_previews"),
    ("load_messages", "_load"),
    ("find_chats", "_chat_load"),
    ("load_chats", "_chat_load"),
    ("scan_messages", "_copy"),
    ("scan_steps", "_copy"),
    ("copy_chat", "_copy"),
    ("copy_deletion", "_copy"),
    ("copy_messages", "_copy"),
    ("copy_steps", "_copy"),
    ("copy_run", "_copy"),
)
"""``(method, component attribute)`` of every public method that delegates to a component."""
