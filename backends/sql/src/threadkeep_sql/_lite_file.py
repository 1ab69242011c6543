"""The SQLite file a store opened: later connections never create it, writes refuse a stale one.

SQLite keeps reading and writing a database file that was deleted or renamed while it is
open (the inode lives on, unreachable, until the last connection closes), and a new
connection to a path that names nothing creates an empty database there ("no such table"
on the next statement). Both lose writes without a word: appends after ``rm store.db``
succeeded into the unlinked file and were gone on close.

:class:`LiteFile` pins the file's identity, ``(st_dev, st_ino)`` of the path, when the first
connection has opened it, and from then on:

- every later connection opens the path with ``mode=rw`` (a SQLite URI), so a missing file
  is an error (``SQLITE_CANTOPEN``), never a new empty database, and a connection whose path
  now names another file is refused when it is made (:meth:`LiteFile.connected`);
- every write transaction checks, just before its ``COMMIT``, that the path still names the
  pinned file (:meth:`LiteFile.check`, one ``os.stat``: about 2 microseconds), and rolls
  back with ``BackendUnavailable`` otherwise.

Reads are not checked: a connection made before the file went reads the file the store
opened (its content as of the last write the store committed, since every later write is
refused), and no connection ever reads another file. The store has to be reopened to see
the file now at the path. What is left: a file deleted in the microseconds between the
check and the commit takes that one commit with it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from threadkeep import BackendUnavailable

__all__ = ["LiteFile"]


class LiteFile:
    """A SQLite database file by path, and the file the store's first connection opened there.

    Args:
        database: The path from the store URL (relative to the working directory when the
            store is built, or absolute).
    """

    __slots__ = ("_key", "path")

    def __init__(self, database: str) -> None:
        self.path = str(Path(database).expanduser().absolute())
        self._key: tuple[int, int] | None = None

    def connect_args(self, cargs: list[Any], cparams: dict[str, Any]) -> None:
        """SQLAlchemy ``do_connect`` hook: open the path as a SQLite URI.

        The first connection may create the file (``mode=rwc``); once the file is pinned,
        ``mode=rw``: a missing file fails the connection instead of becoming a new, empty
        database. Changes ``cargs``/``cparams`` in place.
        """
        mode = "rwc" if self._key is None else "rw"
        cargs[:] = [f"file:{quote(self.path)}?mode={mode}"]
        cparams["uri"] = True

    def connected(self) -> None:
        """SQLAlchemy ``connect`` hook: pin the file the first connection opened.

        Raises:
            BackendUnavailable: If the file is already pinned and the path now names
                another file or nothing (the connection is then not used).
        """
        if self._key is None:
            self._key = self._identity()
            return
        self.check()

    def check(self) -> None:
        """Raise unless the path still names the file the store opened (one ``os.stat``).

        Raises:
            BackendUnavailable: If the file was deleted, or moved away and the path now
                names another file or nothing; the message says what to do.
        """
        key = self._key
        if key is None:
            return  # no connection has opened the file yet, so nothing was written to it
        try:
            found = os.stat(self.path)
        except OSError:
            found = None
        if found is not None and (found.st_dev, found.st_ino) == key:
            return
        what = "deleted or moved away" if found is None else "replaced by another file"
        msg = (
            f"the SQLite file {self.path} was {what} while the store had it open; nothing "
            "more is written to the old file (it is unreachable and would be lost on close): "
            "put the file back or close the store and open it again on the file now there"
        )
        raise BackendUnavailable(msg)

    def moved(self) -> bool:
        """Whether the file was pinned and the path no longer names it."""
        try:
            self.check()
        except BackendUnavailable:
            return True
        return False

    def before_commit(self, _connection: Any) -> None:
        """SQLAlchemy ``commit`` hook: :meth:`check` before a transaction commits.

        Raises:
            BackendUnavailable: As :meth:`check`; the transaction is rolled back.
        """
        self.check()

    def _identity(self) -> tuple[int, int]:
        found = os.stat(self.path)
        return found.st_dev, found.st_ino
