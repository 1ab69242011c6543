"""The cursor codec: opaque, signed, bound to its scope (SPEC section 3, "Pages")."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from threadkeep import CursorCodec, InvalidCursor, Message, open_store

SECRET = b"s" * 32
SCOPE = {"kind": "messages", "chat_id": "c-1", "filter": {"roles": None}}


def test_round_trip_keeps_the_position():
    codec = CursorCodec(SECRET)
    for position in (0, 42, 2**62, "text", [3, "x"], {"seq": 7}):
        assert codec.decode(codec.encode(SCOPE, position), SCOPE) == position


def test_cursor_is_url_safe_ascii():
    cursor = CursorCodec(SECRET).encode(SCOPE, 12345)
    assert cursor.isascii()
    assert all(c.isalnum() or c in "-_." for c in cursor)


def test_every_altered_character_is_rejected():
    codec = CursorCodec(SECRET)
    cursor = codec.encode(SCOPE, 99)
    for index, char in enumerate(cursor):
        for replacement in {"A", "B", "-", "."} - {char}:
            altered = cursor[:index] + replacement + cursor[index + 1 :]
            with pytest.raises(InvalidCursor):
                codec.decode(altered, SCOPE)


def test_other_secret_is_rejected():
    cursor = CursorCodec(SECRET).encode(SCOPE, 5)
    with pytest.raises(InvalidCursor, match="signature"):
        CursorCodec(b"t" * 32).decode(cursor, SCOPE)


def test_other_scope_is_rejected():
    codec = CursorCodec(SECRET)
    cursor = codec.encode(SCOPE, 5)
    with pytest.raises(InvalidCursor, match="another chat or filter"):
        codec.decode(cursor, {**SCOPE, "chat_id": "c-2"})
    with pytest.raises(InvalidCursor):
        codec.decode(cursor, {**SCOPE, "filter": {"roles": ["user"]}})


@pytest.mark.parametrize("cursor", ["", "abc", "a.b.c", "!!!.???", "é.é", ".", "e30.", 17, None])
def test_malformed_cursors_are_rejected(cursor: object):
    with pytest.raises(InvalidCursor):
        CursorCodec(SECRET).decode(cursor, SCOPE)  # type: ignore[arg-type]


def test_short_secret_is_refused():
    with pytest.raises(ValueError, match="16 bytes"):
        CursorCodec(b"short")


async def test_store_cursors_are_bound_to_their_chat_and_secret(memory_url: str):
    async with open_store(memory_url, cursor_secret="a" * 32) as store:
        first = await store.create_chat("u", "one")
        second = await store.create_chat("u", "two")
        for chat in (first, second):
            await store.append_messages(
                chat.chat_id, [Message(role="user", content=str(i)) for i in range(3)]
            )
        page = await store.list_messages(first.chat_id, limit=2)
        assert page.has_more
        assert page.next_cursor
        older = await store.list_messages(first.chat_id, limit=2, cursor=page.next_cursor)
        assert [m.content for m in older.items] == ["0"]
        with pytest.raises(InvalidCursor):
            await store.list_messages(second.chat_id, limit=2, cursor=page.next_cursor)
    async with open_store(memory_url, cursor_secret="b" * 32) as other:
        with pytest.raises(InvalidCursor):
            await other.list_messages(first.chat_id, limit=2, cursor=page.next_cursor)


def _version1_cursor(secret: bytes, scope: dict[str, object], position: object) -> str:
    """A cursor as the codec wrote every cursor before version 2 (JSON payload, ``.``, MAC)."""

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    canonical = json.dumps(scope, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(canonical.encode("ascii")).hexdigest()[:32]
    payload = {"v": 1, "s": digest, "p": position}
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("ascii")
    return f"{b64(body)}.{b64(hmac.new(secret, body, hashlib.sha256).digest())}"


def test_integer_positions_get_the_short_packed_form():
    codec = CursorCodec(SECRET)
    for position in (0, 1, -1, 500_001, 2**63 - 1, -(2**63)):
        cursor = codec.encode(SCOPE, position)
        assert "." not in cursor
        assert len(cursor) == 76
        assert codec.decode(cursor, SCOPE) == position
    for position in (2**63, -(2**63) - 1, True, "7"):  # outside the packed form: version 1
        cursor = codec.encode(SCOPE, position)
        assert "." in cursor
        assert codec.decode(cursor, SCOPE) == position


def test_cursors_written_before_version_2_still_decode():
    old = _version1_cursor(SECRET, SCOPE, 12345)
    assert CursorCodec(SECRET).decode(old, SCOPE) == 12345
    with pytest.raises(InvalidCursor, match="another chat or filter"):
        CursorCodec(SECRET).decode(old, {**SCOPE, "chat_id": "c-2"})
    with pytest.raises(InvalidCursor, match="signature"):
        CursorCodec(b"t" * 32).decode(old, SCOPE)


def test_packed_cursor_of_another_secret_or_scope_is_rejected():
    cursor = CursorCodec(SECRET).encode(SCOPE, 77)
    with pytest.raises(InvalidCursor, match="signature"):
        CursorCodec(b"t" * 32).decode(cursor, SCOPE)
    with pytest.raises(InvalidCursor, match="another chat or filter"):
        CursorCodec(SECRET).decode(cursor, {**SCOPE, "filter": {"roles": ["user"]}})
    # Same length, not base64url, or altered at either end: all refused.
    for altered in ("!" * 76, "é" * 76, "A" + cursor[1:], cursor[:-1] + "A", cursor[:-1] + "B"):
        if altered != cursor:
            with pytest.raises(InvalidCursor):
                CursorCodec(SECRET).decode(altered, SCOPE)
