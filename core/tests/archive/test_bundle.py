"""The bundle format: deterministic, versioned, checked on read; and archive refs."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import AsyncIterator

import pytest

from threadkeep import ArchiveError, ArchiveIntegrityError, ArchiveRef, Message, Store
from threadkeep._archive._bundle import FORMAT_VERSION, BundleReader, BundleStats, write_bundle


async def _stream(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _bundle(store: Store) -> tuple[bytes, BundleStats]:
    chat = await store.create_chat("u", "t")
    await store.append_messages(
        chat.chat_id, [Message(role="user", content=f"m{i}\x00") for i in range(130)]
    )
    chat = await store.get_chat(chat.chat_id)
    stats = BundleStats()
    data = b"".join([c async for c in write_bundle(store, chat, stats)])
    return data, stats


async def _read(data: bytes) -> BundleReader:
    reader = BundleReader(_stream(data[:100], data[100:]))
    async for _ in reader.batches():
        pass
    return reader


async def test_same_state_same_bytes(store: Store) -> None:
    data, stats = await _bundle(store)
    chat = (await store.list_chats()).items[0]
    again = b"".join([c async for c in write_bundle(store, chat, BundleStats())])
    assert again == data
    assert stats.sha256 == hashlib.sha256(data).hexdigest()
    assert (stats.messages, stats.size) == (130, len(data))


async def test_reader_round_trip_and_header(store: Store) -> None:
    data, stats = await _bundle(store)
    lines = gzip.decompress(data).splitlines()
    header = json.loads(lines[0])
    assert (header["format"], header["version"]) == ("threadkeep-bundle", FORMAT_VERSION)
    assert json.loads(lines[-1]) == {"t": "end", "messages": 130, "steps": 0}
    reader = await _read(data)
    assert (reader.messages, reader.sha256) == (130, stats.sha256)


async def test_newer_version_is_refused() -> None:
    data = gzip.compress(b'{"format":"threadkeep-bundle","version":99,"chat":{}}\n')
    with pytest.raises(ArchiveIntegrityError, match="upgrade"):
        await _read(data)


@pytest.mark.parametrize("cut", [10, -30, -1])
async def test_truncated_bundle_is_refused(store: Store, cut: int) -> None:
    data, _ = await _bundle(store)
    with pytest.raises(ArchiveIntegrityError):
        await _read(data[:cut])


async def test_trailer_counts_are_checked() -> None:
    text = (
        b'{"format":"threadkeep-bundle","version":1,"chat":{}}\n'
        b'{"t":"end","messages":2,"steps":0}\n'
    )
    with pytest.raises(ArchiveIntegrityError, match="trailer"):
        await _read(gzip.compress(text))


def test_refs_parse_and_print() -> None:
    url = "s3://bucket/pre/fix/_/2026/01/abc.tkb"
    ref = ArchiveRef.parse(url + "#sha256=" + "f" * 64)
    assert (ref.root_url, ref.key) == ("s3://bucket/pre/fix", "_/2026/01/abc.tkb")
    assert str(ref) == url + "#sha256=" + "f" * 64
    assert ArchiveRef.parse("file:///d/_/2026/01/abc.tkb").root_url == "file:///d"
    for bad in ("s3://bucket/abc.tkb", url + "#md5=00", "nope", url[:-4]):
        with pytest.raises(ArchiveError):
            ArchiveRef.parse(bad)
