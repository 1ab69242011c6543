"""The context every component of a ``Store`` shares: driver, clock, cursors, settings, models.

:class:`threadkeep.Store` is a facade; its logic lives in sibling components by concern
(chats, messages, nested records, context, steps, runs, run batches, previews, load, copy),
each a :class:`Component` holding one :class:`StoreContext`. A component calls the driver
through ``self._driver`` (the :class:`~threadkeep._primitives.Primitives` of the store) and
another component through the context (``self._ctx.chats.get_chat(...)``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ._capabilities import Capabilities
from ._clock import Clock, as_utc, system_clock
from ._content import DEFAULT_MAX_MESSAGE_BYTES
from ._corrupt import CorruptRecordsPolicy, check_policy
from ._cursor import CursorCodec
from ._driver import Driver, DriverSetup
from ._errors import BackendUnavailable, InvalidArgument, InvalidCursor
from ._models import Chat, Message
from ._paging import MAX_PAGE_LIMIT, ChatFilter
from ._primitives import Primitives, check_driver
from ._records import Records
from ._store_args import as_count, as_model, check_store_options

if TYPE_CHECKING:
    from ._previews import PreviewOps
    from ._store_chats import ChatOps
    from ._store_context import ContextOps
    from ._store_copy import CopyOps
    from ._store_load import LoadOps
    from ._store_messages import MessageOps
    from ._store_nested import NestedOps
    from ._store_run_batch import RunBatchOps
    from ._store_runs import RunOps
    from ._store_steps import StepOps

__all__ = ["Clock", "Component", "StoreContext", "as_utc", "system_clock"]


class StoreContext:
    """Configuration, lifecycle, clock and cursors of one store, and its components.

    Args: as :class:`threadkeep.Store`.

    Raises:
        InvalidArgument: If an option is unknown or of the wrong kind, or the cursor
            secret is too short.
        TypeError: If ``driver`` is not a driver, or declares a capability it lacks.
    """

    chats: ChatOps
    messages: MessageOps
    nested: NestedOps
    context: ContextOps
    steps: StepOps
    runs: RunOps
    run_batch: RunBatchOps
    previews: PreviewOps
    load: LoadOps
    copy: CopyOps

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
        unknown: Mapping[str, Any],
    ) -> None:
        self._capabilities: Capabilities = check_driver(driver)
        self._declared: object = getattr(driver, "capabilities", None)
        check_store_options(
            type(driver),
            unknown,
            cursor_secret=cursor_secret,
            clock=clock,
            message_model=message_model,
            chat_model=chat_model,
        )
        max_message_bytes = as_count(max_message_bytes, "max_message_bytes", minimum=1)
        given: object = auto_migrate  # callers outside the type checker pass anything
        if not isinstance(given, bool):
            kind = type(given).__name__
            raise InvalidArgument(f"auto_migrate must be True or False, not a {kind}")
        self.auto_migrate = auto_migrate
        self.corrupt_records: CorruptRecordsPolicy = check_policy(corrupt_records)
        self.records = Records(message_model, chat_model, max_message_bytes)
        self.raw_driver = driver
        self.driver = Primitives(driver)
        self.url: str = str(getattr(driver, "url", ""))
        self.clock: Clock = clock or system_clock
        self._configured_secret = (
            cursor_secret.encode("utf-8") if isinstance(cursor_secret, str) else cursor_secret
        )
        if self._configured_secret:  # refused here, not after connecting in open()
            try:
                CursorCodec(self._configured_secret)
            except ValueError as exc:
                msg = (
                    f"cursor_secret (THREADKEEP_CURSOR_SECRET) is too short: {exc}; generate "
                    "one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
                )
                raise InvalidArgument(msg) from exc
        self._cursors: CursorCodec | None = None
        self.is_open = False

    @property
    def capabilities(self) -> Capabilities:
        """The store's capabilities: the driver's current declaration, protocols for the rest.

        ``steps``/``archive`` come from the driver's protocols; a driver may refine its
        declaration when it opens (MongoDB on a standalone server: no transactions).
        """
        declared = getattr(self.raw_driver, "capabilities", None)
        if declared is not self._declared and isinstance(declared, Capabilities):
            present = {"steps": self._capabilities.steps, "archive": self._capabilities.archive}
            self._capabilities = declared.model_copy(update=present)
            self._declared = declared
        return self._capabilities

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the driver and load the cursor secret (``Store.open``)."""
        if self.is_open:
            return
        candidate = None if self._configured_secret else os.urandom(32)
        setup = DriverSetup(self.records, self.auto_migrate, candidate)
        loaded = await self.raw_driver.open(setup)
        try:
            secret = self._configured_secret or loaded
            if not secret:
                raise BackendUnavailable("the driver returned no cursor secret from open()")
            self._cursors = CursorCodec(secret)
        except BaseException:
            await self.raw_driver.close()
            raise
        self.is_open = True

    async def close(self) -> None:
        """Close the driver if open (``Store.close``)."""
        if self.is_open:
            self.is_open = False
            await self.raw_driver.close()

    def require_open(self) -> None:
        """Raise ``BackendUnavailable`` unless the store is open."""
        if not self.is_open:
            msg = "store is not open; use `async with open_store(url) as store:`"
            raise BackendUnavailable(msg)

    def now(self) -> datetime:
        """Return the clock's instant in UTC; a naive one is refused (``InvalidArgument``)."""
        now = self.clock()
        if now.tzinfo is None:
            raise InvalidArgument("the store's clock returned a naive datetime; return UTC")
        return now.astimezone(UTC)

    # -- pages and cursors ---------------------------------------------------------------

    @staticmethod
    def page_limit(limit: int) -> int:
        """Return a page size capped at ``MAX_PAGE_LIMIT``; refuse a non-positive one."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidArgument(f"limit must be an integer, not {type(limit).__name__}")
        if limit < 1:
            raise InvalidArgument(f"limit must be at least 1 (got {limit}); the default is 50")
        return min(limit, MAX_PAGE_LIMIT)

    def chat_page_start(
        self, chat_filter: ChatFilter | Mapping[str, Any] | None, limit: int, cursor: str | None
    ) -> tuple[ChatFilter, int, dict[str, Any], int | None]:
        """Check the arguments of a chat listing; return filter, size, scope and position.

        The filter is the cursor's scope, so a cursor of ``list_chats`` serves
        ``list_chat_previews`` and back.
        """
        self.require_open()
        checked = (
            ChatFilter()
            if chat_filter is None
            else as_model(ChatFilter, chat_filter, "chat_filter")
        )
        size = self.page_limit(limit)
        scope = {"kind": "chats", "filter": checked.model_dump(mode="json")}
        return checked, size, scope, self.decode_cursor(cursor, scope)

    def encode_cursor(self, scope: dict[str, Any], position: int) -> str:
        """Sign a cursor for ``position`` within ``scope``."""
        assert self._cursors is not None
        return self._cursors.encode(scope, position)

    def decode_cursor(self, cursor: str | None, scope: dict[str, Any]) -> int | None:
        """Return a cursor's position, or ``None`` without one (``InvalidCursor`` if bad)."""
        if cursor is None:
            return None
        self.require_open()
        assert self._cursors is not None
        position = self._cursors.decode(cursor, scope)
        if isinstance(position, bool) or not isinstance(position, int):
            raise InvalidCursor("cursor position is malformed; start again without a cursor")
        return position


class Component:
    """A part of a store's logic; holds the store's context and its driver primitives.

    Args:
        ctx: The store's context.
    """

    __slots__ = ("_ctx", "_driver")

    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._driver = ctx.driver
