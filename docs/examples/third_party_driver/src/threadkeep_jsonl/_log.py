"""The append-only log file: one JSON object per line, one line per commit.

Durability and atomicity come from three rules:

* A commit is one line, written with ``O_APPEND`` and ``fsync``-ed before the write returns.
  A batch of messages is one line, so it is all or nothing.
* Only the last line can be torn (a crash during its write, which never returned). Opening
  the log drops a damaged last line; a damaged line with good lines after it is corruption,
  and opening refuses to guess.
* A failed write is undone (the file is truncated back) before the error is raised, so the
  file never holds a line the in-memory tables do not.

Purging rewrites the whole file without the purged chat (write a temporary file, ``fsync``,
``os.replace``, ``fsync`` the directory), so erased data really leaves the disk.

A lock file held with ``flock`` keeps a second store instance (in this process or another)
from opening the same directory: two instances would each fold the log into their own
tables and hand out the same ``seq`` twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from threadkeep import BackendUnavailable

from ._errors import map_os_errors

__all__ = ["LOCK_NAME", "LOG_NAME", "Log", "Record"]

LOG_NAME = "threadkeep.jsonl"
"""The log's file name inside the store directory."""

LOCK_NAME = "threadkeep.lock"
"""The lock file's name; the log itself cannot carry the lock, since purging replaces it."""

Record = dict[str, Any]
"""One decoded line: ``{"secret": ...}`` or ``{"chats": [...], "messages": [...]}``."""


def encode(record: Record) -> bytes:
    """Return ``record`` as one line of UTF-8 JSON, newline included.

    JSON escapes newlines and control characters (U+0000 too) inside strings, so the only
    newline byte is the terminator. ``ensure_ascii=False`` keeps CJK and emoji readable.
    """
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def decode(line: bytes) -> Record | None:
    """Return the record a complete line holds, or ``None`` for a torn or damaged line."""
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return None
    return record if isinstance(record, dict) else None


def _fsync_directory(directory: Path) -> None:
    """Make a created or renamed entry of ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Log:
    """The log of one store directory; see the module docstring for its rules.

    Not thread-safe on its own: the store calls it under its lock.

    Args:
        directory: The store directory (created on :meth:`open` if missing).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._size = 0
        self._broken: str | None = None

    # -- open and close ------------------------------------------------------------------

    def open(self, apply: Callable[[Record], None]) -> None:
        """Lock the directory and replay every committed line through ``apply``, in order.

        Args:
            apply: Called with each record; raises ``KeyError``/``TypeError``/``ValueError``
                for a record it cannot read.

        Raises:
            BackendUnavailable: If the directory cannot be created or read, another store
                instance holds it, or the log is corrupt (a damaged line before good ones,
                or a line that is not a threadkeep record).
        """
        with map_os_errors(self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                self._lock_and_replay(apply)
            except BaseException:
                self.close()
                raise

    def _lock_and_replay(self, apply: Callable[[Record], None]) -> None:
        assert self._lock_fd is not None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            msg = (
                f"jsonl store {self.directory} is open in another store instance or process; "
                "close that one first (this driver serves one at a time)"
            )
            raise BackendUnavailable(msg) from None
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if created:
            _fsync_directory(self.directory)
        with contextlib.suppress(FileNotFoundError):  # left by a purge that crashed
            (self.directory / (LOG_NAME + ".tmp")).unlink()
        self._size = self._replay(apply)
        self._broken = None

    def _replay(self, apply: Callable[[Record], None]) -> int:
        """Apply every good line; drop a torn last line; return the good length in bytes."""
        assert self._fd is not None
        good = 0
        with self.path.open("rb") as lines:  # binary lines split on b"\n" only
            for number, line in enumerate(lines, start=1):
                record = decode(line)
                if record is None:
                    if any(decode(rest) is not None for rest in lines):
                        msg = (
                            f"{self.path} line {number} (byte {good}) is damaged and committed "
                            "lines follow it; restore the file from a backup"
                        )
                        raise BackendUnavailable(msg)
                    break
                try:
                    apply(record)
                except (KeyError, TypeError, ValueError) as exc:
                    msg = f"{self.path} line {number} is not a threadkeep record ({exc!r})"
                    raise BackendUnavailable(msg) from exc
                good += len(line)
        if os.fstat(self._fd).st_size > good:
            # The tail is a write that never returned (a crash mid-write): it never happened.
            os.ftruncate(self._fd, good)
            os.fsync(self._fd)
        return good

    def close(self) -> None:
        """Close the log and release the directory lock; never raises."""
        for fd in (self._fd, self._lock_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = None

    # -- writes ----------------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Commit ``record``: append it as one line and ``fsync`` before returning.

        Raises:
            BackendUnavailable: If the write or ``fsync`` fails (the line is truncated away
                first, so nothing was committed), or an earlier failure could not be undone
                (then every write fails until the store is reopened).
        """
        fd = self._writable()
        data = encode(record)
        with map_os_errors(self.directory):
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError:
                self._undo(fd)
                raise
        self._size += len(data)

    def _undo(self, fd: int) -> None:
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
        except OSError as exc:
            self._broken = (
                f"jsonl store {self.directory}: a failed write could not be undone ({exc}); "
                "close and reopen the store"
            )

    def rewrite(self, records: Iterable[Record]) -> None:
        """Replace the whole log with ``records``, atomically (what purging uses).

        Raises:
            BackendUnavailable: If writing fails. Before the rename the old log stands
                untouched; after it, a failure to reopen the file leaves the log refusing
                writes until the store is reopened.
        """
        self._writable()
        temporary = self.directory / (LOG_NAME + ".tmp")
        with map_os_errors(self.directory):
            with temporary.open("wb") as out:
                for record in records:
                    out.write(encode(record))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
            self._broken = f"jsonl store {self.directory}: reopen the store after a failed purge"
            _fsync_directory(self.directory)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
            assert self._fd is not None
            os.close(self._fd)
            self._fd, self._size, self._broken = fd, os.fstat(fd).st_size, None

    def _writable(self) -> int:
        if self._broken is not None:
            raise BackendUnavailable(self._broken)
        if self._fd is None:
            raise BackendUnavailable(f"jsonl store {self.directory} is closed; open it first")
        return self._fd
