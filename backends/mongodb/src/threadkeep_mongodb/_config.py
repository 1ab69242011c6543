"""What a ``mongodb://`` URL and the driver's options say: database name, collection prefix."""

from __future__ import annotations

import re
from urllib.parse import unquote

from threadkeep import InvalidArgument

__all__ = ["DEFAULT_DATABASE", "check_prefix", "database_name"]

DEFAULT_DATABASE = "threadkeep"
"""The database used when the URL has no path (``mongodb://host/``)."""

_FORBIDDEN_IN_DATABASE = frozenset('/\\. "$\0')
_MAX_DATABASE_BYTES = 63
_PREFIX = re.compile(r"[A-Za-z0-9_.-]*")


def database_name(url: str) -> str:
    r"""Return the database named by the URL's path, or :data:`DEFAULT_DATABASE`.

    Per the MongoDB connection-string format, the path follows the host list
    (``mongodb://user:pw@h1,h2/DBNAME?options``); it is percent-decoded.

    Raises:
        InvalidArgument: If the name holds a character MongoDB forbids in database names
            (``/\. "$`` or NUL) or is longer than 63 bytes.
    """
    _, _, rest = url.partition("://")
    _, slash, path = rest.partition("/")
    name = unquote(path.partition("?")[0]) if slash else ""
    if not name:
        return DEFAULT_DATABASE
    bad = sorted(set(name) & _FORBIDDEN_IN_DATABASE)
    if bad or len(name.encode("utf-8")) > _MAX_DATABASE_BYTES:
        msg = (
            f"database name {name!r} from the URL path is not valid in MongoDB (forbidden "
            f"characters {bad}, or over {_MAX_DATABASE_BYTES} bytes); pick another name"
        )
        raise InvalidArgument(msg)
    return name


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a usable collection-name prefix.

    Raises:
        InvalidArgument: If it holds characters other than letters, digits, ``_.-``, or
            starts with ``system.`` (reserved by MongoDB).
    """
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        msg = f"collection_prefix {prefix!r} may hold only letters, digits, '_', '.' and '-'"
        raise InvalidArgument(msg)
    if prefix.startswith("system."):
        raise InvalidArgument("collection_prefix must not start with 'system.' (reserved)")
    return prefix
