"""Dedup keys and participant ids against vectors computed here with hashlib (AG-UI seed,
"Identifier helpers"); the expected values never come from the functions under test."""

from __future__ import annotations

import hashlib
from uuid import UUID

import pytest

from threadkeep import (
    DEDUPLICATION_KEY_LENGTH,
    Chat,
    chat_deduplication_key,
    normalize_participant_id,
    participant_id,
    session_deduplication_key,
)

USER_UUID = UUID("6f1c1d2e-8a4b-4c3d-9e5f-0a1b2c3d4e5f")


def sha256_hex(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize(
    ("user_id", "thread_id", "raw"),
    [
        ("user-1", "thread-1", b"chat\x00user-1\x00thread-1"),
        (USER_UUID, "t", b"chat\x006f1c1d2e-8a4b-4c3d-9e5f-0a1b2c3d4e5f\x00t"),
        ("ünï", "线程-🧵", "chat\0ünï\0线程-🧵".encode()),
        ("u", "", b"chat\x00u\x00"),
    ],
)
def test_chat_key_is_sha256_of_nul_joined_parts(user_id: str | UUID, thread_id: str, raw: bytes):
    expected = sha256_hex(raw)[:64]
    assert chat_deduplication_key(user_id, thread_id) == expected
    assert len(expected) == DEDUPLICATION_KEY_LENGTH == 64
    assert expected == expected.lower()


def test_session_key_namespaces_and_parts():
    assert session_deduplication_key("chat") == sha256_hex(b"chat")
    assert session_deduplication_key("run", "a", "b", "c") == sha256_hex(b"run\x00a\x00b\x00c")
    # The namespace is part of the key: same parts, other namespace, other key.
    assert session_deduplication_key("step", "x") != session_deduplication_key("chat", "x")


@pytest.mark.parametrize(
    ("tenant_id", "raw"),
    [
        ("acme", b"chat\x00acme\x00user-1\x00thread-1"),
        ("ä/é", "chat\0ä/é\0user-1\0thread-1".encode()),
    ],
)
def test_a_tenant_is_the_first_part_of_its_chats_key(tenant_id: str, raw: bytes) -> None:
    """Issue 12: ``sha256("chat" NUL tenant NUL user NUL thread)``; ``None`` is the seed's key."""
    assert chat_deduplication_key("user-1", "thread-1", tenant_id) == sha256_hex(raw)
    assert Chat(user_id="user-1", thread_id="thread-1", tenant_id=tenant_id).dedup_key == (
        sha256_hex(raw)
    )
    plain = sha256_hex(b"chat\x00user-1\x00thread-1")
    assert chat_deduplication_key("user-1", "thread-1", None) == plain
    assert chat_deduplication_key("user-1", "thread-1", tenant_id) != plain


def test_chat_model_exposes_its_dedup_key():
    chat = Chat(user_id="user-1", thread_id="thread-1")
    assert chat.dedup_key == sha256_hex(b"chat\x00user-1\x00thread-1")


def test_participant_id_is_24_hex_of_the_user_digest():
    assert participant_id("user-1") == sha256_hex(b"user-1")[:24]
    assert participant_id(USER_UUID) == sha256_hex(str(USER_UUID).encode())[:24]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("0123456789abcdef01234567", "0123456789abcdef01234567"),
        ("  0123456789ABCDEF01234567\n", "0123456789abcdef01234567"),
        ("0123456789abcdef0123456", None),  # 23 characters
        ("0123456789abcdef012345678", None),  # 25 characters
        ("0123456789abcdef0123456g", None),  # not hex
        ("", None),
        (None, None),
    ],
)
def test_participant_override_is_used_only_when_valid(override: str | None, expected: str | None):
    assert normalize_participant_id(override) == expected
    derived = sha256_hex(b"user-1")[:24]
    assert participant_id("user-1", override=override) == (expected or derived)
