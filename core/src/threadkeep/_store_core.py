"""Configuration, lifecycle, cursors and row helpers shared by every ``Store``."""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import NoneType, TracebackType, UnionType
from typing import Any, ClassVar, Self, TypeVar, Union, get_args, get_origin
from uuid import UUID

from pydantic import BaseModel, TypeAdapter, ValidationError

from ._capabilities import Capabilities
from ._content import (
    DEFAULT_MAX_MESSAGE_BYTES,
    STORE_ASSIGNED_MESSAGE_FIELDS,
    PreparedMessage,
    dump_json,
    json_data,
    load_json,
    message_fingerprint,
    prepare_message,
    validate_model,
)
from ._cursor import CursorCodec
from ._driver import DriverPrimitives
from ._errors import BackendUnavailable, InvalidArgument, InvalidCursor
from ._models import Chat, Message, UTCDateTime
from ._paging import MAX_PAGE_LIMIT
from ._store_args import as_count, check_store_options

__all__ = ["Clock", "StoreCore", "as_utc", "system_clock"]

Clock = Callable[[], datetime]
"""A source of the current time; must return timezone-aware datetimes."""

R = TypeVar("R", bound=BaseModel)


def system_clock() -> datetime:
    """Return the current time in UTC (the default clock)."""
    return datetime.now(UTC)


def as_utc(value: datetime | str | None) -> datetime | None:
    """Return ``value`` as an aware UTC datetime; a naive value is taken to be UTC.

    Drivers use it on what their database returns (SQLite has no time zones). ISO 8601 text
    (``datetime.fromisoformat``), as text-based stores keep timestamps, is accepted too.

    Raises:
        ValueError: If ``value`` is text that is not an ISO 8601 timestamp.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


_MESSAGE_COLUMNS = frozenset(STORE_ASSIGNED_MESSAGE_FIELDS)
_MESSAGE_ROW = ("chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at")
_JOIN_LIMIT = 1 << 20
_TZINFO = operator.attrgetter("tzinfo")
"""A page whose bodies hold at most this many characters is validated as one JSON array."""


def _kept_types(annotation: Any) -> frozenset[type]:
    """Return the column value types a field of ``annotation`` keeps as they are.

    ``int`` keeps an exact ``int``, ``UUID`` any ``UUID`` (asyncpg's subclass included),
    ``UTCDateTime`` a ``datetime`` that is already UTC, and ``None`` when the field is optional.
    """
    union = get_origin(annotation) in (Union, UnionType)
    kept: set[type] = set()
    for arg in get_args(annotation) if union else (annotation,):
        if arg is NoneType or arg is int or arg is UUID:
            kept.add(arg)
        elif arg == UTCDateTime:
            kept.add(datetime)
    return frozenset(kept)


@functools.cache
def _column_types(
    model: type[BaseModel], names: frozenset[str]
) -> dict[str, frozenset[type]] | None:
    """Per column, the value types ``model`` keeps unchanged; ``None`` if none may skip validation.

    Setting validated columns after validating the body gives what validating them together
    gives when nothing can observe the difference: no field or model validator of the
    subclass (threadkeep's own model validator never reads store-assigned fields), no
    ``model_post_init`` or private attributes, no default factory reading other fields, and
    plain column fields (no constraints).
    """
    decorators = model.__pydantic_decorators__
    own = {d.func for d in Message.__pydantic_decorators__.model_validators.values()}
    if (
        any(d.func not in own for d in decorators.model_validators.values())
        or decorators.field_validators
        or decorators.validators
        or decorators.root_validators
        or model.__pydantic_post_init__ is not None
        or any(f.default_factory_takes_validated_data for f in model.model_fields.values())
    ):
        return None
    types: dict[str, frozenset[type]] = {}
    for name in names:
        field = model.model_fields.get(name)
        if field is None or field.metadata:
            return None
        types[name] = _kept_types(field.annotation)
    return types


def _all_kept(columns: dict[str, Any], types: dict[str, frozenset[type]]) -> bool:
    for key, value in columns.items():
        kept = types[key]
        if type(value) not in kept and not (UUID in kept and isinstance(value, UUID)):
            return False
    return True


def _from_json(
    model: type[R], body: str | bytes, columns: dict[str, Any], names: frozenset[str]
) -> R | None:
    """Validate ``body`` in pydantic-core, then set ``columns`` as validation would have.

    ``names`` is ``frozenset(columns)``; datetime columns have been through :func:`as_utc`.
    Returns ``None`` (the caller takes the general path) when a column would not be kept
    as it is, or the body does not validate (so errors stay those of the general path).
    """
    types = _column_types(model, names)
    if types is None or not _all_kept(columns, types):
        return None
    try:
        record = model.model_validate_json(body)
    except ValidationError:
        return None
    record.__dict__.update(columns)
    record.__pydantic_fields_set__.update(names)
    return record


@functools.cache
def _list_adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def _page_from_json(
    model: type[R], names: tuple[str, ...], rows: Sequence[Sequence[Any]]
) -> list[R] | None:
    """Rebuild a page of rows (columns in ``names`` order, then the body) at once.

    As :func:`_from_json` for every row, with the columns checked a column at a time and
    the bodies validated in one pydantic-core call (one JSON array) when they are text and
    small enough. ``None`` sends the caller the row-by-row way.
    """
    keys = frozenset(names)
    types = _column_types(model, keys)
    if types is None or not rows:
        return None
    columns = list(zip(*rows, strict=True))
    bodies = columns[len(names)]
    if set(map(type, bodies)) != {str}:
        return None
    checked = []
    for name, column in zip(names, columns, strict=False):  # the body and the rest follow
        kept = types[name]
        seen = set(map(type, column))
        if not (seen <= kept or (UUID in kept and all(issubclass(t, UUID) for t in seen - kept))):
            return None
        if datetime in seen and set(map(_TZINFO, filter(None, column))) != {UTC}:
            checked.append(tuple(None if value is None else as_utc(value) for value in column))
        else:
            checked.append(column)
    try:
        if sum(map(len, bodies)) <= _JOIN_LIMIT:
            records = _list_adapter(model).validate_json("[" + ",".join(bodies) + "]")
        else:  # no second copy of large bodies
            records = [model.model_validate_json(body) for body in bodies]
    except ValidationError:
        return None
    for record, values in zip(records, zip(*checked, strict=True), strict=True):
        record.__dict__.update(zip(names, values, strict=True))
        record.__pydantic_fields_set__.update(keys)
    return records


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
        **unknown: Any,
    ) -> None:
        check_store_options(
            type(self),
            unknown,
            cursor_secret=cursor_secret,
            clock=clock,
            message_model=message_model,
            chat_model=chat_model,
        )
        max_message_bytes = as_count(max_message_bytes, "max_message_bytes", minimum=1)
        self.url = url
        self.max_message_bytes = max_message_bytes
        self.message_model = message_model
        self.chat_model = chat_model
        self._clock: Clock = clock or system_clock
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
        """Release connections. Idempotent; the store can be opened again.

        Raises:
            BackendUnavailable: If the backend fails while closing (the store is closed
                all the same).
        """
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
        """Check and encode a message with this store's limits (see ``prepare_message``).

        Args:
            message: The message to write.

        Returns:
            The message with its JSON body and idempotency fingerprint.

        Raises:
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            PayloadTooLarge: If the payload is over ``max_message_bytes`` (UTF-8 bytes of
                text, not of JSON) or the rest over ``ENVELOPE_ALLOWANCE_BYTES``.
        """
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

        Raises:
            pydantic.ValidationError: If the stored body does not validate as the
                ``message_model`` (stored data a driver must never produce).
        """
        columns = {
            "chat_id": chat_id,
            "seq": seq,
            "revision": revision,
            "created_at": as_utc(created_at),
            "updated_at": as_utc(updated_at),
            "deleted_at": as_utc(deleted_at),
        }
        if isinstance(body, str | bytes):
            # The body is validated in pydantic-core straight from JSON; the columns are the
            # store's own values, set as validating them would (about half the cost).
            message = _from_json(self.message_model, body, columns, _MESSAGE_COLUMNS)
            if message is not None:
                return message
        data = dict(load_json(body) if isinstance(body, str | bytes) else body)
        data.update(columns)
        return self.message_model.model_validate(data)

    def messages_from_rows(self, rows: Sequence[Sequence[Any]]) -> list[Message]:
        """Rebuild a page of messages at once (for drivers; faster than row by row).

        Args:
            rows: Rows ``(chat_id, seq, revision, created_at, updated_at, deleted_at, body,
                ...)``, as the arguments of :meth:`message_from_row`; further columns are
                ignored.

        Returns:
            Instances of this store's ``message_model``, in the order of ``rows``; equal to
            what :meth:`message_from_row` returns for each row.

        Raises:
            pydantic.ValidationError: As :meth:`message_from_row`.
        """
        page = _page_from_json(self.message_model, _MESSAGE_ROW, rows)
        if page is not None:
            return page
        return [
            self.message_from_row(
                row[6],
                chat_id=row[0],
                seq=row[1],
                revision=row[2],
                created_at=row[3],
                updated_at=row[4],
                deleted_at=row[5],
            )
            for row in rows
        ]

    @staticmethod
    def message_body(message: Message) -> str:
        """Return a message's JSON body without store-assigned fields (for drivers).

        Args:
            message: A message (subclass fields included).

        Returns:
            Compact JSON text (``dump_json``).

        Raises:
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
        """
        return dump_json(
            message.model_dump(
                mode="json", exclude=set(STORE_ASSIGNED_MESSAGE_FIELDS), serialize_as_any=True
            )
        )

    @staticmethod
    def fingerprint(message: Message) -> str:
        """Return the idempotency fingerprint of a stored or new message.

        Args:
            message: The message; store-assigned fields and ids do not count.

        Returns:
            The fingerprint (hex digest of its canonical JSON payload).

        Raises:
            pydantic_core.PydanticSerializationError: If an undeclared extra field holds a
                value with no JSON form (``prepare`` refuses such a message first).
        """
        data = message.model_dump(
            mode="json", exclude=set(STORE_ASSIGNED_MESSAGE_FIELDS), serialize_as_any=True
        )
        return message_fingerprint(data)

    @staticmethod
    def record_body(record: BaseModel) -> str:
        """Return the JSON text of a chat, step or run, every field included (for drivers).

        ``Store`` calls it on every chat, step and run before writing, so a record it
        refuses is never written.

        Args:
            record: A ``Chat``, ``Step`` or ``Run`` (or subclass) instance.

        Returns:
            Compact JSON text of every field.

        Raises:
            InvalidContent: If a string or mapping key holds a lone surrogate, a float
                is NaN or infinite (no JSON form; it would read back as ``null``), or a
                value has no JSON form; the message names the field.
        """
        return dump_json(json_data(record, type(record).__name__.lower()))

    @staticmethod
    def record_from_body(
        model: type[R], body: str | bytes | Mapping[str, Any], **columns: Any
    ) -> R:
        """Rebuild a chat, step or run from :meth:`record_body` text, columns winning.

        Args:
            model: The record's model (``chat_model``, ``Step``, ``Run``...).
            body: The :meth:`record_body` text, or its decoded mapping.
            **columns: Column values that override the body's; datetime columns may be
                naive (taken as UTC).

        Returns:
            The record, a ``model`` instance.

        Raises:
            InvalidArgument: If the stored data does not validate as ``model``.
        """
        values = {k: as_utc(v) if isinstance(v, datetime) else v for k, v in columns.items()}
        if isinstance(body, str | bytes):
            record = _from_json(model, body, values, frozenset(values))
            if record is not None:
                return record
        data = dict(load_json(body) if isinstance(body, str | bytes) else body)
        data.update(values)
        return validate_model(model, data)

    @classmethod
    def records_from_rows(
        cls, model: type[R], names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> list[R]:
        """Rebuild a page of chats, steps or runs at once (for drivers).

        Args:
            model: The model of every row.
            names: The column names, in the order of the rows' first columns.
            rows: Rows of those columns, then the :meth:`record_body` text; further
                columns are ignored.

        Returns:
            What :meth:`record_from_body` returns for each row.

        Raises:
            InvalidArgument: As :meth:`record_from_body`.
        """
        page = _page_from_json(model, tuple(names), rows)
        if page is not None:
            return page
        width = len(names)
        return [
            cls.record_from_body(model, row[width], **dict(zip(names, row, strict=False)))
            for row in rows
        ]
