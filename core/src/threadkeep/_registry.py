"""Choosing a driver by URL scheme.

Drivers come from the ``threadkeep_drivers`` hook of every plugin in the ``threadkeep``
entry-point group (see :mod:`threadkeep._plugins`); the scheme is the part of the URL before
``://`` (``sqlite+aiosqlite``, ``postgresql+asyncpg``, ``mongodb``, ``memory``...).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from ._cursor import CursorCodec
from ._errors import InvalidArgument, UnknownDriver
from ._plugins import plugin_manager

__all__ = [
    "ARCHIVE_SCHEMES",
    "KNOWN_SCHEMES",
    "archive_class_for",
    "check_cursor_secret",
    "driver_class_for",
    "installed_archive_schemes",
    "installed_schemes",
    "mask_url",
    "url_scheme",
]

KNOWN_SCHEMES = {
    "memory": "threadkeep",
    "file": "threadkeep",
    "sqlite": "threadkeep-sql",
    "sqlite+aiosqlite": "threadkeep-sql",
    "postgresql": "threadkeep-sql",
    "postgresql+asyncpg": "threadkeep-sql",
    "mongodb": "threadkeep-mongodb",
    "mongodb+srv": "threadkeep-mongodb",
    "memservice": "threadkeep-memservice",
    "s3": "threadkeep-s3",
}
"""Schemes of the drivers this project ships, and the distribution that provides each."""


def url_scheme(url: str) -> str:
    """Return the lowercase scheme of ``url`` (the text before ``://``).

    Raises:
        InvalidArgument: If ``url`` has no ``scheme://``.
    """
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        msg = f"{url!r} is not a URL like 'memory://' or 'sqlite+aiosqlite:///./threadkeep.db'"
        raise InvalidArgument(msg)
    return scheme.lower()


def _declared_schemes(hook_name: str) -> dict[object, set[str]]:
    """Map each plugin that implements ``threadkeep_schemes`` to its schemes for a hook."""
    declared: dict[object, set[str]] = {}
    for impl in plugin_manager().hook.threadkeep_schemes.get_hookimpls():
        served = cast("Mapping[str, Sequence[str]]", impl.function())
        declared[impl.plugin] = {scheme.lower() for scheme in served.get(hook_name, ())}
    return declared


def _classes_by_scheme(hook_name: str, wanted: str) -> dict[str, type[Any]]:
    """Return scheme -> class for ``hook_name``, asking only plugins that may serve ``wanted``.

    Those are the plugins declaring it in ``threadkeep_schemes``, and those declaring nothing.
    """
    declared = _declared_schemes(hook_name)
    skip = [plugin for plugin, schemes in declared.items() if wanted not in schemes]
    caller = plugin_manager().subset_hook_caller(hook_name, remove_plugins=skip)
    found: dict[str, type[Any]] = {}
    for classes in caller():
        for cls in classes:
            for scheme in getattr(cls, "schemes", ()):
                found.setdefault(scheme.lower(), cls)
    return found


def _scheme_names(hook_name: str) -> list[str]:
    """Every scheme served for ``hook_name``, importing only plugins that declare nothing."""
    declared = _declared_schemes(hook_name)
    names = {scheme for schemes in declared.values() for scheme in schemes}
    manager = plugin_manager()
    caller = manager.subset_hook_caller(hook_name, remove_plugins=list(declared))
    for classes in caller():
        for cls in classes:
            names.update(scheme.lower() for scheme in getattr(cls, "schemes", ()))
    return sorted(names)


def installed_schemes() -> list[str]:
    """Return the store URL schemes the installed drivers serve, sorted."""
    return _scheme_names("threadkeep_drivers")


def installed_archive_schemes() -> list[str]:
    """Return the archive URL schemes the installed archive drivers serve, sorted."""
    return _scheme_names("threadkeep_archives")


_SCHEME_TOKEN = re.compile(r"[a-z][a-z0-9+.-]*")
"""RFC 3986 section 3.1: the characters a URL scheme may hold (lowercased here)."""


def _shown_scheme(scheme: str) -> str:
    """Return ``scheme://`` for a message: bare (``redis://``), quoted when it holds odd text."""
    text = f"{scheme}://"
    return text if _SCHEME_TOKEN.fullmatch(scheme) else repr(text)


def _unknown(scheme: str, installed: list[str], what: str) -> UnknownDriver:
    parts = [f"no installed {what} serves {_shown_scheme(scheme)}"]
    package = KNOWN_SCHEMES.get(scheme)
    if package:
        parts.append(f"install it with: pip install {package}")
    else:
        close = difflib.get_close_matches(scheme, installed + list(KNOWN_SCHEMES), n=1)
        if close:
            parts.append(f"did you mean {close[0]!r}?")
    parts.append(f"installed: {', '.join(installed) or 'none'}")
    return UnknownDriver("; ".join(parts))


ARCHIVE_SCHEMES = frozenset({"file", "s3"})
"""Schemes of the archive targets this project ships (``file:///path``, ``s3://bucket/prefix``)."""

_ARCHIVE_FORMS = (
    "archive URLs are file:///absolute/folder (a local folder) or s3://bucket/prefix "
    "(S3-compatible storage, with threadkeep-s3)"
)


def mask_url(url: str) -> str:
    """Return ``url`` with the password of ``user:password@`` replaced by ``***`` (for messages).

    Args:
        url: Any URL; one without a password is returned unchanged.

    Returns:
        The URL safe to print.
    """
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:***@{host}{slash}{tail}"


def driver_class_for(url: str) -> type[Any]:
    """Return the driver class serving ``url``'s scheme.

    Raises:
        InvalidArgument: If ``url`` is not a URL.
        UnknownDriver: If no installed driver serves the scheme; the message names the
            installed schemes and the package that would add it, or says that an archive
            URL (``file://``, ``s3://``) was given where a store URL belongs.
    """
    scheme = url_scheme(url)
    classes = _classes_by_scheme("threadkeep_drivers", scheme)
    if scheme not in classes:
        if scheme in ARCHIVE_SCHEMES or scheme in installed_archive_schemes():
            msg = (
                f"{mask_url(url)!r} is an archive URL (cold storage for idle chats), not a store "
                "URL; give it as --archive-url (THREADKEEP_ARCHIVE_URL, archive_url in the "
                "settings file) and give the store as --url, for example "
                "sqlite+aiosqlite:///./threadkeep.db"
            )
            raise UnknownDriver(msg)
        raise _unknown(scheme, installed_schemes(), "driver")
    return classes[scheme]


def archive_class_for(url: str) -> type[Any]:
    """Return the archive store class serving ``url``'s scheme (``file``, ``s3``...).

    Raises:
        InvalidArgument: If ``url`` is not a URL (the message shows the archive URL forms).
        UnknownDriver: As :func:`driver_class_for`, for archive drivers; a store URL given
            as an archive URL is named as such.
    """
    try:
        scheme = url_scheme(url)
    except InvalidArgument as exc:
        looks_like_a_path = bool(url) and ":" not in url
        hint = (
            f"; for this folder write {Path(url).absolute().as_uri()}" if looks_like_a_path else ""
        )
        msg = f"{url!r} is not an archive URL: {_ARCHIVE_FORMS}{hint}"
        raise InvalidArgument(msg) from exc
    classes = _classes_by_scheme("threadkeep_archives", scheme)
    if scheme not in classes:
        if scheme not in ARCHIVE_SCHEMES and scheme in installed_schemes():
            msg = (
                f"{mask_url(url)!r} is a store URL, not an archive URL (where idle chats go); "
                f"{_ARCHIVE_FORMS}"
            )
            raise UnknownDriver(msg)
        raise _unknown(scheme, installed_archive_schemes(), "archive driver")
    return classes[scheme]


def check_cursor_secret(secret: str, source: str) -> None:
    """Refuse a configured cursor secret that is too short, naming where it was set.

    Raises:
        InvalidArgument: If ``secret`` is under the minimum length.
    """
    try:
        CursorCodec(secret.encode("utf-8"))
    except ValueError as exc:
        msg = (
            f"cursor_secret (from {source}) is too short: {exc}; generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
        raise InvalidArgument(msg) from exc
