"""Argument checks at the public ``Store`` boundary: one place, one error type.

Every public ``Store`` method passes its arguments through these before anything reaches a
driver, so a bad argument raises :class:`threadkeep.InvalidArgument` (saying what was wrong
and what is expected) identically on every backend, and never a ``TypeError``,
``AttributeError`` or pydantic ``ValidationError`` from deep inside a driver. Ids are
normalized here too: a ``UUID`` or its string form is accepted and converted once, so
drivers only ever see ``UUID`` objects.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from ._content import validate_model
from ._errors import InvalidArgument
from ._models import Chat, Message

__all__ = [
    "CHAT_KEYS",
    "as_aware",
    "as_count",
    "as_cutoff",
    "as_enum",
    "as_id",
    "as_ids",
    "as_items",
    "as_key",
    "as_model",
    "as_optional_key",
    "as_positive_seconds",
    "as_str",
    "as_text",
    "check_chat_keys",
    "check_store_options",
]

M = TypeVar("M", bound=BaseModel)
E = TypeVar("E", bound=Enum)

_REPR_CHARS = 60


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def as_id(value: object, what: str) -> UUID:
    """Return ``value`` as a ``UUID``: a ``UUID`` as it is, its text form parsed.

    Args:
        value: A ``uuid.UUID`` (subclasses included), or text that ``uuid.UUID`` parses
            (``"1b4e28ba-2fa1-11d2-883f-0016d3cca427"``, 32 hex digits, braces or a
            ``urn:uuid:`` prefix).
        what: The argument's name, for the error message.

    Raises:
        InvalidArgument: For anything else (other types, malformed text).
    """
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    msg = (
        f"{what} must be a UUID or its text form "
        f"(like '1b4e28ba-2fa1-11d2-883f-0016d3cca427'), not {_shown(value)}"
    )
    raise InvalidArgument(msg)


def as_items(values: object, what: str) -> Sequence[Any]:
    """Return ``values`` if it is a list-like sequence (not text, bytes or a mapping).

    Raises:
        InvalidArgument: If it is not a sequence, or is a ``str``/``bytes`` or mapping.
    """
    if type(values) is list or type(values) is tuple:  # the common case, without the ABC check
        return values
    if isinstance(values, Sequence) and not isinstance(values, str | bytes | bytearray):
        return values
    msg = f"{what} must be a list or tuple, not {type(values).__name__}"
    raise InvalidArgument(msg)


def as_ids(values: object, what: str) -> list[UUID]:
    """Return a sequence of ids (``UUID`` or text each) as a list of ``UUID``.

    Raises:
        InvalidArgument: If ``values`` is not a list-like sequence, or an item is not an id.
    """
    return [as_id(value, f"{what}[{i}]") for i, value in enumerate(as_items(values, what))]


def as_text(value: object, what: str) -> str:
    """Return ``value`` if it is a non-empty ``str``.

    Raises:
        InvalidArgument: If it is not a ``str`` or is empty.
    """
    if isinstance(value, str) and value:
        return value
    if isinstance(value, str):
        raise InvalidArgument(f"{what} must not be empty")
    raise InvalidArgument(f"{what} must be a str, not {type(value).__name__}")


def _control_at(text: str) -> int | None:
    """Return the position of the first control or line-separator character, or ``None``."""
    for at, char in enumerate(text):
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return at
    return None


def as_key(value: object, what: str) -> str:
    r"""Return ``value`` if it is usable as an identifier or name: clean, non-empty ``str``.

    Identity is compared byte for byte, so text that only
    looks equal must not be accepted: ``b"u"`` is not ``"u"``, and ``" u"``, ``"u\n"`` or
    ``"u\x00"`` would create a second user that no one can type.

    Args:
        value: The candidate (``user_id``, ``thread_id``, ``tenant_id``, a chat name...).
        what: The argument's name, for the error message.

    Raises:
        InvalidArgument: If it is not a ``str`` (bytes included), is empty, has leading or
            trailing whitespace, or holds a control character (Unicode category ``Cc``)
            or a line or paragraph separator.
    """
    text = as_text(value, what)
    if text != text.strip():
        raise InvalidArgument(f"{what} has leading or trailing whitespace: {_shown(text)}")
    at = _control_at(text)
    if at is not None:
        msg = f"{what} holds a control character at position {at}: {_shown(text)}"
        raise InvalidArgument(msg)
    return text


def as_optional_key(value: object, what: str) -> str | None:
    """Return ``None`` as it is, else :func:`as_key` of ``value``.

    Raises:
        InvalidArgument: As :func:`as_key`.
    """
    return None if value is None else as_key(value, what)


CHAT_KEYS = frozenset({"name", "agent_id", "channel", "tenant_id", "team_id"})
"""Optional chat fields ``create_chat`` and ``update_chat`` check with :func:`check_chat_keys`."""
_LABELS = frozenset({"name", "channel"})
"""Descriptive text kept exactly (only its type is checked); the rest are ids."""


def check_chat_keys(**values: object) -> dict[str, str | None]:
    """Check a chat's optional ids and labels; ``None`` stays ``None``.

    A ``name`` or ``channel`` is descriptive text, kept exactly like content (NUL,
    emoji and any other text round-trip), so only its type is
    checked; ids (``agent_id``, ``tenant_id``, ``team_id``) must be clean (:func:`as_key`).

    Raises:
        InvalidArgument: If an id is not ``None`` or a clean, non-empty ``str``, or a label
            is not ``None`` or a ``str``.
    """
    return {
        key: (None if value is None else as_str(value, key))
        if key in _LABELS
        else as_optional_key(value, key)
        for key, value in values.items()
    }


def as_str(value: object, what: str) -> str:
    """Return ``value`` if it is a ``str`` (empty text included, as a stored client id).

    Raises:
        InvalidArgument: If it is not a ``str``.
    """
    if isinstance(value, str):
        return value
    raise InvalidArgument(f"{what} must be a str, not {type(value).__name__}")


def as_count(value: object, what: str, *, minimum: int) -> int:
    """Return ``value`` if it is an ``int`` (not ``bool``) of at least ``minimum``.

    Raises:
        InvalidArgument: If it is not an integer, or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgument(f"{what} must be at least {minimum} (got {value})")
    return value


MAX_SECONDS = 100 * 365 * 24 * 3600
"""The longest duration :func:`as_positive_seconds` accepts: about a century.

A lease ``now + seconds`` must stay a date (``datetime`` ends at year 9999); a century
is longer than any real lease and far from that end.
"""


def as_positive_seconds(value: object, what: str) -> float:
    """Return ``value`` (seconds, ``int`` or ``float``) if it is above zero and at most a century.

    Raises:
        InvalidArgument: If it is not a number, is not above zero, or is over
            :data:`MAX_SECONDS` (infinity and NaN included).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be a number of seconds, not {type(value).__name__}")
    if not 0 < value <= MAX_SECONDS:  # also False for NaN; an int is never converted
        msg = (
            f"{what} must be a positive number of seconds of at most {MAX_SECONDS} "
            f"(about a century), not {_shown(value)}"
        )
        raise InvalidArgument(msg)
    return float(value)


def as_cutoff(now: datetime, value: object, what: str) -> datetime:
    """Return ``now - value`` for a ``timedelta`` of at least zero (an "older than" age).

    Args:
        now: The current time.
        value: The age, a ``datetime.timedelta``.
        what: The argument's name, for the error message.

    Raises:
        InvalidArgument: If ``value`` is not a ``timedelta``, is negative, or reaches
            back before the first representable date (``timedelta(days=999999)``).
    """
    if not isinstance(value, timedelta):
        msg = f"{what} must be a datetime.timedelta (like timedelta(days=30)), not {_shown(value)}"
        raise InvalidArgument(msg)
    if value < timedelta(0):
        raise InvalidArgument(f"{what} must not be negative (got {value})")
    try:
        return now - value
    except OverflowError:
        msg = f"{what} of {value.days} days reaches back before year 1; give a shorter age"
        raise InvalidArgument(msg) from None


def as_aware(value: object, what: str) -> datetime:
    """Return ``value`` if it is a timezone-aware ``datetime``.

    Raises:
        InvalidArgument: If it is not a ``datetime``, or is naive (no ``tzinfo``): pass
            ``datetime.now(UTC)``-style aware values (timestamps are UTC).
    """
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        msg = f"{what} is a naive datetime ({value.isoformat()}); give it a time zone (UTC)"
        raise InvalidArgument(msg)
    return value


def as_model(model: type[M], value: object, what: str) -> M:
    """Return ``value`` as a ``model`` instance: an instance as it is, a mapping validated.

    Raises:
        InvalidArgument: If it is neither, or the mapping does not validate (the message
            lists the fields).
    """
    if isinstance(value, model):
        return value
    if isinstance(value, Mapping):
        return validate_model(model, dict(value))
    msg = f"{what} must be a {model.__name__} or a mapping of its fields, not {_shown(value)}"
    raise InvalidArgument(msg)


def as_enum(enum: type[E], value: object, what: str) -> E:
    """Return ``value`` as a member of ``enum`` (a member, or its value).

    Raises:
        InvalidArgument: If it is neither; the message lists the members' values.
    """
    try:
        return enum(value)
    except (ValueError, TypeError):
        allowed = ", ".join(repr(m.value) for m in enum)
        raise InvalidArgument(f"{what} must be one of {allowed}, not {_shown(value)}") from None


def check_store_options(
    driver: type,
    unknown: Mapping[str, object],
    *,
    cursor_secret: object,
    clock: object,
    message_model: object,
    chat_model: object,
) -> None:
    """Check the options a store is built with (``open_store(url, **options)``).

    Args:
        driver: The driver class, named in the message for an unknown option.
        unknown: Options no constructor in the driver's chain took.
        cursor_secret: ``None``, ``str`` or ``bytes``.
        clock: ``None`` or a callable returning the time.
        message_model: A ``Message`` subclass (or ``Message``).
        chat_model: A ``Chat`` subclass (or ``Chat``).

    Raises:
        InvalidArgument: Naming the first option that is unknown or of the wrong kind.
    """
    if unknown:
        msg = (
            f"unknown option(s) {sorted(unknown)} for {driver.__name__}; the common ones are "
            "cursor_secret, clock, max_message_bytes, message_model and chat_model (see the "
            "driver's documentation for its own)"
        )
        raise InvalidArgument(msg)
    if cursor_secret is not None and not isinstance(cursor_secret, str | bytes):
        kind = type(cursor_secret).__name__
        raise InvalidArgument(f"cursor_secret must be a str or bytes, not {kind}")
    if clock is not None and not callable(clock):
        kind = type(clock).__name__
        msg = f"clock must be a callable returning an aware datetime, not {kind}"
        raise InvalidArgument(msg)
    for what, value, base in (
        ("message_model", message_model, Message),
        ("chat_model", chat_model, Chat),
    ):
        if not (isinstance(value, type) and issubclass(value, base)):
            msg = f"{what} must be {base.__name__} or a subclass of it, not {_shown(value)}"
            raise InvalidArgument(msg)
