"""Observers registered at run time (``register_observer``): called after commit, then gone."""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

import threadkeep
from threadkeep import InvalidArgument, Message, hookimpl, register_observer, unregister_observer


class Recorder:
    """Keeps what ``threadkeep_messages_committed`` was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[UUID, list[str | None]]] = []

    @hookimpl
    def threadkeep_messages_committed(
        self, store: Any, chat_id: UUID, messages: Sequence[Message]
    ) -> None:
        self.calls.append((chat_id, [m.content for m in messages]))  # type: ignore[misc]


async def test_a_registered_observer_sees_new_messages_until_unregistered() -> None:
    recorder = Recorder()
    register_observer(recorder)
    try:
        async with threadkeep.open_store("memory://") as store:
            chat = await store.create_chat("u", "t")
            await store.append_messages(
                chat.chat_id,
                [
                    Message(role="user", agui_id="a", content="one"),
                    Message(role="user", content="two"),
                ],
            )
            await store.append_message(
                chat.chat_id, Message(role="user", agui_id="a", content="one")
            )
            assert recorder.calls == [(chat.chat_id, ["one", "two"])]  # a retry is not new
            assert unregister_observer(recorder) is True
            await store.append_message(chat.chat_id, Message(role="user", content="three"))
        assert len(recorder.calls) == 1
    finally:
        unregister_observer(recorder)
    assert unregister_observer(recorder) is False


async def test_a_failing_observer_never_fails_the_write(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        @hookimpl
        def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
            raise RuntimeError("index down")

    await _write_observed(Broken())
    assert "observer failed" in caplog.text


async def _write_observed(observer: object) -> None:
    """Append one message with ``observer`` registered: returned and stored as sent."""
    register_observer(observer)
    try:
        async with threadkeep.open_store("memory://") as store:
            chat = await store.create_chat("u", "t")
            stored = await store.append_message(chat.chat_id, Message(role="user", content="x"))
            assert stored.content == "x"
            assert (await store.get_message(stored.message_id)).content == "x"
    finally:
        unregister_observer(observer)


async def test_a_failing_observer_does_not_keep_the_others_from_the_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each observer is called on its own: one that raises (before or after another, since
    pluggy calls the newest first) costs the others nothing, and each failure is logged."""

    class Broken:
        @hookimpl
        def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
            raise RuntimeError("metrics down")

    first, broken, last = Recorder(), Broken(), Recorder()
    for observer in (first, broken, last):
        register_observer(observer)
    try:
        async with threadkeep.open_store("memory://") as store:
            chat = await store.create_chat("u", "t")
            await store.append_messages(chat.chat_id, [Message(role="user", content="kept")])
    finally:
        for observer in (first, broken, last):
            unregister_observer(observer)
    assert first.calls == [(chat.chat_id, ["kept"])]
    assert last.calls == [(chat.chat_id, ["kept"])]
    assert "metrics down" in caplog.text


async def test_an_observer_unregistering_itself_mid_call_is_called_once() -> None:
    """Unregistering (itself or another) inside the hook changes the next write, not this
    one: every observer registered when the write committed sees it."""
    later = Recorder()

    class Once:
        calls = 0

        @hookimpl
        def threadkeep_messages_committed(self) -> None:
            Once.calls += 1
            unregister_observer(self)
            unregister_observer(later)

    once = Once()
    register_observer(later)
    register_observer(once)  # called first: it unregisters ``later`` before its turn
    try:
        async with threadkeep.open_store("memory://") as store:
            chat = await store.create_chat("u", "t")
            await store.append_message(chat.chat_id, Message(role="user", content="a"))
            await store.append_message(chat.chat_id, Message(role="user", content="b"))
    finally:
        unregister_observer(once)
        unregister_observer(later)
    assert Once.calls == 1
    assert later.calls == [(chat.chat_id, ["a"])]


async def test_an_observer_changing_a_message_changes_nothing_the_writer_holds() -> None:
    """Observers get their own copies: the writer's returned messages stay as stored."""

    class Scrubber:
        @hookimpl
        def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
            for message in messages:
                message.content = "[scrubbed]"

    await _write_observed(Scrubber())


class Undecorated:
    def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
        """Not marked with @hookimpl."""


class AsyncHook:
    @hookimpl
    async def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
        """Would return a coroutine nobody awaits."""


class DriverHook:
    @hookimpl
    def threadkeep_drivers(self) -> list[type]:
        return []


class WrongArguments:
    @hookimpl
    def threadkeep_messages_committed(self, message: Message) -> None:
        """``message`` is not an argument of the hook."""


@pytest.mark.parametrize(
    ("observer", "says"),
    [
        (Undecorated(), "no method decorated with @threadkeep.hookimpl"),
        (AsyncHook(), "async def"),
        (DriverHook(), "not an observer hook"),
        (WrongArguments(), "does not fit its hook"),
    ],
    ids=["undecorated", "async", "driver-hook", "wrong-arguments"],
)
def test_a_bad_observer_is_refused(observer: object, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        register_observer(observer)
    assert unregister_observer(observer) is False  # nothing was registered


def test_registering_twice_is_refused() -> None:
    recorder = Recorder()
    register_observer(recorder)
    try:
        with pytest.raises(InvalidArgument, match="registered already"):
            register_observer(recorder)
    finally:
        assert unregister_observer(recorder) is True


def test_the_documented_search_index_example_runs() -> None:
    """docs/observers.md's example (an index of messages for search) runs as written."""
    page = Path(__file__).resolve().parents[2] / "docs" / "observers.md"
    (code,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    namespace: dict[str, Any] = {"__name__": "docs_observers"}
    failures: list[BaseException] = []

    def run() -> None:  # the example calls asyncio.run: give it a thread without a loop
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                exec(compile(code, str(page), "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]
    assert "SearchIndex" in namespace


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_load_messages_shows_observers_the_stored_timestamps(
    url: str, tmp_path: Path
) -> None:
    """The bulk path hands observers the messages as stored, ``created_at`` and
    ``updated_at`` included (a time-ordered index must not drift from the store)."""
    recorder: list[Message] = []

    class Keep:
        @hookimpl
        def threadkeep_messages_committed(self, messages: Sequence[Message]) -> None:
            recorder.extend(messages)

    keep = Keep()
    register_observer(keep)
    target = f"sqlite+aiosqlite:///{tmp_path / 'load.db'}" if url == "sqlite" else url
    try:
        async with threadkeep.open_store(target) as store:
            chat = await store.create_chat("u", "t")
            await store.load_messages(
                chat.chat_id, [Message(role="user", content=f"m{i}") for i in range(3)]
            )
            assert len(recorder) == 3
            for seen in recorder:
                stored = await store.get_message(seen.message_id)
                assert (seen.seq, seen.created_at, seen.updated_at) == (
                    stored.seq,
                    stored.created_at,
                    stored.updated_at,
                )
    finally:
        unregister_observer(keep)
