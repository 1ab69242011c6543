"""A driver completed with core's derived defaults: every primitive, as the store calls it.

:class:`Primitives` is built once per store (``Store.__init__``). It checks which optional
protocols of :mod:`threadkeep._driver` the driver implements (``isinstance``, once) and
binds each primitive to the driver's method, or to the default below that derives it
from the required ones, or to one that raises ``CapabilityNotSupported``. The driver's
methods become instance attributes, so a call costs what a call of the driver's method
costs (and ``count_store_writes`` patches them per store).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ._batch import fingerprint, resolve_batch
from ._capabilities import Capabilities
from ._driver import (
    CAPABILITY_PROTOCOLS,
    OPTIONAL_PROTOCOLS,
    WRITE_PRIMITIVES,
    ArchivedStepsDriver,
    Driver,
    LoadedChat,
    MigratingDriver,
    NestedKind,
    UserErasureDriver,
    protocol_members,
)
from ._errors import CapabilityNotSupported, Conflict
from ._models import Chat, ChatStatus, Message, MessageKind
from ._paging import ChatFilter, MessageFilter
from ._runs import Run, Step
from ._shielding import finish

if TYPE_CHECKING:
    from ._content import PreparedMessage
    from ._schema_migrations import SchemaMigrations

__all__ = ["Primitives", "chats_with_last", "check_driver"]

_BOUNDARIES = MessageFilter(kinds=frozenset({MessageKind.BOUNDARY}))
_ANY_MESSAGE = MessageFilter()
_WALK = 200
"""Page size of the derived walks (``messages_after``, ``find_nested_by_agui_id``)."""


def _unsupported(capability: str) -> CapabilityNotSupported:
    return CapabilityNotSupported(
        f"this driver does not declare the {capability!r} capability; use a driver that does "
        "(see docs/capabilities.md)"
    )


def _whole(
    primitive: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Wrap a write primitive so a cancellation is delivered only after it has finished.

    A write cancelled at an arbitrary await (``asyncio.wait_for``, a client gone away) would
    otherwise leave what the driver was doing half-done: SQLite's ``BEGIN IMMEDIATE`` held
    by a connection nobody owns, a transaction open, a connection checked out (issue 12).
    Run as a shielded task, the write commits or rolls back as a whole; then the caller's
    ``CancelledError`` is raised (``asyncio.wait_for`` still times out).
    """

    async def whole(*args: Any, **kwargs: Any) -> Any:
        return await finish(primitive(*args, **kwargs))

    whole.__wrapped__ = primitive  # type: ignore[attr-defined]
    return whole


async def chats_with_last(
    driver: Any, chat_filter: ChatFilter, before_seq: int | None, limit: int
) -> list[tuple[Chat, Message | None]]:
    """``page_chats_with_last`` made of ``page_chats`` and ``last_messages`` (two calls).

    The derived default of :class:`threadkeep.driver.PreviewsDriver`; a driver whose fast
    path does not cover a filter calls it for that filter.

    Args:
        driver: Anything with ``page_chats`` and ``last_messages`` (a driver).
        chat_filter: As for ``page_chats``.
        before_seq: As for ``page_chats``.
        limit: As for ``page_chats``.

    Returns:
        The chats seq DESC, each with its newest visible message or ``None`` (deleted and
        archived chats get ``None``).
    """
    chats = await driver.page_chats(chat_filter, before_seq, limit)
    hot = [c.chat_id for c in chats if c.deleted_at is None and c.status is ChatStatus.ACTIVE]
    newest = await driver.last_messages(hot) if hot else {}
    return [(chat, newest.get(chat.chat_id)) for chat in chats]


def check_driver(driver: object) -> Capabilities:
    """Check ``driver`` against the seam; return the capabilities of a store holding it.

    ``steps`` and ``archive`` are what the driver implements (its protocols); the other
    flags are the driver's ``capabilities`` (backend properties).

    Raises:
        TypeError: If ``driver`` lacks a method of :class:`threadkeep.driver.Driver`, if
            one of its primitives is a plain ``def`` where the protocol has ``async def``
            (naming it), or its ``capabilities`` declare ``steps``/``archive`` without the
            protocol's methods (as Python refuses to instantiate an abstract class).
    """
    name = type(driver).__name__
    if not isinstance(driver, Driver):
        missing = [m for m in protocol_members(Driver) if getattr(driver, m, None) is None]
        msg = f"{name} is not a threadkeep driver: it lacks {', '.join(missing)}"
        raise TypeError(msg)
    _check_coroutines(driver, name)
    declared = getattr(driver, "capabilities", None)
    if not isinstance(declared, Capabilities):
        declared = Capabilities()
    present: dict[str, bool] = {}
    for capability, protocols in CAPABILITY_PROTOCOLS.items():
        present[capability] = all(isinstance(driver, p) for p in protocols)
        if getattr(declared, capability) and not present[capability]:
            lacking = [
                member
                for protocol in protocols
                for member in protocol_members(protocol)
                if getattr(driver, member, None) is None
            ]
            msg = (
                f"can't instantiate driver {name}: its capabilities declare "
                f"{capability!r}, which it does not implement ({', '.join(lacking)}); "
                "implement them or do not declare the capability"
            )
            raise TypeError(msg)
    if present["steps"] and present["archive"] and not isinstance(driver, ArchivedStepsDriver):
        msg = (
            f"can't instantiate driver {name}: a driver with steps and archive implements "
            "delete_hot_steps and restore_steps (ArchivedStepsDriver)"
        )
        raise TypeError(msg)
    return declared.model_copy(update=present)


def _check_coroutines(driver: object, name: str) -> None:
    """Refuse a primitive written as a plain ``def`` where the protocol has ``async def``.

    The store awaits every primitive: a plain method would fail deep in core at its first
    call (``object ... can't be used in 'await' expression``), or, returning ``None``, not
    fail at all. Checked for the required protocol and each optional one the driver
    implements; a callable that returns a coroutine passes if ``inspect`` sees it as a
    coroutine function (``async def``, ``functools.partial`` of one, ``AsyncMock``).

    Raises:
        TypeError: Naming the first such primitive and the protocol that declares it.
    """
    protocols = [Driver, *(p for p in OPTIONAL_PROTOCOLS if isinstance(driver, p))]
    for protocol in protocols:
        for member in protocol_members(protocol):
            expected = inspect.iscoroutinefunction(vars(protocol)[member])
            method = getattr(driver, member, None)
            if expected and method is not None and not inspect.iscoroutinefunction(method):
                msg = (
                    f"can't instantiate driver {name}: its primitive {member!r} "
                    f"({protocol.__name__}.{member}) is a plain function; the store awaits "
                    f"it, so define it with `async def {member}(...)`"
                )
                raise TypeError(msg)


class Primitives:
    """Every primitive of the seam for one driver; see the module docstring.

    Args:
        driver: The driver (checked by :func:`check_driver` first).
    """

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        shield = bool(getattr(driver, "shield_writes", False))
        runs_whole = frozenset(getattr(driver, "writes_run_whole", ()))
        names = list(protocol_members(Driver))
        for protocol in OPTIONAL_PROTOCOLS:
            if isinstance(driver, protocol):
                names += protocol_members(protocol)
        self.native = frozenset(names)
        """The primitives the driver implements itself (the rest are core's)."""
        for name in names:
            method = getattr(driver, name)
            wrap = shield and name in WRITE_PRIMITIVES and name not in runs_whole
            setattr(self, name, _whole(method) if wrap else method)

    # -- required (bound to the driver's methods in __init__; these forward) --------------

    async def insert_chat(self, chat: Chat) -> Chat:
        """:meth:`threadkeep.driver.Driver.insert_chat`."""
        return await self.driver.insert_chat(chat)

    async def get_chat(self, chat_id: UUID) -> Chat | None:
        """:meth:`threadkeep.driver.Driver.get_chat`."""
        return await self.driver.get_chat(chat_id)

    async def find_live_chat(
        self, user_id: str, thread_id: str, tenant_id: str | None = None
    ) -> Chat | None:
        """:meth:`threadkeep.driver.Driver.find_live_chat`."""
        return await self.driver.find_live_chat(user_id, thread_id, tenant_id)

    async def update_chat(self, chat: Chat, expected_revision: int | None) -> Chat | None:
        """:meth:`threadkeep.driver.Driver.update_chat`."""
        return await self.driver.update_chat(chat, expected_revision)

    async def page_chats(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[Chat]:
        """:meth:`threadkeep.driver.Driver.page_chats`."""
        return await self.driver.page_chats(chat_filter, before_seq, limit)

    async def purge_chat(self, chat_id: UUID) -> dict[str, int]:
        """:meth:`threadkeep.driver.Driver.purge_chat`."""
        return await self.driver.purge_chat(chat_id)

    async def insert_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[tuple[Message, bool]] | None:
        """:meth:`threadkeep.driver.Driver.insert_messages`."""
        return await self.driver.insert_messages(chat_id, messages, now)

    async def get_message(self, message_id: UUID) -> Message | None:
        """:meth:`threadkeep.driver.Driver.get_message`."""
        return await self.driver.get_message(message_id)

    async def get_message_by_agui_id(self, chat_id: UUID, agui_id: str) -> Message | None:
        """:meth:`threadkeep.driver.Driver.get_message_by_agui_id`."""
        return await self.driver.get_message_by_agui_id(chat_id, agui_id)

    async def replace_message(
        self, prepared: PreparedMessage, expected_revision: int, now: datetime
    ) -> Message | None:
        """:meth:`threadkeep.driver.Driver.replace_message`."""
        return await self.driver.replace_message(prepared, expected_revision, now)

    async def page_messages(
        self,
        chat_id: UUID,
        message_filter: MessageFilter,
        before_seq: int | None,
        limit: int,
    ) -> list[Message] | None:
        """:meth:`threadkeep.driver.Driver.page_messages`."""
        return await self.driver.page_messages(chat_id, message_filter, before_seq, limit)

    async def hide_messages(self, chat_id: UUID, message_ids: Sequence[UUID], now: datetime) -> int:
        """:meth:`threadkeep.driver.Driver.hide_messages`."""
        return await self.driver.hide_messages(chat_id, message_ids, now)

    async def find_nested(self, kind: NestedKind, item_id: UUID) -> Message | None:
        """:meth:`threadkeep.driver.Driver.find_nested`."""
        return await self.driver.find_nested(kind, item_id)

    # -- derived from the required primitives ---------------------------------------------

    async def messages_after(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """Derived ``MessagesAfterDriver.messages_after``: walk the chat newest first."""
        newer: list[Message] = []
        before: int | None = None
        while page := await self.page_messages(chat_id, _ANY_MESSAGE, before, _WALK):
            for message in page:
                if (message.seq or 0) <= after_seq:
                    return newer[::-1][:limit]
                newer.append(message)
            if len(page) < _WALK:
                break
            before = page[-1].seq
        return newer[::-1][:limit]

    async def find_nested_by_agui_id(
        self, kind: NestedKind, chat_id: UUID, agui_id: str
    ) -> Message | None:
        """Derived ``NestedByAguiIdDriver.find_nested_by_agui_id``: page the chat newest first."""
        before: int | None = None
        while page := await self.page_messages(chat_id, _ANY_MESSAGE, before, _WALK):
            for message in page:
                items = message.tool_calls if kind == "tool_call" else message.reasonings
                if any(item.agui_id == agui_id for item in items):
                    return message
            if len(page) < _WALK:
                break
            before = page[-1].seq
        return None

    async def last_boundary(self, chat_id: UUID) -> Message | None:
        """Derived ``LastBoundaryDriver.last_boundary``: one page of boundaries, limit 1."""
        page = await self.page_messages(chat_id, _BOUNDARIES, None, 1)
        return page[0] if page else None

    async def last_messages(self, chat_ids: Sequence[UUID]) -> dict[UUID, Message]:
        """Derived ``LastMessagesDriver.last_messages``: one page of limit 1 per chat."""
        found: dict[UUID, Message] = {}
        for chat_id in chat_ids:
            page = await self.page_messages(chat_id, _ANY_MESSAGE, None, 1)
            if page:
                found[chat_id] = page[0]
        return found

    async def page_chats_with_last(
        self, chat_filter: ChatFilter, before_seq: int | None, limit: int
    ) -> list[tuple[Chat, Message | None]]:
        """Derived ``PreviewsDriver.page_chats_with_last``: :func:`chats_with_last`."""
        return await chats_with_last(self, chat_filter, before_seq, limit)

    async def load_messages(
        self, chat_id: UUID, messages: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        """``BulkLoadDriver.load_messages``; without it the store uses ``insert_messages``."""
        raise _unsupported("bulk load")

    async def commit_run(
        self,
        run: Run,
        expected_revision: int | None,
        messages: Sequence[PreparedMessage],
        steps: Sequence[Step],
        now: datetime,
    ) -> tuple[Run, list[tuple[Message, bool]], list[Step]] | None:
        """Derived ``CommitRunDriver.commit_run``: the writes in turn (not atomic).

        Checks the messages' ``agui_id`` s first (so an ``IdempotencyConflict`` writes
        nothing), then calls ``insert_run``/``replace_run``, ``insert_messages`` and
        ``save_steps``.
        """
        held: dict[str, tuple[str, Message]] = {}
        for item in messages:
            agui_id = item.message.agui_id
            found = await self.get_message_by_agui_id(run.chat_id, agui_id) if agui_id else None
            if agui_id is not None and found is not None:
                held[agui_id] = (fingerprint(found), found)
        resolve_batch(run.chat_id, messages, held.get)
        if expected_revision is None:
            if await self.get_run(run.chat_id, run.run_id) is not None:
                return None
            stored = await self.insert_run(run)
            if (stored.owner, stored.created_at) != (run.owner, run.created_at):
                return None
        else:
            replaced = await self.replace_run(run, expected_revision)
            if replaced is None:
                return None
            stored = replaced
        results: list[tuple[Message, bool]] = []
        if messages:
            inserted = await self.insert_messages(run.chat_id, messages, now)
            if inserted is None:
                return None
            results = inserted
        saved = await self.save_steps(steps, now) if steps else []
        return stored, results, saved

    async def read_run_context(
        self, chat_id: UUID, agui_ids: Sequence[str], limit: int
    ) -> tuple[Message | None, list[Message], bool, dict[str, Message]] | None:
        """Derived ``RunContextDriver.read_run_context``: the reads one by one."""
        chat = await self.get_chat(chat_id)
        if chat is None or chat.deleted_at is not None or chat.status is not ChatStatus.ACTIVE:
            return None
        boundary = await self.last_boundary(chat_id)
        after = 0 if boundary is None or boundary.seq is None else boundary.seq
        batch = await self.messages_after(chat_id, after, limit)
        held: dict[str, Message] = {}
        for agui_id in dict.fromkeys(agui_ids):
            found = await self.get_message_by_agui_id(chat_id, agui_id)
            if found is not None:
                held[agui_id] = found
        return boundary, batch, bool(batch), held

    async def find_live_chats(
        self, user_id: str, thread_ids: Sequence[str], tenant_id: str | None
    ) -> dict[str, Chat]:
        """Derived ``ChatsByThreadDriver.find_live_chats``: ``find_live_chat`` per id."""
        found: dict[str, Chat] = {}
        for thread_id in dict.fromkeys(thread_ids):
            chat = await self.find_live_chat(user_id, thread_id, tenant_id)
            if chat is not None:
                found[thread_id] = chat
        return found

    async def load_chats(self, chats: Sequence[LoadedChat], now: datetime) -> list[bool]:
        """Derived ``LoadChatsDriver.load_chats``: each chat in turn (not atomic).

        ``insert_chat`` (a chat another holds the key of is skipped), then
        ``insert_messages``, ``insert_run`` per run and ``save_steps``.

        Raises:
            Conflict: If a chat inserted here was deleted or archived before its records
                were written.
        """
        written: list[bool] = []
        for item in chats:
            stored = await self.insert_chat(item.chat)
            if stored.chat_id != item.chat.chat_id:
                written.append(False)
                continue
            chat_id = stored.chat_id
            if item.messages and await self.insert_messages(chat_id, item.messages, now) is None:
                raise Conflict(f"chat {chat_id} changed state during the load; try again")
            for run in item.runs:
                await self._insert_run_at(run)
            if item.steps:
                await self.save_steps(item.steps, now)
            written.append(True)
        return written

    async def _insert_run_at(self, run: Run) -> None:
        """Insert a run with its ``revision`` (a driver may insert every run at 0)."""
        stored: Run | None = await self.insert_run(run)
        while stored is not None and stored.revision < run.revision:
            stored = await self.replace_run(run, stored.revision)

    async def delete_archived_rows(
        self, chat_id: UUID, expected_revision: int
    ) -> dict[str, int] | None:
        """Derived ``ArchivedRowsDriver.delete_archived_rows``: correct, not atomic."""
        chat = await self.get_chat(chat_id)
        if chat is None or chat.status is not ChatStatus.ARCHIVED:
            return None
        if chat.revision != expected_revision:
            return None
        counts = {"messages": await self.delete_hot_messages(chat_id), "steps": 0}
        with contextlib.suppress(CapabilityNotSupported):
            counts["steps"] = await self.delete_hot_steps(chat_id)
        return counts

    # -- capabilities the driver lacks: raise CapabilityNotSupported ----------------------

    async def scan_messages(self, chat_id: UUID, after_seq: int, limit: int) -> list[Message]:
        """``ArchiveDriver.scan_messages``."""
        raise _unsupported("archive")

    async def delete_hot_messages(self, chat_id: UUID) -> int:
        """``ArchiveDriver.delete_hot_messages``."""
        raise _unsupported("archive")

    async def restore_messages(self, chat_id: UUID, messages: Sequence[Message]) -> int:
        """``ArchiveDriver.restore_messages``."""
        raise _unsupported("archive")

    async def index_archived_ids(self, chat_id: UUID, item_ids: Sequence[UUID]) -> int:
        """``ArchiveIndexDriver.index_archived_ids``."""
        raise _unsupported("archive")

    async def archived_chat_of(self, item_id: UUID) -> UUID | None:
        """``ArchiveIndexDriver.archived_chat_of``."""
        raise _unsupported("archive")

    async def delete_hot_steps(self, chat_id: UUID) -> int:
        """``ArchivedStepsDriver.delete_hot_steps``."""
        raise _unsupported("archive")

    async def restore_steps(self, chat_id: UUID, steps: Sequence[Step]) -> int:
        """``ArchivedStepsDriver.restore_steps``."""
        raise _unsupported("archive")

    async def save_steps(self, steps: Sequence[Step], now: datetime) -> list[Step]:
        """``StepsDriver.save_steps``."""
        raise _unsupported("steps")

    async def get_step(self, step_id: UUID) -> Step | None:
        """``StepsDriver.get_step``."""
        raise _unsupported("steps")

    async def steps_for_run(self, chat_id: UUID, run_id: str) -> list[Step]:
        """``StepsDriver.steps_for_run``."""
        raise _unsupported("steps")

    async def steps_for_stack(self, stack_id: str) -> list[Step]:
        """``StepsDriver.steps_for_stack``."""
        raise _unsupported("steps")

    async def last_incomplete_step(self, chat_id: UUID) -> Step | None:
        """``StepsDriver.last_incomplete_step``."""
        raise _unsupported("steps")

    async def scan_steps(self, chat_id: UUID, after_seq: int, limit: int) -> list[Step]:
        """``StepsDriver.scan_steps``."""
        raise _unsupported("steps")

    async def delete_run_records(self, chat_id: UUID, run_id: str) -> dict[str, int]:
        """``RunsDriver.delete_run_records``."""
        raise _unsupported("steps")

    async def insert_run(self, run: Run) -> Run:
        """``RunsDriver.insert_run``."""
        raise _unsupported("steps")

    async def get_run(self, chat_id: UUID, run_id: str) -> Run | None:
        """``RunsDriver.get_run``."""
        raise _unsupported("steps")

    async def replace_run(self, run: Run, expected_revision: int) -> Run | None:
        """``RunsDriver.replace_run``."""
        raise _unsupported("steps")

    async def expired_runs(self, now: datetime, limit: int) -> list[Run]:
        """``RunsDriver.expired_runs``."""
        raise _unsupported("steps")

    # -- driver extras --------------------------------------------------------------------

    def schema_migrations(self) -> SchemaMigrations | None:
        """``MigratingDriver.schema_migrations``, or ``None`` for a driver without a schema."""
        if isinstance(self.driver, MigratingDriver):
            return self.driver.schema_migrations()
        return None

    async def erase_user_records(self, user_id: str) -> dict[str, int]:
        """``UserErasureDriver.erase_user_records``, or nothing to erase."""
        if isinstance(self.driver, UserErasureDriver):
            return await self.driver.erase_user_records(user_id)
        return {}
