"""Issue 12, item 6 on MongoDB: after the server drops every pooled connection (a restart of
the test's own SecantusDB, on a port of its own: the shared server cannot be restarted), the
next write and the next read succeed, and asyncio logs no "Future exception was never
retrieved". PyMongo's retryable writes and reads (on by default; the driver never turns them
off) and its pool clearing on a network error do it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadkeep_mongodb import MongoStore

_SERVER = Path(os.environ.get("TK_CI_DIR", "/tmp/threadkeep-ci")) / "secantus-venv/bin/secantusd-py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server:
    """A SecantusDB of the test's own (in memory), restartable on one port."""

    def __init__(self, state: Path) -> None:
        self.port, self.state = _free_port(), state
        (state / "tmp").mkdir(parents=True)
        (state / "server.toml").write_text("")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [str(_SERVER), "--config", str(self.state / "server.toml"), "--host"]
        command += ["127.0.0.1", "--port", str(self.port), "--storage-path", ":memory:"]
        env = {**os.environ, "TMPDIR": str(self.state / "tmp")}
        self.process = subprocess.Popen(
            [*command, "--log-level", "WARNING"], env=env, stdout=subprocess.DEVNULL
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)
            self.process = None


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
    url = f"mongodb://127.0.0.1:{server.port}/tk_lost?directConnection=true"
    store = MongoStore(url, client_options={"serverSelectionTimeoutMS": 30000})
    await store.open()  # server selection waits for the starting server
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
