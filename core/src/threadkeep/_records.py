"""Rebuilding a store's rows as its models, and encoding records for writing (for drivers).

:class:`Records` binds the helpers a driver needs to the store's ``message_model``,
``chat_model`` and ``max_message_bytes``; the store hands one to its driver when it opens
(:class:`threadkeep.driver.DriverSetup`). The helpers that need no model are functions too:
:func:`record_body`, :func:`record_from_body`, :func:`records_from_rows`,
:func:`message_body`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from ._clock import as_utc
from ._content import (
    DEFAULT_MAX_MESSAGE_BYTES,
    PreparedMessage,
    dump_json,
    json_data,
    load_json,
    validate_model,
)
from ._corrupt import Unreadable, rebuilt, rebuilt_each
from ._encode import fingerprint_of, message_body_of
from ._encode_bulk import encode_for_load
from ._encode_lean import LEAN_FIELDS, fill_defaults, lean_fields
from ._models import Chat, Message
from ._rows import MESSAGE_COLUMNS, MESSAGE_ROW, from_json, page_from_json

__all__ = ["Records", "message_body", "record_body", "record_from_body", "records_from_rows"]

R = TypeVar("R", bound=BaseModel)


class Records:
    """The row helpers of one store: its models and payload limit.

    Args:
        message_model: The ``Message`` subclass messages are rebuilt as.
        chat_model: The ``Chat`` subclass chats are rebuilt as.
        max_message_bytes: Limit on a message's payload in UTF-8 bytes (:meth:`prepare`).
    """

    __slots__ = ("chat_model", "max_message_bytes", "message_model")

    def __init__(
        self,
        message_model: type[Message] = Message,
        chat_model: type[Chat] = Chat,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.message_model = message_model
        self.chat_model = chat_model
        self.max_message_bytes = max_message_bytes

    @property
    def _lean_reads(self) -> frozenset[str] | None:
        """The fields pydantic may fill for a lean body, or ``None`` to fill them first.

        A ``message_model`` declaring every :data:`LEAN_FIELDS` name as ``Message`` does
        gets a left-out field's right default from its own schema (validated straight from
        the JSON); any other rebuilds from the decoded body with the defaults put back.
        """
        return LEAN_FIELDS if lean_fields(self.message_model) == LEAN_FIELDS else None

    def prepare(self, message: Message) -> PreparedMessage:
        """Check and encode a message with this store's limits (``encode_message``'s result).

        Args:
            message: The message to write.

        Returns:
            The message with its JSON body and idempotency fingerprint.

        Raises:
            InvalidContent: If a string holds a lone surrogate or a float is NaN/infinite.
            PayloadTooLarge: If the payload is over ``max_message_bytes`` (UTF-8 bytes of
                text, not of JSON) or the rest over ``ENVELOPE_ALLOWANCE_BYTES``.
        """
        # The cut-down walks of the bulk path: results and errors equal encode_message's.
        return encode_for_load(message, self.max_message_bytes)

    def message_from_row(
        self,
        body: str | bytes | Mapping[str, Any],
        *,
        chat_id: UUID,
        seq: int,
        revision: int,
        created_at: datetime | str | Unreadable | None,
        updated_at: datetime | str | Unreadable | None,
        deleted_at: datetime | str | Unreadable | None = None,
    ) -> Message:
        """Rebuild a message from its stored body and columns (for drivers).

        Args:
            body: The JSON body text, or the decoded mapping.
            chat_id: The chat column.
            seq: The seq column.
            revision: The revision column.
            created_at: Column value; naive values are taken as UTC, ISO 8601 text is
                parsed, an :class:`~threadkeep.Unreadable` (a value the driver could not
                decode) makes the row corrupt.
            updated_at: As ``created_at``.
            deleted_at: As ``created_at``.

        Returns:
            An instance of this store's ``message_model``.

        Raises:
            CorruptRecord: If the stored body is not JSON, does not validate as the
                ``message_model``, or a column is not of its type (a driver passes an
                :class:`~threadkeep.typing.Unreadable` for a column it could not decode);
                it names the chat, seq and column.
        """
        columns = {
            "chat_id": chat_id,
            "seq": seq,
            "revision": revision,
            "created_at": _utc(created_at),
            "updated_at": _utc(updated_at),
            "deleted_at": _utc(deleted_at),
        }
        return rebuilt("message", columns, lambda: self._message_of_body(body, columns))

    def _message_of_body(
        self, body: str | bytes | Mapping[str, Any], columns: dict[str, Any]
    ) -> Message:
        filled = self._lean_reads
        if filled is not None and isinstance(body, str | bytes):
            # The body is validated in pydantic-core straight from JSON; the columns are the
            # store's own values, set as validating them would (about half the cost).
            message = from_json(self.message_model, body, columns, MESSAGE_COLUMNS, filled)
            if message is not None:
                return message
        data = _mapping(load_json(body) if isinstance(body, str | bytes) else body)
        fill_defaults(data)  # what a lean body left out, as a full body holds it
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
            CorruptRecord: As :meth:`message_from_row`; inside a page read of a
                ``corrupt_records="skip"`` store, damaged rows are left out instead.
        """
        filled = self._lean_reads
        if filled is not None:
            page = page_from_json(self.message_model, MESSAGE_ROW, rows, filled)
            if page is not None:
                return page
        return rebuilt_each(
            rows,
            lambda row: self.message_from_row(
                row[6],
                chat_id=row[0],
                seq=row[1],
                revision=row[2],
                created_at=row[3],
                updated_at=row[4],
                deleted_at=row[5],
            ),
        )

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
        return message_body_of(message)

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
        return fingerprint_of(message)

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
            CorruptRecord: If the stored data does not decode or validate as ``model``,
                or a column is not of its type; it names the chat, seq and column.
        """
        values = {k: _utc(v) if k.endswith("_at") else v for k, v in columns.items()}

        def build() -> R:
            if isinstance(body, str | bytes):
                record = from_json(model, body, values, frozenset(values))
                if record is not None:
                    return record
            data = _mapping(load_json(body) if isinstance(body, str | bytes) else body)
            data.update(values)
            return validate_model(model, data)

        return rebuilt(_record_kind(model), values, build, chat_id=_body_chat_id(body))

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
            CorruptRecord: As :meth:`record_from_body`; inside a page read of a
                ``corrupt_records="skip"`` store, damaged rows are left out instead.
        """
        page = page_from_json(model, tuple(names), rows)
        if page is not None:
            return page
        width = len(names)
        return rebuilt_each(
            rows,
            lambda row: cls.record_from_body(
                model, row[width], **dict(zip(names, row, strict=False))
            ),
        )


def _utc(value: Any) -> Any:
    """``as_utc`` of a timestamp column; what it cannot convert becomes ``Unreadable``."""
    if value is None or isinstance(value, datetime | str):
        try:
            return as_utc(value)
        except ValueError:
            return Unreadable(value, f"is not an ISO 8601 timestamp ({value!r:.60})")
    return value  # reported by the corrupt-row check


def _mapping(data: Any) -> dict[str, Any]:
    """Return a decoded body as a new dict; a body that is not an object is damaged."""
    if not isinstance(data, Mapping):
        raise TypeError(f"the body is a JSON {type(data).__name__}, not an object")
    return dict(data)


def _record_kind(model: type[BaseModel]) -> str:
    for base in model.__mro__:
        if base.__module__.startswith("threadkeep.") and base is not BaseModel:
            return base.__name__.lower()
    return model.__name__.lower()


def _body_chat_id(body: object) -> object:
    """The ``chat_id`` of a record body, for naming a damaged record (``None`` if unreadable).

    Called eagerly but cheap: a mapping lookup, or nothing for text (decoded only if the
    record turns out damaged would be better; text bodies carry their chat in a column).
    """
    if isinstance(body, Mapping):
        value = body.get("chat_id")
        try:
            return UUID(str(value)) if value is not None else None
        except ValueError:
            return None
    return None


record_body = Records.record_body
record_from_body = Records.record_from_body
records_from_rows = Records.records_from_rows
message_body = Records.message_body
