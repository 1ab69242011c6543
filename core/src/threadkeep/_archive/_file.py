"""``FileArchive``: bundles in a local directory (``file:///path``).

Each object is one file whose first line is a JSON header (etag and metadata) followed by
the body, so an object and its metadata appear together or not at all. A put writes a
temporary file (exclusive create, ``.``-prefixed so listings skip it), fsyncs it, then
publishes it atomically: ``os.link`` for create-only (fails if the key exists) or
``os.replace`` under a directory lock for ``if_match``; the directory is fsynced after.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, Self
from urllib.parse import unquote, urlsplit

from .._errors import ArchiveError, BackendUnavailable, Conflict, InvalidArgument
from ._objects import ObjectInfo, check_key

__all__ = ["FileArchive"]

_READ_CHUNK = 1 << 20
_WRITE_BUFFER = 1 << 20
_LOCK_NAME = ".threadkeep.lock"


@contextlib.contextmanager
def _map_os_errors(key: str) -> Iterator[None]:
    """Map ``OSError`` to the threadkeep tree (the driver's one mapping point)."""
    try:
        yield
    except FileExistsError as exc:
        raise Conflict(f"an archive object already exists at {key!r}") from exc
    except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        raise ArchiveError(f"archive object {key!r}: {exc.strerror}; check the path") from exc
    except OSError as exc:
        raise BackendUnavailable(f"archive object {key!r}: {exc}; retry later") from exc


def _read_header(handle: IO[bytes], key: str) -> tuple[dict[str, object], int]:
    line = handle.readline(1 << 20)
    try:
        header = json.loads(line)
    except ValueError as exc:
        raise ArchiveError(f"archive object {key!r} has no threadkeep header") from exc
    if not isinstance(header, dict) or "etag" not in header:
        raise ArchiveError(f"archive object {key!r} has no threadkeep header")
    return header, len(line)


class FileArchive:
    """An :class:`threadkeep.typing.ArchiveStore` on a local directory.

    Args:
        url: ``file:///absolute/directory`` (created on open if missing).
        fsync: Flush files and directories to disk before a put returns (default on).
    """

    schemes: ClassVar[tuple[str, ...]] = ("file",)

    def __init__(self, url: str, *, fsync: bool = True) -> None:
        parts = urlsplit(url)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or not parts.path:
            raise InvalidArgument(f"{url!r} is not an archive URL like 'file:///var/archive'")
        self.url = url.rstrip("/")
        self.root = Path(unquote(parts.path))
        self.fsync = fsync

    @classmethod
    def from_url(cls, url: str, **options: bool) -> Self:
        """Build an unopened archive for ``url``; see the class docstring."""
        return cls(url, **options)

    async def open(self) -> Self:
        """Create the root directory if needed.

        Returns:
            The archive, open.

        Raises:
            ArchiveError: If the root cannot be created (permissions, a file in the way:
                the root or a directory above it is a regular file).
            BackendUnavailable: If the file system fails otherwise (I/O error).
        """
        root = str(self.root)

        def make_root() -> None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError) as exc:
                where = "is a file" if self.root.is_file() else "is below a file"
                msg = (
                    f"archive root {root!r} {where}, not a directory; give the archive URL "
                    "of a directory (for example 'file:///var/archive')"
                )
                raise ArchiveError(msg) from exc
            except PermissionError as exc:
                msg = (
                    f"archive root {root!r} cannot be created: {exc.strerror}; "
                    "check its permissions"
                )
                raise ArchiveError(msg) from exc

        with _map_os_errors(root):
            await asyncio.to_thread(make_root)
        return self

    async def close(self) -> None:
        """Nothing to release (files are opened per call)."""

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def ref_for(self, key: str) -> str:
        """Return ``file:///root/key``."""
        return f"{self.url}/{check_key(key)}"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    # -- writes ----------------------------------------------------------------------------

    async def put(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
    ) -> ObjectInfo:
        """Store ``chunks`` at ``key``; see :meth:`threadkeep.typing.ArchiveStore.put`.

        Memory: at most about 1 MiB of body is buffered. Raises ``Conflict`` as the
        protocol says, ``BackendUnavailable`` on I/O errors (nothing is published then).
        """
        path = self._path(key)
        etag = uuid.uuid4().hex
        header = json.dumps({"etag": etag, "metadata": dict(metadata)}).encode() + b"\n"
        temp = path.parent / f".{path.name}.{etag}.tmp"
        with _map_os_errors(key):
            handle = await asyncio.to_thread(self._create_temp, temp)
        try:
            size = await self._write_body(handle, header, chunks, key)
            with _map_os_errors(key):
                await asyncio.to_thread(self._publish, temp, path, if_match)
        finally:
            with contextlib.suppress(OSError):
                handle.close()
                temp.unlink(missing_ok=True)
        return ObjectInfo(key=key, size=size, etag=etag, metadata=dict(metadata))

    @staticmethod
    def _create_temp(temp: Path) -> IO[bytes]:
        for _ in range(3):  # a concurrent delete may prune the empty directory meanwhile
            temp.parent.mkdir(parents=True, exist_ok=True)
            try:
                return temp.open("xb")
            except FileNotFoundError:
                continue
        return temp.open("xb")

    async def _write_body(
        self, handle: IO[bytes], header: bytes, chunks: AsyncIterable[bytes], key: str
    ) -> int:
        buffer = bytearray(header)
        size = 0
        async for chunk in chunks:
            buffer += chunk
            size += len(chunk)
            if len(buffer) >= _WRITE_BUFFER:
                with _map_os_errors(key):
                    await asyncio.to_thread(handle.write, bytes(buffer))
                buffer.clear()
        with _map_os_errors(key):
            await asyncio.to_thread(self._finish_file, handle, bytes(buffer))
        return size

    def _finish_file(self, handle: IO[bytes], tail: bytes) -> None:
        handle.write(tail)
        handle.flush()
        if self.fsync:
            os.fsync(handle.fileno())
        handle.close()

    def _publish(self, temp: Path, path: Path, if_match: str | None) -> None:
        if if_match is None:
            os.link(temp, path)  # atomic create-only: FileExistsError if the key is taken
        else:
            with self._locked():
                current = self._head_sync(path)
                if current is None or current.etag != if_match:
                    raise Conflict(f"archive object {path.name!r} is not at etag {if_match}")
                os.replace(temp, path)
        self._sync_dir(path.parent)

    def _sync_dir(self, directory: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _prune(self, directory: Path) -> None:
        """Remove empty directories up to the root, so erased keys leave no names behind."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with (self.root / _LOCK_NAME).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    async def delete(self, key: str) -> bool:
        """Remove the object at ``key``; return whether one was there."""
        path = self._path(key)

        def remove() -> bool:
            with self._locked():
                try:
                    path.unlink()
                except FileNotFoundError:
                    return False
                self._sync_dir(path.parent)
                self._prune(path.parent)
            return True

        with _map_os_errors(key):
            return await asyncio.to_thread(remove)

    # -- reads -----------------------------------------------------------------------------

    def _head_sync(self, path: Path) -> ObjectInfo | None:
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return None
        with handle:
            header, length = _read_header(handle, path.name)
            size = os.fstat(handle.fileno()).st_size - length
        metadata = header.get("metadata")
        key = path.relative_to(self.root).as_posix()
        return ObjectInfo(
            key=key,
            size=size,
            etag=str(header["etag"]),
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
        )

    async def head(self, key: str) -> ObjectInfo | None:
        """Return the object's size, etag and metadata, or ``None``."""
        path = self._path(key)
        with _map_os_errors(key):
            return await asyncio.to_thread(self._head_sync, path)

    async def get(self, key: str) -> AsyncIterator[bytes]:
        """Yield the body in chunks of up to 1 MiB.

        Raises:
            ArchiveError: If there is no object at ``key``, or it cannot be read (a
                directory in its place, no permission).
            BackendUnavailable: If reading fails otherwise (an I/O error); retry later.
        """
        path = self._path(key)
        with _map_os_errors(key):
            try:
                handle = await asyncio.to_thread(path.open, "rb")
            except FileNotFoundError as exc:
                raise ArchiveError(f"no archive object at {self.ref_for(key)}") from exc
        with handle:
            with _map_os_errors(key):
                await asyncio.to_thread(_read_header, handle, key)
            while True:
                with _map_os_errors(key):
                    chunk = await asyncio.to_thread(handle.read, _READ_CHUNK)
                if not chunk:
                    return
                yield chunk

    async def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield the objects whose key starts with ``prefix``, in key order."""

        def keys() -> list[str]:
            found = []
            for directory, dirs, files in os.walk(self.root):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in files:
                    if not name.startswith("."):
                        key = (Path(directory) / name).relative_to(self.root).as_posix()
                        if key.startswith(prefix):
                            found.append(key)
            return sorted(found)

        with _map_os_errors(prefix):
            names = await asyncio.to_thread(keys)
        for key in names:
            info = await self.head(key)
            if info is not None:
                yield info
