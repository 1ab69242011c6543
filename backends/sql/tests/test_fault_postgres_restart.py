"""PostgreSQL going away for real: ``pg_ctl stop -m immediate`` (a crash: no shutdown, WAL
recovery at the next start) while writes are in flight, then started again under the same,
still open store; a statement timeout; a role out of connections (docs/reliability.md,
"PostgreSQL stopped under the store").

The test runs a cluster of its own (``initdb`` + ``pg_ctl`` from the Debian binaries, as
``.ci/services/postgres.sh`` uses them; the shared server is never stopped). A test
connection holds the chat's row lock, and the test stops the server only once
``pg_stat_activity`` shows the store's write waiting on it: no sleep races anything.
Invariant: every caller gets its own result or ``BackendUnavailable``; what was
acknowledged is there after the restart, what failed is absent whole; the same store
writes on after the restart, right after the last stored seq.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import asyncpg
import pytest

from threadkeep import BackendUnavailable, Message
from threadkeep_sql import SqlStore
from threadkeep_sql.testing import create_schema

from .test_postgres_killed_mid_write import write_of_kind

BIN = Path("/usr/lib/postgresql/15/bin")
_GUARD = 120  # seconds: hang guard of every wait
_BLOCKED = "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"


class _Cluster:
    """A PostgreSQL cluster of the test's own, in a folder the ``postgres`` user owns.

    PostgreSQL refuses to run as root: as root, every command runs as ``postgres``
    (``runuser``). The port is drawn at random; a start that fails (the port taken) draws
    another, so no port is probed free beforehand. A restart reuses the port.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tk-pgfault-"))
        self.data = self.root / "data"
        self.port = 0
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [*self._as, str(BIN / tool), *args]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=_GUARD)

    def url(self, user: str = "postgres") -> str:
        return f"postgresql+asyncpg://{user}@127.0.0.1:{self.port}/postgres"

    def dsn(self, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        for _ in range(8):
            self.port = self.port or random.randrange(41000, 49000)
            options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            log = str(self.root / "server.log")
            done = self._run(
                "pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start"
            )
            if done.returncode == 0:
                return
            self.port = 0
        raise AssertionError(f"the cluster did not start: {(self.root / 'server.log').read_text()}")

    def crash(self) -> None:
        """Stop at once, as a crash does: no checkpoint, sessions cut, WAL replayed at start."""
        done = self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        assert done.returncode == 0, done.stderr

    def remove(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[_Cluster]:
    if not (BIN / "initdb").exists():
        why = f"PostgreSQL 15 is not installed at {BIN} (bash .ci/services/postgres.sh start)"
        if os.environ.get("THREADKEEP_REQUIRE_SERVICES"):
            pytest.fail(why + "; THREADKEEP_REQUIRE_SERVICES is set, so this is a failure")
        pytest.skip(why)
    own = _Cluster()
    try:
        own.start()
        yield own
    finally:
        own.remove()


def _schema(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


@pytest.fixture
async def store(cluster: _Cluster) -> AsyncIterator[SqlStore]:
    url = await create_schema(cluster.url())
    async with SqlStore(url) as opened:
        opened.schema_name = _schema(url)  # type: ignore[attr-defined]
        yield opened


def _batch(tag: str, size: int = 3, **fields: Any) -> list[Message]:
    return [Message(role="user", content=f"{tag}-{i}", **fields) for i in range(size)]


async def _crash_while_blocked(
    cluster: _Cluster,
    store: SqlStore,
    chat_id: UUID,
    writes: list[Callable[[], Awaitable[Any]]],
    dsn: str | None = None,
) -> list[Any]:
    """Run ``writes`` with the chat row locked; crash the server once one waits; return outcomes."""
    schema = store.schema_name  # type: ignore[attr-defined]
    admin = await asyncpg.connect(dsn or cluster.dsn())
    try:
        await admin.execute("BEGIN")
        await admin.execute(
            f'SELECT 1 FROM "{schema}".chats WHERE chat_id = $1 FOR UPDATE', chat_id
        )
        tasks = [asyncio.ensure_future(write()) for write in writes]
        async with asyncio.timeout(_GUARD):  # a hang guard: a write reaches the lock
            while not await admin.fetch(_BLOCKED, admin.get_server_pid()):
                assert not all(task.done() for task in tasks), tasks
                await asyncio.sleep(0.02)
        await asyncio.to_thread(cluster.crash)
    finally:
        with contextlib.suppress(Exception):
            await admin.close(timeout=5)
    async with asyncio.timeout(_GUARD):  # every caller gets an outcome while the server is down
        return await asyncio.gather(*tasks, return_exceptions=True)


async def _contents(store: SqlStore, chat_id: UUID) -> list[str]:
    return [str(m.content) for m in await store.scan_messages(chat_id, limit=1000)]


@pytest.mark.parametrize("kind", ["append", "load", "end_run"])
async def test_a_crash_mid_write_is_typed_absent_and_the_store_writes_on(
    cluster: _Cluster, store: SqlStore, kind: str
) -> None:
    chat = await store.create_chat("u", "t")
    await store.append_messages(chat.chat_id, _batch("before"))
    if kind == "end_run":
        await store.start_run(chat.chat_id, "r1", owner="w")
    write = write_of_kind(store, chat.chat_id, kind, "lost", load_size=500)
    [error] = await _crash_while_blocked(cluster, store, chat.chat_id, [write])
    assert isinstance(error, BackendUnavailable), repr(error)
    with pytest.raises(BackendUnavailable):  # while down: typed, at once
        await store.append_messages(chat.chat_id, _batch("down"))
    cluster.start()
    assert await _contents(store, chat.chat_id) == [f"before-{i}" for i in range(3)]
    if kind == "end_run":
        assert await store.scan_steps(chat.chat_id) == []
        assert (await store.get_run(chat.chat_id, "r1")).status == "active"
    after = await store.append_messages(chat.chat_id, _batch("after"))
    assert [m.seq for m in after] == [4, 5, 6]


async def test_a_crash_under_group_commit_gives_every_caller_its_own_outcome(
    cluster: _Cluster, store: SqlStore
) -> None:
    """10 acknowledged appends, then 20 concurrent writers, half on a locked chat, crashed.

    The group statement waits on the lock with every call grouped with it: each caller gets
    its own ``BackendUnavailable``; the acknowledged appends are all there after the restart.
    """
    locked = await store.create_chat("u", "locked")
    free = await store.create_chat("u", "free")
    early = await asyncio.gather(  # acknowledged (group-committed) before the crash
        *(store.append_messages(free.chat_id, _batch(f"e{i}", 2)) for i in range(10))
    )
    writes: list[Callable[[], Awaitable[Any]]] = []
    for i in range(10):
        writes.append(lambda i=i: store.append_messages(locked.chat_id, _batch(f"l{i}", 2)))
        writes.append(lambda i=i: store.append_messages(free.chat_id, _batch(f"f{i}", 2)))
    outcomes: list[Any] = list(early)
    outcomes += await _crash_while_blocked(cluster, store, locked.chat_id, writes)
    for outcome in outcomes:
        assert isinstance(outcome, list | BackendUnavailable), repr(outcome)
    cluster.start()
    for chat in (locked, free):
        stored = await store.scan_messages(chat.chat_id, limit=1000)
        assert [m.seq for m in stored] == list(range(1, len(stored) + 1)), "no gap, no repeat"
        tags = {str(m.content).rsplit("-", 1)[0] for m in stored}
        for outcome in outcomes:
            if isinstance(outcome, list) and outcome[0].chat_id == chat.chat_id:
                assert str(outcome[0].content).rsplit("-", 1)[0] in tags, "acknowledged: kept"
        by_tag: dict[str, int] = {}
        for m in stored:
            tag = str(m.content).rsplit("-", 1)[0]
            by_tag[tag] = by_tag.get(tag, 0) + 1
        assert all(n == 2 for n in by_tag.values()), f"a batch stored in part: {by_tag}"
    acknowledged = sum(isinstance(o, list) for o in outcomes)
    stored_total = 0
    for chat in (locked, free):
        stored_total += len(await store.scan_messages(chat.chat_id, limit=1000))
    assert stored_total == 2 * acknowledged, "what failed is absent, what was acknowledged is not"
    assert not await store.scan_messages(locked.chat_id, limit=10), (
        "the locked chat never committed"
    )
    more = await store.append_messages(locked.chat_id, _batch("after", 2))
    assert [m.seq for m in more] == [1, 2]


async def test_a_statement_timeout_is_typed_and_writes_nothing(cluster: _Cluster) -> None:
    admin = await asyncpg.connect(cluster.dsn())
    try:
        await admin.execute("DROP ROLE IF EXISTS tk_hasty")
        await admin.execute("CREATE ROLE tk_hasty LOGIN SUPERUSER")
        await admin.execute("ALTER ROLE tk_hasty SET statement_timeout = '300ms'")
        url = await create_schema(cluster.url("tk_hasty"))
        async with SqlStore(url) as store:
            chat = await store.create_chat("u", "t")
            schema = _schema(url)
            await admin.execute("BEGIN")
            await admin.execute(
                f'SELECT 1 FROM "{schema}".chats WHERE chat_id = $1 FOR UPDATE', chat.chat_id
            )
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="statement_timeout") as caught:
                async with asyncio.timeout(_GUARD):
                    await store.append_messages(chat.chat_id, _batch("slow"))
            assert "nothing of it was written" in str(caught.value)
            assert time.monotonic() - started < _GUARD
            await admin.execute("ROLLBACK")
            assert await store.scan_messages(chat.chat_id, limit=10) == []
            done = await store.append_messages(chat.chat_id, _batch("fast"))
            assert [m.seq for m in done] == [1, 2, 3]
    finally:
        await admin.close()


async def test_a_role_out_of_connections_is_typed_and_names_the_limit(cluster: _Cluster) -> None:
    """The server refuses a connection (53300): a typed error naming the limit, no hang."""
    admin = await asyncpg.connect(cluster.dsn())
    hogs: list[asyncpg.Connection] = []
    try:
        await admin.execute("DROP ROLE IF EXISTS tk_few")
        await admin.execute("CREATE ROLE tk_few LOGIN CONNECTION LIMIT 2")  # not superuser:
        url = await create_schema(cluster.url())  # the limit binds no superuser
        await admin.execute(f'GRANT ALL ON SCHEMA "{_schema(url)}" TO tk_few')
        store = SqlStore(url.replace("postgres@", "tk_few@"))
        hogs = [await asyncpg.connect(cluster.dsn("tk_few")) for _ in range(2)]
        with pytest.raises(BackendUnavailable, match="max_connections") as caught:
            async with asyncio.timeout(_GUARD), store:
                await store.create_chat("u", "t")
        assert "pool_size" in str(caught.value), "the advice says what to change"
        for hog in hogs:
            await hog.close()
        hogs = []
        async with store:  # a store whose open failed opens once connections are free
            chat = await store.create_chat("u", "t")
            stored = await store.append_messages(chat.chat_id, _batch("ok"))
            assert [m.seq for m in stored] == [1, 2, 3]
    finally:
        for hog in hogs:
            await hog.close()
        await admin.close()


class _Bouncer:
    """A PgBouncer of the test's own (transaction pooling) in front of ``cluster``.

    ``query_wait_timeout`` is 10 s (PgBouncer's default, 120 s, is how long a client waits
    for a server connection while the server is down) and ``server_login_retry`` 1 s (15 s
    by default: the wait before the next login after a failed one).
    """

    def __init__(self, cluster: _Cluster) -> None:
        self.cluster, self.port = cluster, 0
        self.ini = cluster.root / "pgbouncer.ini"
        (cluster.root / "userlist.txt").write_text('"postgres" ""\n')

    def start(self) -> None:
        for _ in range(8):
            self.port = random.randrange(41000, 49000)
            self.ini.write_text(
                f"[databases]\n* = host=127.0.0.1 port={self.cluster.port}\n[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
                f"auth_type = trust\nauth_file = {self.cluster.root / 'userlist.txt'}\n"
                "pool_mode = transaction\ndefault_pool_size = 4\nquery_wait_timeout = 10\n"
                f"server_login_retry = 1\nlogfile = {self.cluster.root / 'pgbouncer.log'}\n"
                f"pidfile = {self.cluster.root / 'pgbouncer.pid'}\n"
            )
            if self.cluster._as:
                shutil.chown(self.ini, "postgres", "postgres")
            command = [*self.cluster._as, "pgbouncer", "-d", "-q", str(self.ini)]
            done = subprocess.run(command, check=False, capture_output=True, timeout=_GUARD)
            if done.returncode == 0 and self._answers():
                return
        raise AssertionError(f"PgBouncer did not start: {done.stderr!r}")

    def _answers(self) -> bool:
        deadline = time.monotonic() + _GUARD
        while time.monotonic() < deadline:
            if not (self.cluster.root / "pgbouncer.pid").exists():
                time.sleep(0.05)
                continue
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            time.sleep(0.05)
        return False

    async def passes_queries(self) -> None:
        """Wait until a query through PgBouncer reaches the server (after a restart)."""
        deadline = time.monotonic() + _GUARD
        while True:
            try:
                conn = await asyncpg.connect(
                    f"postgresql://postgres@127.0.0.1:{self.port}/tk_bounced",
                    statement_cache_size=0,
                )
                try:
                    await conn.fetchval("SELECT 1")
                    return
                finally:
                    await conn.close()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                assert time.monotonic() < deadline, "PgBouncer never reached the server"
                await asyncio.sleep(0.1)

    def stop(self) -> None:
        pidfile = self.cluster.root / "pgbouncer.pid"
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)


async def test_a_server_restarted_behind_pgbouncer(cluster: _Cluster) -> None:
    """Through PgBouncer: a crash mid-append is typed, a write while down is typed (after
    PgBouncer's query_wait_timeout), and the same store writes on after the restart."""
    if shutil.which("pgbouncer") is None:
        why = "PgBouncer is not installed (bash .ci/services/pgbouncer.sh start installs it)"
        if os.environ.get("THREADKEEP_REQUIRE_SERVICES"):
            pytest.fail(why + "; THREADKEEP_REQUIRE_SERVICES is set, so this is a failure")
        pytest.skip(why)
    admin = await asyncpg.connect(cluster.dsn())
    await admin.execute("DROP DATABASE IF EXISTS tk_bounced")
    await admin.execute("CREATE DATABASE tk_bounced")
    await admin.close()
    bouncer = _Bouncer(cluster)
    bouncer.start()
    try:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{bouncer.port}/tk_bounced"
        async with SqlStore(url, pooler="transaction") as store:
            store.schema_name = "public"  # type: ignore[attr-defined]
            chat = await store.create_chat("u", "t")
            await store.append_messages(chat.chat_id, _batch("before"))
            lost = [lambda: store.append_messages(chat.chat_id, _batch("lost"))]
            direct = cluster.dsn().rsplit("/", 1)[0] + "/tk_bounced"
            [error] = await _crash_while_blocked(cluster, store, chat.chat_id, lost, dsn=direct)
            assert isinstance(error, BackendUnavailable), repr(error)
            with pytest.raises(BackendUnavailable):
                async with asyncio.timeout(_GUARD):
                    await store.append_messages(chat.chat_id, _batch("down"))
            cluster.start()
            await bouncer.passes_queries()  # PgBouncer refuses logins for server_login_retry
            assert await _contents(store, chat.chat_id) == [f"before-{i}" for i in range(3)]
            after = await store.append_messages(chat.chat_id, _batch("after"))
            assert [m.seq for m in after] == [4, 5, 6]
    finally:
        bouncer.stop()
