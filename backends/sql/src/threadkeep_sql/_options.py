"""The scale options of a PostgreSQL store: partitions, a read replica, a transaction pooler.

Each is a keyword argument of :class:`threadkeep_sql.SqlStore` and a ``?key=value`` parameter
of its URL (so a ``url`` in the settings file can carry it); given both ways they must agree.
They are threadkeep's own, taken out of the URL before SQLAlchemy and asyncpg see it:

- ``partitions=N`` (2 to 1024): hash-partition the per-chat tables by ``chat_id`` into ``N``
  partitions when the schema is created (migration ``0005``); an existing store is converted
  with ``threadkeep-sql partition`` (see :mod:`threadkeep_sql._partition`).
- ``read_url=URL``: a streaming-replication standby that serves reads
  (:mod:`threadkeep_sql._replica`); ``read_consistency=strong`` (default: every read sees
  every write committed before it, from any process) or ``session`` (a caller sees its own
  writes); ``read_wait=SECONDS`` (default 1.0) bounds how long a read waits for the standby
  to replay what it must see before it goes to the primary.
- ``pooler=transaction``: the URL reaches PostgreSQL through a pooler in transaction mode
  (PgBouncer ``pool_mode = transaction``): no prepared statement outlives its transaction
  (see :class:`threadkeep_sql._engine.Database`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.engine import URL

from threadkeep import InvalidArgument

__all__ = [
    "MAX_PARTITIONS",
    "POOLER_MODES",
    "READ_CONSISTENCIES",
    "SCALE_QUERY_KEYS",
    "ScaleOptions",
    "take_option",
]

MAX_PARTITIONS = 1024
"""The most partitions ``partitions=`` accepts (PostgreSQL plans slow down past a few
thousand; a table that needs more wants Citus, see docs/scaling.md)."""

POOLER_MODES = ("transaction",)
"""The ``pooler=`` values understood."""

READ_CONSISTENCIES = ("strong", "session")
"""The ``read_consistency=`` values understood (see :mod:`threadkeep_sql._replica`)."""

DEFAULT_READ_WAIT = 1.0
"""Seconds a read after a write waits for the standby to replay it, by default."""

SCALE_QUERY_KEYS = frozenset({"partitions", "read_url", "read_wait", "read_consistency", "pooler"})
"""The URL query parameters this module takes out of a PostgreSQL store URL."""

T = TypeVar("T")


def take_option(
    url: URL, name: str, given: T | None, parse: Callable[[str], T]
) -> tuple[URL, T | None]:
    """Return ``url`` without ``?name=`` and the option's value (argument or URL).

    Raises:
        InvalidArgument: If the URL value does not parse, or the argument and the URL give
            different values.
    """
    text = url.query.get(name)
    if text is None:
        return url, given
    if not isinstance(text, str):
        raise InvalidArgument(f"?{name}= is given more than once in the store URL; give it once")
    value = parse(text)
    if given is not None and given != value:
        raise InvalidArgument(f"{name} {given!r} given twice, differently: ?{name}={text!r}")
    return url.difference_update_query([name]), value


def _partitions(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument(f"?partitions={text!r} is not a whole number") from None


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidArgument(f"?read_wait={text!r} is not a number of seconds") from None


@dataclass(frozen=True)
class ScaleOptions:
    """The validated scale options of one store.

    Attributes:
        partitions: Hash partitions of the per-chat tables for a new schema, or ``None``.
        read_url: The standby's URL (normalized, pooler parameters applied), or ``None``.
        read_wait: Seconds a fenced read waits for the standby (0 to 60).
        read_consistency: ``"strong"`` or ``"session"`` (see :mod:`threadkeep_sql._replica`).
        pooler: ``"transaction"`` behind a transaction-mode pooler, else ``None``.
    """

    partitions: int | None = None
    read_url: URL | None = None
    read_wait: float = DEFAULT_READ_WAIT
    read_consistency: str = "strong"
    pooler: str | None = None

    @classmethod
    def take(cls, url: URL, **given: Any) -> tuple[URL, ScaleOptions]:
        """Take the options out of ``url``, merged with keyword arguments (see module doc).

        Args:
            url: A normalized store URL.
            **given: ``partitions``, ``read_url``, ``read_wait``, ``read_consistency``,
                ``pooler`` as passed to ``SqlStore`` (``None`` when not passed).

        Returns:
            ``(url without these parameters, options)``.

        Raises:
            InvalidArgument: If a value is out of range or of the wrong form, an option is
                given twice differently, or an option is used with SQLite.
        """
        url, partitions = take_option(url, "partitions", given.get("partitions"), _partitions)
        url, read_url = take_option(url, "read_url", given.get("read_url"), str)
        url, read_wait = take_option(url, "read_wait", given.get("read_wait"), _seconds)
        url, consistency = take_option(url, "read_consistency", given.get("read_consistency"), str)
        url, pooler = take_option(url, "pooler", given.get("pooler"), str)
        options = cls(
            partitions=_checked_partitions(partitions),
            read_url=None if read_url is None else _standby_url(read_url),
            read_wait=_checked_wait(read_wait),
            read_consistency=_checked_choice("read_consistency", consistency, READ_CONSISTENCIES)
            or "strong",
            pooler=_checked_choice("pooler", pooler, POOLER_MODES),
        )
        if url.get_backend_name() != "postgresql" and options != cls():
            raise InvalidArgument(
                "partitions, read_url, read_wait, read_consistency and pooler are PostgreSQL "
                "options; a SQLite "
                "store is one local file"
            )
        return url, options


def _checked_partitions(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"partitions must be a whole number, not {value!r}")
    if not 2 <= value <= MAX_PARTITIONS:
        raise InvalidArgument(f"partitions must be from 2 to {MAX_PARTITIONS}, not {value}")
    return value


def _checked_wait(value: Any) -> float:
    if value is None:
        return DEFAULT_READ_WAIT
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"read_wait must be a number of seconds, not {value!r}")
    if not (math.isfinite(value) and 0 <= value <= 60):
        raise InvalidArgument(f"read_wait must be from 0 to 60 seconds, not {value}")
    return float(value)


def _checked_choice(name: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    if value not in choices:
        raise InvalidArgument(f"{name} must be one of {list(choices)}, not {value!r}")
    return str(value)


def _standby_url(text: str) -> URL:
    from ._engine import normalize_url

    if not isinstance(text, str):
        raise InvalidArgument(f"read_url must be a store URL string, not {text!r}")
    url = normalize_url(text)
    if url.get_backend_name() != "postgresql":
        raise InvalidArgument(f"read_url must be a PostgreSQL URL, not {url.drivername}://")
    leftover = sorted((SCALE_QUERY_KEYS | {"schema"}) & set(url.query))
    if leftover:
        msg = f"read_url cannot carry {leftover}: give them on the store URL (they apply to both)"
        raise InvalidArgument(msg)
    return url
