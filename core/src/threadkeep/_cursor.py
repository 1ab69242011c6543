"""Opaque, signed cursors bound to the query they page.

Every cursor holds a format version, a digest of the query's scope (what is paged: which
chat, which filter) and the keyset position to continue from, signed with
HMAC-SHA256(secret). Decoding checks the signature in constant time, then the scope, so a
cursor from another chat, another filter or another store secret, or with any byte
changed, raises :class:`~threadkeep.InvalidCursor`. Two forms:

- **version 2** (written for integer positions, every page of the store): one base64url
  token of 57 bytes, ``0x02 || scope digest (16 bytes) || position (8 bytes, signed big
  endian) || HMAC-SHA256 of those 25 bytes (32 bytes)``; packed and signed without JSON,
  so a cursor costs a few microseconds to make or check.
- **version 1** (written for other positions, and the only form before): ``base64url(JSON
  payload) "." base64url(HMAC)``. Cursors are opaque and short-lived, but one a user kept
  (a bookmarked "older" link) still decodes: the two forms are told apart by the ``"."``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import struct
from typing import Any

from ._errors import InvalidCursor

__all__ = ["CursorCodec", "scope_digest"]

_VERSION = 1
_MIN_SECRET_BYTES = 16
_PACKED = struct.Struct(">B16sq")
"""Version 2: the version byte, the scope digest's 16 bytes, the position."""
_PACKED_VERSION = 2
_MAC_BYTES = 32
_PACKED_TEXT = (_PACKED.size + _MAC_BYTES) * 4 // 3
"""Characters of a version 2 cursor (57 bytes: base64 without padding)."""
_POSITIONS = range(-(2**63), 2**63)
_DIGEST_CACHE = 4096
"""Scopes whose digest is remembered (a few hundred bytes each); forgotten all at once."""
_DIGESTS: dict[str, bytes] = {}


def scope_digest(scope: dict[str, Any]) -> str:
    """Return a short stable digest of a query scope.

    Args:
        scope: JSON-compatible description of what is paged, for example
            ``{"kind": "messages", "chat_id": "...", "filter": {...}}``.

    Returns:
        The first 32 hex characters of the SHA-256 of the canonical JSON of ``scope``.
    """
    return _raw_digest(scope).hex()


def _raw_digest(scope: dict[str, Any]) -> bytes:
    """The 16 bytes of :func:`scope_digest` (its hex form is the 32 characters).

    Remembered by ``repr(scope)``: a page read checks its cursor and signs the next one for
    the same scope, and pages of one chat repeat it. Scopes are JSON data (str, int, float,
    bool, None, lists and dicts), for which equal ``repr`` means equal data.
    """
    key = repr(scope)
    digest = _DIGESTS.get(key)
    if digest is None:
        canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        digest = hashlib.sha256(canonical.encode("ascii")).digest()[:16]
        if len(_DIGESTS) >= _DIGEST_CACHE:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


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
            An opaque ASCII string, safe in URLs: version 2 for an integer position in the
            signed 64-bit range, version 1 otherwise (see the module).
        """
        if type(position) is int and position in _POSITIONS:
            packed = _PACKED.pack(_PACKED_VERSION, _raw_digest(scope), position)
            return _b64encode(packed + self._sign(packed))
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
        if isinstance(cursor, str) and len(cursor) == _PACKED_TEXT and "." not in cursor:
            return self._decode_packed(cursor, scope)
        body = self._verified_body(cursor)
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise InvalidCursor("cursor payload is not valid JSON") from exc
        if not isinstance(payload, dict) or payload.get("v") != _VERSION or "p" not in payload:
            raise InvalidCursor("cursor has an unknown format; start again without a cursor")
        if not hmac.compare_digest(str(payload.get("s")), scope_digest(scope)):
            raise InvalidCursor(_OTHER_SCOPE)
        return payload["p"]

    def _decode_packed(self, cursor: str, scope: dict[str, Any]) -> int:
        """Verify and read a version 2 cursor (``len(cursor) == _PACKED_TEXT``)."""
        try:
            raw = _b64decode(cursor)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise InvalidCursor("cursor is not valid base64url") from exc
        if _b64encode(raw) != cursor:  # 57 bytes use every bit of the 76 characters
            raise InvalidCursor("cursor is not in canonical base64url form")
        packed, mac = raw[: _PACKED.size], raw[_PACKED.size :]
        if not hmac.compare_digest(mac, self._sign(packed)):
            raise InvalidCursor(_BAD_SIGNATURE)
        version, digest, position = _PACKED.unpack(packed)
        if version != _PACKED_VERSION:
            raise InvalidCursor("cursor has an unknown format; start again without a cursor")
        if not hmac.compare_digest(digest, _raw_digest(scope)):
            raise InvalidCursor(_OTHER_SCOPE)
        return int(position)

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
            raise InvalidCursor(_BAD_SIGNATURE)
        return body

    def _sign(self, body: bytes) -> bytes:
        return hmac.digest(self._secret, body, "sha256")  # the one-shot C path of hmac


_BAD_SIGNATURE = (
    "cursor signature does not verify: altered, or issued by a store with another secret"
)
_OTHER_SCOPE = "cursor was issued for another chat or filter; start again without a cursor"
