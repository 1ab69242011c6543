"""threadkeep driver for PostgreSQL (asyncpg) and SQLite (aiosqlite) on SQLAlchemy 2.

Install ``threadkeep-sql`` and open a store by URL::

    from threadkeep import open_store

    async with open_store("sqlite+aiosqlite:///./threadkeep.db") as store:
        ...

The driver registers itself through the ``threadkeep`` entry-point group
(``threadkeep_sql.plugin``), the same way a third-party driver does.
"""

from ._errors import map_native_errors
from ._store import SqlStore

__all__ = ["SqlStore", "map_native_errors"]
