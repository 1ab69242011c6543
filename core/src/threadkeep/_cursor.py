"""Opaque, signed cursors bound to the query they page (SPEC section 3, "Pages").

A cursor is ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload))``. The payload
holds a format version, a digest of the query's scope (what is paged: which chat, which
filter) and the keyset position to continue from. Decoding checks the signature in constant
time, then the scope, so a cursor from another chat, another filter or another store secret,
or with any byte changed, raises :class:`~threadkeep.InvalidCursor`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from ._errors import InvalidCursor

__all__ = ["CursorCodec", "scope_digest"]

_VERSION = 1
_MIN_SECRET_BYTES = 16


def scope_digest(scope: dict[str, Any]) -> str:
    """Return a short stable digest of a query scope.

    Args:
        scope: JSON-compatible description of what is paged, for example
            ``{"kind": "messages", "chat_id": "...", "filter": {...}}``.

    Returns:
        The first 32 hex characters of the SHA-256 of the canonical JSON of ``scope``.
    """
    canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:32]


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii"))


class CursorCodec:
    """Signs and verifies cursors with one secret.

    Args:
        secret: At least 16 bytes; stores configured with the same secret accept each
            other's cursors (across processes and restarts).

    Raises:
        ValueError: If ``secret`` is shorter than 16 bytes.
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) < _MIN_SECRET_BYTES:
            msg = f"a cursor secret needs at least {_MIN_SECRET_BYTES} bytes"
            raise ValueError(msg)
        self._secret = secret

    def encode(self, scope: dict[str, Any], position: Any) -> str:
        """Return a cursor that continues ``scope`` after ``position``.

        Args:
            scope: What is paged (see :func:`scope_digest`).
            position: JSON-compatible keyset position (for example a ``seq`` integer).

        Returns:
            An opaque ASCII string, safe in URLs.
        """
        payload = {"v": _VERSION, "s": scope_digest(scope), "p": position}
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("ascii")
        return f"{_b64encode(body)}.{_b64encode(self._sign(body))}"

    def decode(self, cursor: str, scope: dict[str, Any]) -> Any:
        """Verify ``cursor`` for ``scope`` and return its position.

        Args:
            cursor: A string from a previous page's ``next_cursor``.
            scope: The scope of the query now being run.

        Returns:
            The keyset position encoded in the cursor.

        Raises:
            InvalidCursor: If the cursor is malformed, its signature does not verify with this
                codec's secret, or it was issued for another scope.
        """
        body = self._verified_body(cursor)
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise InvalidCursor("cursor payload is not valid JSON") from exc
        if not isinstance(payload, dict) or payload.get("v") != _VERSION or "p" not in payload:
            raise InvalidCursor("cursor has an unknown format; start again without a cursor")
        if not hmac.compare_digest(str(payload.get("s")), scope_digest(scope)):
            raise InvalidCursor(
                "cursor was issued for another chat or filter; start again without a cursor"
            )
        return payload["p"]

    def _verified_body(self, cursor: str) -> bytes:
        if not isinstance(cursor, str) or cursor.count(".") != 1:
            raise InvalidCursor("cursor is malformed; pass a next_cursor this store returned")
        body_text, mac_text = cursor.split(".")
        try:
            body, mac = _b64decode(body_text), _b64decode(mac_text)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise InvalidCursor("cursor is not valid base64url") from exc
        if _b64encode(body) != body_text or _b64encode(mac) != mac_text:
            raise InvalidCursor("cursor is not in canonical base64url form")
        if not hmac.compare_digest(mac, self._sign(body)):
            raise InvalidCursor(
                "cursor signature does not verify: altered, or issued by a store with "
                "another secret"
            )
        return body

    def _sign(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()
