"""Opening a store by URL: the driver the scheme names, wrapped in a :class:`Store`."""

from __future__ import annotations

from typing import Any

from ._driver_base import check_options
from ._errors import InvalidArgument
from ._registry import check_cursor_secret, driver_class_for
from ._settings import load_settings, setting_source
from ._store import Store
from ._store_args import as_key

__all__ = ["STORE_OPTIONS", "open_store", "store_for"]


def open_store(url: str | None = None, **options: Any) -> Store:
    """Return an unopened store for ``url`` (use it with ``async with``).

    Args:
        url: The store URL; default ``THREADKEEP_URL``, then the settings file, then the
            embedded SQLite file ``./threadkeep.db``.
        **options: Store options (``cursor_secret``, ``clock``, ``max_message_bytes``,
            ``message_model``, ``auto_migrate``...) and driver-specific ones. ``cursor_secret``
            and ``auto_migrate`` default to their settings (``THREADKEEP_CURSOR_SECRET``,
            ``THREADKEEP_AUTO_MIGRATE``).

    Raises:
        UnknownDriver: If no installed driver serves the URL's scheme.
        InvalidArgument: If the URL or an option is invalid, or the URL (given or
            configured) is not a ``str``, is empty, has surrounding whitespace or holds a
            control character (a URL read from a file with its newline must not open a
            different store than the one meant).
    """
    if url is not None and url != "":  # "" is "not a URL", below
        as_key(url, "url")
    settings = load_settings(url=url)
    if url is None and settings.url:
        try:
            as_key(settings.url, "url")
        except InvalidArgument as exc:
            raise InvalidArgument(f"{exc} (from {setting_source('url')})") from None
    if options.get("cursor_secret") is None and settings.cursor_secret:
        check_cursor_secret(settings.cursor_secret, setting_source("cursor_secret"))
        options["cursor_secret"] = settings.cursor_secret
    if "auto_migrate" not in options and not settings.auto_migrate:
        options["auto_migrate"] = False
    return store_for(driver_class_for(settings.url), settings.url, **options)


STORE_OPTIONS = frozenset(
    {
        "cursor_secret",
        "clock",
        "max_message_bytes",
        "message_model",
        "chat_model",
        "auto_migrate",
        "corrupt_records",
    }
)
"""The keyword options of :class:`threadkeep.Store` (the rest go to the driver)."""


def store_for(driver_class: type[Any], url: str, **options: Any) -> Store:
    """Return an unopened ``Store`` holding a ``driver_class`` driver for ``url``.

    What ``open_store`` and the drivers' factories (``SqlStore(url, **options)``...) do:
    the store's options (:data:`STORE_OPTIONS`) go to :class:`threadkeep.Store`, the rest
    to the driver (``driver_class.from_url(url, **rest)`` when it has ``from_url``,
    else ``driver_class(url, **rest)``).

    Args:
        driver_class: The driver class.
        url: The store URL.
        **options: Store and driver options.

    Raises:
        InvalidArgument: If the URL or an option is invalid (an option neither takes).
    """
    store_options = {k: v for k, v in options.items() if k in STORE_OPTIONS}
    driver_options = {k: v for k, v in options.items() if k not in STORE_OPTIONS}
    build = getattr(driver_class, "from_url", driver_class)
    check_options(driver_class, build, url, driver_options)
    return Store(build(url, **driver_options), **store_options)
