"""Issue 12, item 6 on MongoDB: after the server drops every pooled connection (a restart of
the test's own SecantusDB: the shared server cannot be restarted), the next write and the
next read succeed, and asyncio logs no "Future exception was never
retrieved". PyMongo's retryable writes and reads (on by default; the driver never turns them
off) and its pool clearing on a network error do it.

Ports: each server start binds a port the kernel picks and reports it; the store's URL names
a forwarding port the test binds once and holds to the end (no port is probed free and
bound again later, which another process could take in between).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadkeep_mongodb import MongoStore

_SERVER = Path(os.environ.get("TK_CI_DIR", "/tmp/threadkeep-ci")) / "secantus-venv/bin/secantusd-py"
_LISTENING = re.compile(rb"secantus listening on [^\s:]+:(\d+)")


class _Server:
    """A SecantusDB of the test's own (in memory), restartable; it binds the port it picks.

    Each start binds a port of the kernel's choosing (``--port 0``) and reports it in its
    log, read back here: no port is probed free and bound again later.
    """

    def __init__(self, state: Path) -> None:
        self.state, self.port = state, 0
        (state / "tmp").mkdir(parents=True)
        (state / "server.toml").write_text("")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [str(_SERVER), "--config", str(self.state / "server.toml"), "--host"]
        command += ["127.0.0.1", "--port", "0", "--storage-path", ":memory:"]
        env = {**os.environ, "TMPDIR": str(self.state / "tmp")}
        log = self.state / f"server-{time.monotonic_ns()}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, "--log-level", "INFO"], env=env, stdout=out, stderr=out
            )
        deadline = time.monotonic() + 120  # a hang guard: a loaded machine starts it slowly
        while not (found := _LISTENING.search(log.read_bytes())):
            assert self.process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "SecantusDB did not start in 120 s"
            time.sleep(0.05)
        self.port = int(found.group(1))

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None


class _Front:
    """The port the store connects to: bound once by the test, forwarding to the server.

    A restarted server comes up on a port of its own choosing; the store keeps one URL, so
    it reaches the server through this forwarder, whose listening socket the test holds
    for the whole test. When the server stops, every forwarded connection is closed, as
    the server's own sockets are: the store sees what a restart does to it.
    """

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._listener: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self.port = 0

    async def __aenter__(self) -> _Front:
        self._listener = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = self._listener.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._listener is not None
        self._listener.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        await self._listener.wait_closed()

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._server.port)
        except OSError:
            writer.close()
            self._pipes.discard(task)
            return
        try:
            await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                end.close()
            self._pipes.discard(task)


async def _copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
    """Copy bytes until either side ends; then end the other (a dropped connection)."""
    try:
        while chunk := await source.read(65536):
            target.write(chunk)
            await target.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        target.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    if not _SERVER.exists():
        why = f"SecantusDB is not installed at {_SERVER} (bash .ci/services/mongodb.sh start)"
        if os.environ.get("THREADKEEP_REQUIRE_SERVICES"):
            pytest.fail(why + "; THREADKEEP_REQUIRE_SERVICES is set, so this is a failure")
        pytest.skip(why)
    own = _Server(tmp_path / "secantus")
    own.start()
    try:
        yield own
    finally:
        own.stop()


async def test_a_restart_of_the_server_is_not_seen(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    # Earlier tests' garbage first: a future of theirs collected inside the window below
    # would log "never retrieved" against this test.
    gc.collect()
    async with _Front(server) as front:
        await _restarts_unseen(server, front, caplog)


async def _restarts_unseen(
    server: _Server, front: _Front, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"mongodb://127.0.0.1:{front.port}/tk_lost?directConnection=true"
    store = MongoStore(url, client_options={"serverSelectionTimeoutMS": 30000})
    await store.open()
    try:
        assert store.driver._client.options.retry_writes
        assert store.driver._client.options.retry_reads
        for round_ in range(2):
            await store.create_chat("u", f"before-{round_}")
            server.stop()  # every pooled connection is dropped by the server going away
            server.start()
            with caplog.at_level(logging.ERROR, logger="asyncio"):
                chat = await store.create_chat("u", f"after-{round_}")  # the next write
                found = await store.find_chat("u", f"after-{round_}")  # the next read
                assert found is not None
                assert found.chat_id == chat.chat_id
                gc.collect()
                await asyncio.sleep(0)
            assert "exception was never retrieved" not in caplog.text
    finally:
        await store.close()
