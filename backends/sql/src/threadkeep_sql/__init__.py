"""threadkeep driver for PostgreSQL (asyncpg) and SQLite (aiosqlite) on SQLAlchemy 2.

Install ``threadkeep-sql`` and open a store by URL::

    from threadkeep import open_store

    async with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
        ...

The driver registers itself through the ``threadkeep`` entry-point group
(``threadkeep_sql.plugin``), the same way a third-party driver does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadkeep.driver import lazy_exports

if TYPE_CHECKING:
    from ._errors import map_native_errors
    from ._store import SqlDriver, SqlStore

__all__ = [
    "SqlDriver",
    "SqlStore",
    "map_native_errors",
]

# Loaded on first use: the plugin entry point imports this package, and loading plugins must
# not pull in the driver's heavy dependencies until its scheme is opened.
_LAZY = {
    "SqlDriver": "_store",
    "SqlStore": "_store",
    "map_native_errors": "_errors",
}


__getattr__ = lazy_exports(__name__, _LAZY)
