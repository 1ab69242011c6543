"""The store's clock and the UTC normalization every driver applies to stored times."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "as_utc", "system_clock"]

Clock = Callable[[], datetime]
"""A source of the current time; must return timezone-aware datetimes."""


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
