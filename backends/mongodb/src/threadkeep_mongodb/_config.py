"""What a ``mongodb://`` URL and the driver's options say: database name, collection prefix."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote

from pymongo import uri_parser
from pymongo.errors import ConfigurationError

from threadkeep import InvalidArgument

__all__ = ["DEFAULT_DATABASE", "check_prefix", "check_url", "database_name"]

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


def check_url(url: str) -> None:
    """Check a MongoDB connection string without connecting (no DNS lookups either).

    ``mongodb://`` URLs are parsed whole by PyMongo; for ``mongodb+srv://`` (whose hosts
    come from DNS) only the query options are checked.

    Raises:
        InvalidArgument: If the port is not a number from 1 to 65535, an option is unknown
            or has a bad value (the message names it), or PyMongo refuses the URL.
    """
    scheme, _, rest = url.partition("://")
    query = rest.partition("?")[2]
    bad = [key for key, value in parse_qsl(query, keep_blank_values=True) if _refused(key, value)]
    if bad:
        names = ", ".join(repr(key) for key in bad)
        msg = (
            f"MongoDB URL option {names} is unknown or has a bad value; see the connection "
            "string options of the MongoDB manual (names are case-insensitive)"
        )
        raise InvalidArgument(msg)
    if scheme.lower() != "mongodb":
        return
    try:
        uri_parser.parse_uri(url, validate=True, warn=False)
    except (ValueError, ConfigurationError) as exc:
        raise InvalidArgument(f"the MongoDB URL is not valid: {exc}") from exc


def _refused(key: str, value: str) -> bool:
    try:
        uri_parser.parse_uri(f"mongodb://localhost/?{quote(key)}={quote(value)}", warn=False)
    except (ValueError, ConfigurationError):
        return True
    return False
