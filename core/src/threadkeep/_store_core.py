"""Configuration, lifecycle, cursors and row helpers shared by every ``Store``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar
from uuid import UUID

from pydantic import BaseModel

from ._capabilities import Capabilities
from ._content import (
    DEFAULT_MAX_MESSAGE_BYTES,
    STORE_ASSIGNED_MESSAGE_FIELDS,
    PreparedMessage,
    dump_json,
    load_json,
    message_fingerprint,
    prepare_message,
    validate_model,
)
from ._cursor import CursorCodec
from ._driver import DriverPrimitives
from ._errors import BackendUnavailable, InvalidArgument, InvalidCursor
from ._models import Chat, Message
from ._paging import MAX_PAGE_LIMIT

__all__ = ["Clock", "StoreCore", "as_utc", "system_clock"]

Clock = Callable[[], datetime]
"""A source of the current time; must return timezone-aware datetimes."""

R = TypeVar("R", bound=BaseModel)


def system_clock() -> datetime:
    """Return the current time in UTC (the default clock)."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """Return ``value`` as an aware UTC datetime; a naive value is taken to be UTC.

    Drivers use it on what their database returns (SQLite has no time zones).
    """
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class StoreCore(DriverPrimitives):
    """Configuration and lifecycle of a store; see :class:`threadkeep.Store`."""

    schemes: ClassVar[tuple[str, ...]] = ()
    """URL schemes this driver serves, for example ``("memory",)``."""

    capabilities: ClassVar[Capabilities] = Capabilities()
    """What this driver claims; the contract suite checks every claim."""

    def __init__(
        self,
        url: str,
        *,
        cursor_secret: str | bytes | None = None,
        clock: Clock | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        message_model: type[Message] = Message,
        chat_model: type[Chat] = Chat,
    ) -> None:
        if max_message_bytes < 1:
            raise InvalidArgument("max_message_bytes must be at least 1")
        self.url = url
        self.max_message_bytes = max_message_bytes
        self.message_model = message_model
        self.chat_model = chat_model
        self._clock: Clock = clock or system_clock
        self._configured_secret = (
            cursor_secret.encode("utf-8") if isinstance(cursor_secret, str) else cursor_secret
        )
        self._cursors: CursorCodec | None = None
        self._is_open = False

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """Build an unopened store for ``url``; ``open_store`` calls this.

        Args:
            url: The store URL; its scheme is one of :attr:`schemes`.
            **options: Keyword options of the driver's constructor.

        Raises:
            InvalidArgument: If the URL or an option is invalid for this driver.
        """
        return cls(url, **options)

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> Self:
        """Connect (creating or migrating the schema) and load the cursor secret.

        Returns:
            The store itself, so ``store = await open_store(url).open()`` works.

        Raises:
            BackendUnavailable: If the backend cannot be reached.
        """
        if self._is_open:
            return self
        await self._open()
        try:
            secret = self._configured_secret or await self._load_secret(os.urandom(32))
            self._cursors = CursorCodec(secret)
        except BaseException:
            await self._close()
            raise
        self._is_open = True
        return self

    async def close(self) -> None:
        """Release connections. Idempotent; the store can be opened again."""
        if self._is_open:
            self._is_open = False
            await self._close()

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
        return self._is_open

    def _require_open(self) -> None:
        if not self._is_open:
            msg = "store is not open; use `async with open_store(url) as store:`"
            raise BackendUnavailable(msg)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise InvalidArgument("the store's clock returned a naive datetime; return UTC")
        return now.astimezone(UTC)

    # -- pages and cursors ---------------------------------------------------------------

    @staticmethod
    def _page_limit(limit: int) -> int:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidArgument(f"limit must be an integer, not {type(limit).__name__}")
        if limit < 1:
            raise InvalidArgument(f"limit must be at least 1 (got {limit}); the default is 50")
        return min(limit, MAX_PAGE_LIMIT)

    def _encode_cursor(self, scope: dict[str, Any], position: int) -> str:
        assert self._cursors is not None
        return self._cursors.encode(scope, position)

    def _decode_cursor(self, cursor: str | None, scope: dict[str, Any]) -> int | None:
        if cursor is None:
            return None
        self._require_open()
        assert self._cursors is not None
        position = self._cursors.decode(cursor, scope)
        if isinstance(position, bool) or not isinstance(position, int):
            raise InvalidCursor("cursor position is malformed; start again without a cursor")
        return position

    # -- helpers for drivers -------------------------------------------------------------

    def prepare(self, message: Message) -> PreparedMessage:
        """Check and encode a message with this store's limits (see ``prepare_message``)."""
        return prepare_message(message, self.max_message_bytes)

    def message_from_row(
        self,
        body: str | bytes | Mapping[str, Any],
        *,
        chat_id: UUID,
        seq: int,
        revision: int,
        created_at: datetime | None,
        updated_at: datetime | None,
        deleted_at: datetime | None = None,
    ) -> Message:
        """Rebuild a message from its stored body and columns (for drivers).

        Args:
            body: The JSON body text, or the decoded mapping.
            chat_id: The chat column.
            seq: The seq column.
            revision: The revision column.
            created_at: Column value; naive values are taken as UTC.
            updated_at: Column value; naive values are taken as UTC.
            deleted_at: Column value; naive values are taken as UTC.

        Returns:
            An instance of this store's ``message_model``.
        """
        data = dict(load_json(body) if isinstance(body, str | bytes) else body)
        data.update(
            chat_id=chat_id,
            seq=seq,
            revision=revision,
            created_at=as_utc(created_at),
            updated_at=as_utc(updated_at),
            deleted_at=as_utc(deleted_at),
        )
        return self.message_model.model_validate(data)

    @staticmethod
    def message_body(message: Message) -> str:
        """Return a message's JSON body without store-assigned fields (for drivers)."""
        return dump_json(
            message.model_dump(
                mode="json", exclude=set(STORE_ASSIGNED_MESSAGE_FIELDS), serialize_as_any=True
            )
        )

    @staticmethod
    def fingerprint(message: Message) -> str:
        """Return the idempotency fingerprint of a stored or new message."""
        data = message.model_dump(
            mode="json", exclude=set(STORE_ASSIGNED_MESSAGE_FIELDS), serialize_as_any=True
        )
        return message_fingerprint(data)

    @staticmethod
    def record_body(record: BaseModel) -> str:
        """Return the JSON text of a chat, step or run, every field included (for drivers).

        Raises:
            InvalidContent: If a string holds a lone surrogate.
        """
        return dump_json(record.model_dump(mode="json"))

    @staticmethod
    def record_from_body(
        model: type[R], body: str | bytes | Mapping[str, Any], **columns: Any
    ) -> R:
        """Rebuild a chat, step or run from :meth:`record_body` text, columns winning.

        Datetime columns may be naive (taken as UTC).
        """
        data = dict(load_json(body) if isinstance(body, str | bytes) else body)
        for key, value in columns.items():
            data[key] = as_utc(value) if isinstance(value, datetime) else value
        return validate_model(model, data)
