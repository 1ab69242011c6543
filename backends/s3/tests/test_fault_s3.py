"""The S3 cold tier dying for real: SIGKILL mid-upload, mid-restore, between upload and the
hot-side delete, 5xx answers, a lost response and a slow upload (docs/reliability.md, "The S3
cold tier fails").

Each test runs its own SeaweedFS (``OwnWeed``: killed with SIGKILL and started again on the
same data) behind a ``FaultProxy`` the store uses as its endpoint; the proxy holds a request
or response at a byte count and reports it, so every kill lands at a known point without a
sleep. The invariant checked after every fault: the chat reads back from exactly one tier
(active with every hot row, or archived with no hot row and one verified object), nothing
lost, doubled or reordered; the error is ``BackendUnavailable`` naming the S3 call; a re-run
after the server is back finishes the archive.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from threadkeep import (
    Archiver,
    ArchiveRef,
    BackendUnavailable,
    ChatStatus,
    Message,
    Role,
    Store,
    open_store,
)
from threadkeep_s3 import PART_SIZE, S3Archive

from ._s3_faults import ACCESS_KEY, SECRET_KEY, WEED, FaultProxy, OwnWeed, Rule

BUCKET = "faults"
_GUARD = 120  # seconds: hang guard of every wait
_EXISTS = ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")  # weed says the second after a restart


def _answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=2)
    except urllib.error.HTTPError:
        return True  # any HTTP status: the S3 port is up
    except OSError:
        return False
    return True


async def _usable(port: int) -> None:
    """Wait until the server creates (or has) the bucket and stores and reads an object."""
    from aiobotocore.session import get_session

    deadline = time.monotonic() + _GUARD
    session = get_session()
    async with session.create_client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
    ) as client:
        while True:
            try:
                try:
                    await client.create_bucket(Bucket=BUCKET)
                except client.exceptions.ClientError as exc:
                    if exc.response["Error"]["Code"] not in _EXISTS:
                        raise
                await client.put_object(Bucket=BUCKET, Key="probe/x", Body=b"probe")
                got = await client.get_object(Bucket=BUCKET, Key="probe/x")
                assert await got["Body"].read() == b"probe"
                await client.delete_object(Bucket=BUCKET, Key="probe/x")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)  # the volume server registers a moment after S3 answers


class _Cold:
    """The test's S3: its server, the proxy in front, and the archive root URL."""

    def __init__(self, weed: OwnWeed, proxy: FaultProxy) -> None:
        self.weed, self.proxy = weed, proxy
        self.url = f"s3://{BUCKET}/cold-{uuid4().hex}"  # the module's tests share the server

    def kill(self) -> None:
        self.weed.kill()

    async def restart(self) -> None:
        """Start the killed server again on its data and ports (no-op when it runs)."""
        if self.weed.process is not None:
            return
        self.weed.start(_answers)
        await _usable(self.weed.s3_port)

    def archive(self, **options: Any) -> S3Archive:
        return S3Archive(self.url, **options)


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnWeed]:
    """One SeaweedFS for the module (each test has its own prefix and starts it if killed)."""
    if not WEED.exists():
        why = f"SeaweedFS is not installed at {WEED} (bash .ci/services/s3.sh start)"
        if os.environ.get("THREADKEEP_REQUIRE_SERVICES"):
            pytest.fail(why + "; THREADKEEP_REQUIRE_SERVICES is set, so this is a failure")
        pytest.skip(why)
    own = OwnWeed(tmp_path_factory.mktemp("weed") / "state")
    try:
        own.start(_answers)
        asyncio.run(_usable(own.s3_port))
        yield own
    finally:
        own.cleanup()


@pytest.fixture
async def cold(weed: OwnWeed, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[_Cold]:
    async with FaultProxy(lambda: weed.s3_port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        own = _Cold(weed, proxy)
        await own.restart()  # a no-op unless an earlier test left it killed
        yield own


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'hot.db'}") as opened:
        yield opened


async def _fill(store: Store, *, messages: int = 30, text_bytes: int = 6000) -> UUID:
    """A chat whose bundle does not compress much (random text): ``messages`` messages."""
    chat = await store.create_chat("u-faults", f"t-{os.urandom(4).hex()}")
    batch = [
        Message(
            role=Role.USER if i % 2 else Role.ASSISTANT,
            agui_id=f"a{i}",
            content=base64.b64encode(os.urandom(text_bytes * 3 // 4)).decode(),
            metadata={"i": i},
        )
        for i in range(messages)
    ]
    for start in range(0, messages, 200):
        await store.append_messages(chat.chat_id, batch[start : start + 200])
    return chat.chat_id


async def _history(store: Store, chat_id: UUID) -> list[dict[str, Any]]:
    """Every visible message, oldest first, walking pages of 50 (a read: it rehydrates)."""
    pages, cursor = [], None
    while True:
        page = await store.list_messages(chat_id, limit=50, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            return [m.model_dump(mode="json") for items in reversed(pages) for m in items]
        cursor = page.next_cursor


async def _hot_rows(store: Store, chat_id: UUID) -> list[int]:
    """The seqs of the chat's hot message rows, hidden ones too (never rehydrates)."""
    seqs: list[int] = []
    while rows := await store.scan_messages(chat_id, after_seq=seqs[-1] if seqs else 0, limit=500):
        seqs += [row.seq or 0 for row in rows]
    return seqs


async def _keys(cold: _Cold) -> list[str]:
    async with cold.archive() as archive:
        return [info.key async for info in archive.list()]


async def _one_tier(store: Store, cold: _Cold, chat_id: UUID, expected: int) -> ChatStatus:
    """Assert the chat is in exactly one tier, whole; return its status (never rehydrates)."""
    chat = await store.get_chat(chat_id)
    seqs = await _hot_rows(store, chat_id)
    if chat.status is ChatStatus.ACTIVE:
        assert seqs == list(range(1, expected + 1)), "an active chat has every hot row, once"
        return chat.status
    assert chat.status is ChatStatus.ARCHIVED
    assert chat.archive_ref is not None
    ref = ArchiveRef.parse(chat.archive_ref)
    assert await _keys(cold) == [ref.key], "exactly one object: the chat's"
    async with cold.archive() as archive:
        body = b"".join([chunk async for chunk in archive.get(ref.key)])
    assert hashlib.sha256(body).hexdigest() == ref.sha256
    return chat.status


async def _wait(event: asyncio.Event, task: asyncio.Task[Any]) -> None:
    """Wait for ``event`` (the proxy reached its hold), failing early if ``task`` ended."""
    waiter = asyncio.ensure_future(event.wait())
    done, _ = await asyncio.wait({waiter, task}, timeout=_GUARD, return_when="FIRST_COMPLETED")
    if waiter not in done:
        waiter.cancel()
        raise AssertionError(f"the fault was never reached; the call ended first: {task}")
    waiter.cancel()


async def _archive(
    store: Store, cold: _Cold, chat_id: UUID, part_size: int = PART_SIZE, **options: Any
) -> Any:
    async with cold.archive(part_size=part_size) as archive:
        return await Archiver(store, archive, **options).archive_chat(chat_id)


async def _fails_unavailable(task: asyncio.Task[Any], where: str) -> BackendUnavailable:
    with pytest.raises(BackendUnavailable) as caught:
        await asyncio.wait_for(task, _GUARD)
    message = str(caught.value)
    assert where in message, message
    assert "retry" in message, message
    return caught.value


async def _finishes(store: Store, cold: _Cold, chat_id: UUID, before: list[dict[str, Any]]) -> None:
    """After the server is back: the archive re-run finishes, and the chat reads back equal."""
    await cold.restart()
    result = await _archive(store, cold, chat_id)
    assert result.messages == len(before)
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ARCHIVED
    assert await _hot_rows(store, chat_id) == []
    assert await _history(store, chat_id) == before  # rehydrated: every message, once, in order
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ACTIVE


async def test_killed_mid_upload_stores_nothing_and_a_rerun_archives(
    store: Store, cold: _Cold
) -> None:
    chat_id = await _fill(store)
    before = await _history(store, chat_id)
    held = cold.proxy.add(Rule("hold_request", method="PUT", after_bytes=20_000))
    task = asyncio.ensure_future(_archive(store, cold, chat_id))
    await _wait(held.reached, task)
    cold.kill()  # 20,000 bytes of the bundle reached the server, the rest never will
    await _fails_unavailable(task, "s3://faults/cold-")
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ACTIVE
    assert await _history(store, chat_id) == before  # the hot tier reads with S3 down
    await cold.restart()
    assert await _keys(cold) == [], "no object of the half-sent upload"
    await _finishes(store, cold, chat_id, before)


async def test_killed_between_parts_of_a_multipart_upload(store: Store, cold: _Cold) -> None:
    chat_id = await _fill(store, messages=1400)  # about 6.3 MB compressed: two parts
    before = await _history(store, chat_id)
    held = cold.proxy.add(
        Rule("hold_request", method="PUT", query="partNumber=2", after_bytes=1000)
    )
    part = 5 << 20  # S3's smallest part
    task = asyncio.ensure_future(_archive(store, cold, chat_id, part, single_put_bytes=1 << 20))
    await _wait(held.reached, task)
    cold.kill()  # part 1 stored, part 2 cut: the upload is never completed
    await _fails_unavailable(task, "upload s3://faults/cold-")
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ACTIVE
    await cold.restart()
    assert await _keys(cold) == [], "an uncompleted multipart upload is no object"
    await _finishes(store, cold, chat_id, before)


class _KillingArchiver(Archiver):
    """An archiver whose S3 server is SIGKILLed right after the named step."""

    def __init__(self, store: Store, archive: Any, cold: _Cold, step: str) -> None:
        super().__init__(store, archive)
        self.cold, self.step = cold, step

    async def _checkpoint(self, step: str, chat_id: UUID) -> None:
        if step == self.step:
            self.cold.kill()


@pytest.mark.parametrize("step", ["written", "flipped"])
async def test_killed_between_upload_and_hot_delete(store: Store, cold: _Cold, step: str) -> None:
    chat_id = await _fill(store)
    before = await _history(store, chat_id)
    async with cold.archive() as archive:
        task = asyncio.ensure_future(
            _KillingArchiver(store, archive, cold, step).archive_chat(chat_id)
        )
        await _fails_unavailable(task, "s3://faults/cold-")
    chat = await store.get_chat(chat_id)
    if step != "written":  # verified, then flipped (no S3 call between): the object is the truth
        assert chat.status is ChatStatus.ARCHIVED
        with pytest.raises(BackendUnavailable, match="S3 could not be reached"):
            await _history(store, chat_id)  # reading it needs S3: typed, and nothing changes
        assert (await store.get_chat(chat_id)).status is ChatStatus.ARCHIVED
    else:  # not verified, not flipped: the hot rows are the truth and read with S3 down
        assert chat.status is ChatStatus.ACTIVE
        assert await _history(store, chat_id) == before
    assert await _hot_rows(store, chat_id) == list(range(1, len(before) + 1))
    await _finishes(store, cold, chat_id, before)


async def test_killed_mid_restore_keeps_the_chat_archived(store: Store, cold: _Cold) -> None:
    chat_id = await _fill(store, messages=60)
    before = await _history(store, chat_id)
    await _archive(store, cold, chat_id)
    held = cold.proxy.add(Rule("hold_response", method="GET", after_bytes=150_000))
    task = asyncio.ensure_future(_history(store, chat_id))
    await _wait(held.reached, task)
    cold.kill()
    held.release.set()  # the proxy closes the download half-way, as the dead server did
    error = await _fails_unavailable(task, "get s3://faults/cold-")
    assert f"archived chat {chat_id} could not be read back" in str(error)
    assert "stays archived and unchanged" in str(error)
    chat = await store.get_chat(chat_id)
    assert chat.status is ChatStatus.ARCHIVED, "a half-read bundle never flips the chat"
    await cold.restart()
    assert await _history(store, chat_id) == before  # the next read restores it whole
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ACTIVE


async def test_5xx_answers_are_retried_then_typed(store: Store, cold: _Cold) -> None:
    chat_id = await _fill(store, messages=10)
    before = await _history(store, chat_id)
    cold.proxy.add(Rule("answer", method="PUT", times=2, status=503, code="SlowDown"))
    result = await _archive(store, cold, chat_id)  # two 503s: the client's retries absorb them
    assert result.messages == len(before)
    assert [m for m, _ in cold.proxy.seen].count("PUT") == 3
    assert await _history(store, chat_id) == before

    cold.proxy.add(Rule("answer", method="PUT", times=10_000, status=500, code="InternalError"))
    task = asyncio.ensure_future(_archive(store, cold, chat_id))
    error = await _fails_unavailable(task, "put s3://faults/cold-")
    assert "InternalError" in str(error)
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ACTIVE
    cold.proxy.rules.clear()
    result = await _archive(store, cold, chat_id)
    assert result.reused is False
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ARCHIVED
    assert await _history(store, chat_id) == before


async def test_a_put_whose_answer_is_lost_is_not_written_twice(store: Store, cold: _Cold) -> None:
    chat_id = await _fill(store, messages=10)
    before = await _history(store, chat_id)
    lost = cold.proxy.add(Rule("drop_response", method="PUT"))
    result = await _archive(store, cold, chat_id)  # the retry finds the object: reused
    assert lost.reached.is_set()
    assert result.messages == len(before)
    assert await _one_tier(store, cold, chat_id, len(before)) is ChatStatus.ARCHIVED
    assert await _history(store, chat_id) == before


async def test_messages_appended_during_a_slow_upload_are_archived_too(
    store: Store, cold: _Cold
) -> None:
    chat_id = await _fill(store, messages=10)
    slow = cold.proxy.add(Rule("delay", method="PUT"))
    task = asyncio.ensure_future(_archive(store, cold, chat_id))
    await _wait(slow.reached, task)
    await store.append_message(chat_id, Message(role=Role.USER, content="while uploading"))
    slow.release.set()
    result = await asyncio.wait_for(task, _GUARD)
    assert result.messages == 11
    after = await _history(store, chat_id)
    assert [m["seq"] for m in after] == list(range(1, 12))
    assert after[-1]["content"] == "while uploading"


def test_a_truncated_download_is_backend_unavailable() -> None:
    """botocore's ``IncompleteReadError`` (a body cut short) is a transport failure."""
    from botocore.exceptions import IncompleteReadError

    from threadkeep_s3._errors import map_s3_errors

    expected = pytest.raises(BackendUnavailable, match="get s3://b/k: S3 could not be reached")
    with expected, map_s3_errors("get s3://b/k"):
        raise IncompleteReadError(actual_bytes=10, expected_bytes=20)
