"""``SyncStore.open()`` against a server that accepts connections and never answers.

The server is a real listening socket on loopback (no mock): it accepts every connection
and reads nothing, as a hung database or a stalled proxy does. ``open()`` gives up after
``open_timeout`` with ``OpenTimeout`` (a ``BackendUnavailable``) and leaves no loop thread.
"""

from __future__ import annotations

import inspect
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import threadkeep
from threadkeep import BackendUnavailable, InvalidArgument
from threadkeep.sync import DEFAULT_OPEN_TIMEOUT, OpenTimeout, SyncStore, open_store


@contextmanager
def _silent_server() -> Iterator[int]:
    """A loopback server that accepts connections, holds them open and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)  # so the accept loop sees `done` without a connection
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=60)
        listener.close()
        for connection in held:
            connection.close()


def _loop_threads() -> set[threading.Thread]:
    # Only threadkeep's own loop threads (other libraries' threads come and go).
    return {t for t in threading.enumerate() if t.name.startswith("threadkeep-sync:")}


def test_open_gives_up_on_a_server_that_never_answers() -> None:
    before = _loop_threads()
    with _silent_server() as port:
        # PostgreSQL's wire protocol: the driver connects, sends its startup message and
        # waits for an answer that never comes (its own connect timeout is 10 s).
        store = open_store(f"postgresql+asyncpg://u:p@127.0.0.1:{port}/db", open_timeout=0.5)
        for _ in range(2):  # a failed open can be tried again, and fails the same way
            with pytest.raises(OpenTimeout, match=r"did not answer within 0\.5 s") as raised:
                store.open()
            assert isinstance(raised.value, BackendUnavailable)
            assert isinstance(raised.value, threadkeep.ThreadkeepError)
            assert isinstance(raised.value, TimeoutError)
            assert not store.is_open
            assert _loop_threads() == before  # the loop thread was stopped and joined
        with pytest.raises(BackendUnavailable, match="not open"):
            store.list_chats()


def test_open_within_the_timeout_is_unchanged(tmp_path) -> None:
    store = open_store(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", open_timeout=120)
    with store:
        assert store.create_chat("u", "t").thread_id == "t"
    assert not store.is_open


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_a_bad_open_timeout_is_invalid_argument(bad: object) -> None:
    with pytest.raises(InvalidArgument, match="open_timeout"):
        open_store("memory://", open_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="open_timeout"):
        SyncStore(threadkeep.open_store("memory://"), open_timeout=bad)  # type: ignore[arg-type]


def test_the_default_bounds_open_and_none_waits_as_the_driver_does() -> None:
    assert DEFAULT_OPEN_TIMEOUT == 60.0
    for function in (open_store, SyncStore):
        parameter = inspect.signature(function).parameters["open_timeout"]
        assert parameter.default == DEFAULT_OPEN_TIMEOUT
    with open_store("memory://", open_timeout=None) as store:
        assert store.is_open
