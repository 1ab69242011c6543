"""The blocking API (``threadkeep.sync``): derived from the async ``Store``, safe in threads."""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import threadkeep
from threadkeep import BackendUnavailable, ChatNotFound, InvalidArgument, Message, Role
from threadkeep.sync import BlockingCallOnLoopThread, SyncStore, _codegen, open_store


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(cls, name))
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def test_every_async_method_has_a_blocking_twin_with_the_same_signature() -> None:
    async_api = _codegen.async_api()
    sync_methods = _public_methods(SyncStore)
    assert set(async_api) <= set(sync_methods)
    for name, function in async_api.items():
        expected = inspect.signature(function)
        if name == "open":  # returns the sync store, not the async one
            expected = expected.replace(return_annotation="Self")
        assert sync_methods[name] == expected, name
        assert inspect.getdoc(getattr(SyncStore, name)), name
    assert not any(inspect.iscoroutinefunction(getattr(SyncStore, n)) for n in sync_methods)


def test_the_generated_module_is_up_to_date() -> None:
    # Fails after the async API changes until `python -m threadkeep.sync._codegen` is run.
    assert _codegen.TARGET.read_text(encoding="utf-8") == _codegen.generate()


def test_round_trip_on_each_backend(backend) -> None:
    with backend.sync_store() as store:
        assert store.is_open
        chat = store.create_chat("user-1", "thread-1", name="sync")
        stored = store.append_messages(
            chat.chat_id,
            [{"role": "user", "content": "hi"}, Message(role=Role.ASSISTANT, content="hello")],
        )
        page = store.list_messages(chat.chat_id, limit=1)
        assert [m.content for m in page.items] == ["hello"]
        older = store.list_messages(chat.chat_id, limit=1, cursor=page.next_cursor)
        assert [m.message_id for m in older.items] == [stored[0].message_id]
        assert store.update_chat(chat.chat_id, name="renamed").name == "renamed"
        assert store.find_chat("user-1", "thread-1") == store.get_chat(chat.chat_id)
    assert not store.is_open
    with backend.sync_store() as again:  # a new store (new loop thread) sees the same data
        assert len(again.context_messages(chat.chat_id)) == 2


def test_errors_are_the_stores_typed_errors_and_closed_stores_refuse() -> None:
    store = open_store("memory://")
    with pytest.raises(BackendUnavailable, match="not open"):
        store.get_chat("00000000-0000-0000-0000-000000000000")
    with store:
        with pytest.raises(ChatNotFound):
            store.get_chat("00000000-0000-0000-0000-000000000000")
        with pytest.raises(InvalidArgument):
            store.list_messages("not-an-id")
    store.close()  # idempotent
    with pytest.raises(BackendUnavailable):
        store.create_chat("u", "t")


def test_usable_from_inside_a_running_event_loop() -> None:
    # A framework's sync hook called from async code: asyncio.run per call would fail here.
    async def main() -> str:
        with open_store("memory://") as store:
            chat = store.create_chat("u", "t")
            store.append_message(chat.chat_id, {"role": "user", "content": "inside"})
            return store.context_messages(chat.chat_id)[0].content

    assert asyncio.run(main()) == "inside"


def test_one_store_shared_by_threads_runs_on_one_private_loop(backend) -> None:
    with backend.sync_store() as store:
        chat = store.create_chat("u", "threads")
        loop_threads: set[str] = set()
        original = store._store.append_message

        async def spy(*args, **kwargs):
            loop_threads.add(threading.current_thread().name)
            return await original(*args, **kwargs)

        store._store.append_message = spy  # type: ignore[method-assign]

        def write(i: int) -> int:
            message = store.append_message(chat.chat_id, {"role": "user", "content": str(i)})
            assert message.seq is not None
            return message.seq

        with ThreadPoolExecutor(max_workers=4) as pool:
            seqs = list(pool.map(write, range(20)))
        assert len(set(seqs)) == 20
        assert len(loop_threads) == 1
        assert loop_threads.pop().startswith("threadkeep-sync:")
        contents = sorted(int(m.content) for m in store.context_messages(chat.chat_id))
        assert contents == list(range(20))


def _sync_loop_threads() -> set[threading.Thread]:
    # Only threadkeep's own loop threads: other libraries' daemon threads (PyMongo's
    # monitors, left by earlier tests) come and go on their own schedule.
    return {t for t in threading.enumerate() if t.name.startswith("threadkeep-sync:")}


def test_the_loop_thread_stops_on_close_and_restarts_on_open() -> None:
    before = _sync_loop_threads()
    store = open_store("memory://restart")
    with store:
        assert len(_sync_loop_threads() - before) == 1
        chat = store.create_chat("u", "t")
    assert _sync_loop_threads() == before
    with store:
        assert store.get_chat(chat.chat_id).chat_id == chat.chat_id


def test_a_failed_open_stops_the_loop_thread(tmp_path) -> None:
    before = _sync_loop_threads()
    store = open_store(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'deeper' / 'x.db'}")
    with pytest.raises(threadkeep.ThreadkeepError):
        store.open()
    assert _sync_loop_threads() == before
    assert not store.is_open


def _paginated(store: SyncStore, chat_id, page_size: int):
    """A generator reading a chat through the sync API, page by page (oldest first)."""
    pages = []
    cursor = None
    while True:
        page = store.list_messages(chat_id, limit=page_size, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
    for items in reversed(pages):  # list_messages pages go newest first
        for message in items:
            yield {"role": message.role, "content": message.content}


def test_load_messages_from_a_generator_that_pages_the_same_sync_store(backend) -> None:
    # A copy written as scripts write it: a generator over the sync API fed to load_messages.
    # The generator must run off the store's loop thread (on it, each of its blocking calls
    # would wait for the loop that is waiting for the generator).
    with backend.sync_store() as store:
        source = store.create_chat("u", "source")
        sent = [{"role": "user", "content": f"m{i} ✓"} for i in range(230)]
        store.append_messages(source.chat_id, sent[:115])
        store.append_messages(source.chat_id, sent[115:])
        target = store.create_chat("u", "target")
        report = store.load_messages(
            target.chat_id, _paginated(store, source.chat_id, 50), batch_size=64
        )
        assert report.batches == 4
        copied = list(_paginated(store, target.chat_id, 100))
        assert [m["content"] for m in copied] == [m["content"] for m in sent]


def test_a_call_in_flight_when_the_store_closes_gets_backend_unavailable() -> None:
    # close() from one thread while another thread's call still runs on the loop: the
    # caller gets the store's typed error, not concurrent.futures' CancelledError, and no
    # caller is left waiting.
    store = open_store("memory://in-flight").open()
    started = threading.Event()

    async def never_ends(*args, **kwargs):
        started.set()
        await asyncio.Event().wait()

    store._store.get_chat = never_ends  # type: ignore[method-assign]
    with ThreadPoolExecutor(max_workers=1) as pool:
        call = pool.submit(store.get_chat, "00000000-0000-0000-0000-000000000000")
        assert started.wait(120)
        store.close()
        with pytest.raises(BackendUnavailable, match="closed"):
            call.result(timeout=120)
    assert not store.is_open


async def test_an_integration_call_in_flight_when_its_sync_store_closes() -> None:
    # An integration awaiting the sync store's loop (StoreHandle.run) gets BackendUnavailable
    # when another thread closes the store, not a CancelledError that reads as its own.
    from threadkeep.integrations._backend import StoreHandle

    store = open_store("memory://handle-in-flight").open()
    started = threading.Event()

    async def never_ends(chat_id):
        started.set()
        await asyncio.Event().wait()

    handle = StoreHandle(store)
    call = asyncio.ensure_future(handle.run(lambda s: never_ends("x")))
    assert await asyncio.to_thread(started.wait, 120)
    await asyncio.to_thread(store.close)
    with pytest.raises(BackendUnavailable, match="closed"):
        await asyncio.wait_for(call, 120)

    # The caller's own cancellation stays a cancellation.
    store.open()
    started.clear()
    call = asyncio.ensure_future(handle.run(lambda s: never_ends("x")))
    assert await asyncio.to_thread(started.wait, 120)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    store.close()


def test_a_worker_thread_uses_a_sync_store_while_the_main_threads_loop_runs(tmp_path) -> None:
    # The main thread's loop keeps running (it is not blocked) while a worker thread blocks
    # on the sync store; a blocking call made on the store's own loop thread (it would wait
    # for itself) is refused at once with a typed error, not a deadlock.
    url = f"sqlite+aiosqlite:///{tmp_path / 'worker.db'}"

    def worker() -> int:
        with open_store(url) as store:
            chat = store.create_chat("u", "worker")
            store.append_message(chat.chat_id, {"role": "user", "content": "from a thread"})
            return len(store.list_messages(chat.chat_id).items)

    async def main() -> tuple[int, int]:
        ticks = 0
        future = asyncio.get_running_loop().run_in_executor(None, worker)
        while not future.done():
            await asyncio.sleep(0.001)
            ticks += 1
        return await future, ticks

    count, ticks = asyncio.run(main())
    assert count == 1
    assert ticks > 0

    with open_store(url) as store:

        async def on_its_own_loop() -> None:
            store.list_chats()

        with pytest.raises(BlockingCallOnLoopThread, match="own loop thread") as raised:
            store.submit(on_its_own_loop()).result(timeout=30)
        assert isinstance(raised.value, threadkeep.ThreadkeepError)
        assert store.list_chats().items  # the store still works afterwards
