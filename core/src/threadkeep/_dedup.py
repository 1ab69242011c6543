"""Deterministic keys: chat dedup keys and participant ids.

The tenant-less chat key is the one earlier versions stored and AG-UI chat-history layers
compute (``sha256("chat" NUL user_id NUL thread_id)``), so a chat created through threadkeep
and one created through such a layer share their dedup key.
"""

from __future__ import annotations

import hashlib
import re
from uuid import UUID

__all__ = [
    "DEDUPLICATION_KEY_LENGTH",
    "PARTICIPANT_ID_LENGTH",
    "chat_deduplication_key",
    "normalize_participant_id",
    "participant_id",
    "session_deduplication_key",
]

DEDUPLICATION_KEY_LENGTH = 64
"""Characters kept of the hex digest (memory services accept keys of up to 72)."""

PARTICIPANT_ID_LENGTH = 24
"""Characters of a participant id (the shape of a MongoDB ObjectId in hex)."""

_HEX24 = re.compile(r"[0-9a-f]{24}")


def session_deduplication_key(namespace: str, *parts: str) -> str:
    """Build a stable, namespaced key for idempotent creates.

    Args:
        namespace: Logical namespace, for example ``"chat"``.
        *parts: Ordered key components.

    Returns:
        The lowercase hex SHA-256 of ``namespace`` and ``parts`` joined with NUL characters
        (UTF-8), cut to :data:`DEDUPLICATION_KEY_LENGTH` (64) characters.
    """
    joined = "\0".join((namespace, *parts))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:DEDUPLICATION_KEY_LENGTH]


def chat_deduplication_key(
    user_id: str | UUID, thread_id: str, tenant_id: str | None = None
) -> str:
    """Return the dedup key of the live chat for ``(tenant_id, user_id, thread_id)``.

    A chat's identity is ``(tenant_id, user_id, thread_id)`` (issue 12):
    two tenants may each hold a live chat for one user and thread.

    Args:
        user_id: The owning user (a UUID is used in its canonical hyphenated form).
        thread_id: The caller's thread key (the AG-UI ``thread_id``).
        tenant_id: The chat's tenant, or ``None`` for a chat without one.

    Returns:
        64 lowercase hex characters: without a tenant ``sha256("chat" NUL user_id NUL
        thread_id)``, the key earlier versions stored (fixed test vectors check it); with a tenant
        ``sha256("chat" NUL tenant_id NUL user_id NUL thread_id)``. The two forms never
        collide for clean ids: the tenant form hashes one more NUL-separated part, and
        ids hold no NUL (``as_key``).
    """
    if tenant_id is None:
        return session_deduplication_key("chat", str(user_id), thread_id)
    return session_deduplication_key("chat", tenant_id, str(user_id), thread_id)


def normalize_participant_id(raw: str | None) -> str | None:
    """Normalize a caller-supplied participant id to 24 lowercase hex characters.

    Args:
        raw: A candidate id, for example a user-id header value; surrounding whitespace and
            letter case are ignored.

    Returns:
        The normalized id, or ``None`` when ``raw`` is missing or is not exactly 24
        hexadecimal characters.
    """
    if raw is None:
        return None
    candidate = raw.strip().lower()
    return candidate if _HEX24.fullmatch(candidate) else None


def participant_id(user_id: str | UUID, *, override: str | None = None) -> str:
    """Return a stable 24-hex participant id for a user.

    Args:
        user_id: The user; hashed to derive the id.
        override: An explicit participant id; used (normalized) when it is valid 24-hex,
            otherwise ignored.

    Returns:
        ``normalize_participant_id(override)`` when valid, else the first 24 characters of the
        lowercase hex SHA-256 of ``str(user_id)`` (UTF-8).
    """
    explicit = normalize_participant_id(override)
    if explicit is not None:
        return explicit
    digest = hashlib.sha256(str(user_id).encode("utf-8")).hexdigest()
    return digest[:PARTICIPANT_ID_LENGTH]
