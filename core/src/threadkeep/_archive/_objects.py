"""What archive stores hold and how bundles are named.

A bundle lives under a deterministic key relative to the archive's root URL::

    {tenant or _}/{yyyy}/{mm}/{chat_id}.tkb       (yyyy/mm of the chat's creation)

and a chat's ``archive_ref`` is that object's full URL with its SHA-256, for example
``s3://bucket/prefix/acme/2026/01/<chat_id>.tkb#sha256=<hex>``. The root URL (what an
archive store is opened with) is the ref without its last four path segments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from .._errors import ArchiveError, InvalidArgument
from .._models import Chat

__all__ = ["BUNDLE_SUFFIX", "ArchiveRef", "ObjectInfo", "bundle_key", "check_key"]

BUNDLE_SUFFIX = ".tkb"
"""File suffix of a threadkeep bundle."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_KEY_SEGMENTS = 4


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One stored object as ``head``/``list``/``put`` describe it.

    Attributes:
        key: The key relative to the archive root.
        size: The object's length in bytes.
        etag: An opaque token that changes whenever the object is replaced (the
            ``if_match`` of a replacing ``put``).
        metadata: The string metadata given at ``put`` (``sha256``, ``format``...).
    """

    key: str
    size: int
    etag: str
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def sha256(self) -> str | None:
        """The SHA-256 recorded in the metadata, or ``None``."""
        return self.metadata.get("sha256")


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key.

    Raises:
        InvalidArgument: If it is empty, absolute, or has an empty, ``.`` or ``..``
            segment, or a segment starting with ``.`` (reserved for temporary files).
    """
    parts = key.split("/")
    if not key or any(not p or p.startswith(".") for p in parts) or "\\" in key:
        raise InvalidArgument(f"{key!r} is not an archive key like 'acme/2026/01/<id>.tkb'")
    return key


def bundle_key(chat: Chat) -> str:
    """Return the deterministic key of a chat's bundle (see the module docstring).

    Raises:
        InvalidArgument: If the chat has no ``created_at``.
    """
    if chat.created_at is None:
        raise InvalidArgument(f"chat {chat.chat_id} has no created_at; it is not a stored chat")
    tenant = quote(chat.tenant_id, safe="") if chat.tenant_id else "_"
    if tenant.startswith("."):
        tenant = "%2E" + tenant[1:]
    created = chat.created_at
    return f"{tenant}/{created:%Y}/{created:%m}/{chat.chat_id}{BUNDLE_SUFFIX}"


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """A parsed ``archive_ref``: the archive root URL, the key, and the SHA-256 (if set).

    A ref without ``#sha256=`` is written while a chat is being archived (it names where
    a bundle may exist, so erasure finds it); a verified, archived chat always has one.
    """

    root_url: str
    key: str
    sha256: str | None = None

    @classmethod
    def parse(cls, ref: str) -> ArchiveRef:
        """Parse ``{root}/{tenant}/{yyyy}/{mm}/{chat_id}.tkb[#sha256=hex]``.

        Raises:
            ArchiveError: If ``ref`` is not such a URL.
        """
        url, _, fragment = ref.partition("#")
        sha = None
        if fragment:
            name, _, value = fragment.partition("=")
            if name != "sha256" or not _SHA256.match(value):
                raise ArchiveError(f"archive_ref {ref!r} has a malformed '#sha256=' fragment")
            sha = value
        scheme, sep, rest = url.partition("://")
        parts = rest.rsplit("/", _KEY_SEGMENTS)
        if not sep or len(parts) != _KEY_SEGMENTS + 1 or not url.endswith(BUNDLE_SUFFIX):
            raise ArchiveError(f"archive_ref {ref!r} does not name a .tkb bundle")
        return cls(root_url=f"{scheme}://{parts[0]}", key="/".join(parts[1:]), sha256=sha)

    @property
    def object_url(self) -> str:
        """The object's URL without the checksum."""
        return f"{self.root_url.rstrip('/')}/{self.key}"

    def __str__(self) -> str:
        suffix = f"#sha256={self.sha256}" if self.sha256 else ""
        return self.object_url + suffix
