"""Schema upgrades by hand: ``auto_migrate=False``, ``SchemaOutdated``, ``threadkeep migrate``.

No test names the newest revision: the head is whatever the shipped scripts define, so more
revisions (0004, 0005...) keep these tests true.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from alembic import command
from typer.testing import CliRunner

from threadkeep import Message, SchemaOutdated, open_store
from threadkeep.cli import app
from threadkeep_sql import SqlStore
from threadkeep_sql._engine import Database, normalize_url
from threadkeep_sql._migrate import _config, current_revision, head_revision, revision_history

from .conftest import asyncpg_dsn

FIRST = "0001"  # the initial revision never changes


@pytest.fixture(autouse=True)
def _no_machine_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./threadkeep.toml of the machine's
    for name in ("THREADKEEP_URL", "THREADKEEP_CONFIG", "THREADKEEP_AUTO_MIGRATE"):
        monkeypatch.delenv(name, raising=False)


def _cli_url(url: str, options: dict[str, Any]) -> str:
    schema = options.get("schema")
    return url if schema is None else f"{url}?schema={schema}"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), prog_name="threadkeep")


async def _acli(*args: str) -> Any:
    """Run the command line from an async test (it runs its own event loop: a thread)."""
    return await asyncio.to_thread(_cli, *args)


async def _at(url: str, options: dict[str, Any], revision: str | None) -> str | None:
    """Bring the database to ``revision`` with Alembic (``None``: leave it); return where it is."""
    database = Database.create(normalize_url(url), schema=options.get("schema"))
    try:
        async with database.transaction() as conn:
            if revision is not None:
                await conn.run_sync(lambda sync: command.upgrade(_config(sync), revision))
            return await conn.run_sync(current_revision)
    finally:
        await database.dispose()


async def _tables(url: str, options: dict[str, Any]) -> set[str]:
    database = Database.create(normalize_url(url), schema=options.get("schema"))
    try:
        async with database.read() as conn:
            return set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
    finally:
        await database.dispose()


async def test_without_auto_migrate_an_empty_database_is_not_touched(engine_url) -> None:
    url, options = engine_url
    with pytest.raises(SchemaOutdated, match="threadkeep migrate --url") as caught:
        await SqlStore(url, auto_migrate=False, **options).open()
    assert (caught.value.current, caught.value.required) == (None, head_revision())
    assert "no threadkeep schema yet" in str(caught.value)
    assert await _tables(url, options) == set()


async def test_an_older_schema_says_so_and_the_command_upgrades_it(engine_url) -> None:
    url, options = engine_url
    assert await _at(url, options, FIRST) == FIRST
    with pytest.raises(SchemaOutdated) as caught:
        await SqlStore(url, auto_migrate=False, **options).open()
    text = str(caught.value)
    assert f"is at revision {FIRST!r}" in text
    assert f"needs revision {head_revision()!r}" in text
    assert "`threadkeep migrate --url" in text
    assert await _at(url, options, None) == FIRST  # nothing changed
    current = await _acli("migrate", "current", "--json", "--url", _cli_url(url, options))
    assert current.exit_code == 0, current.output
    assert json.loads(current.stdout) == {
        "current": FIRST,
        "head": head_revision(),
        "up_to_date": head_revision() == FIRST,
    }
    upgraded = await _acli("migrate", "--url", _cli_url(url, options))
    assert upgraded.exit_code == 0, upgraded.output
    assert f"schema upgraded from {FIRST} to {head_revision()}" in upgraded.stdout
    async with SqlStore(url, auto_migrate=False, **options) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="works"))
    again = await _acli("migrate", "--url", _cli_url(url, options))
    assert "nothing to do" in again.stdout


async def test_sql_prints_the_ddl_that_a_dba_can_run(engine_url) -> None:
    """``--sql`` changes nothing; running its output by hand brings the schema to the head."""
    url, options = engine_url
    await _at(url, options, FIRST)
    printed = await _acli("migrate", "--sql", "--url", _cli_url(url, options))
    assert printed.exit_code == 0, printed.output
    later = [r.revision for r in revision_history()][1:]
    for revision in later:
        assert f"-> {revision}" in printed.stdout
    assert f"-> {FIRST}" not in printed.stdout  # from where the database is, not from scratch
    assert await _at(url, options, None) == FIRST
    await _run_sql(url, options, printed.stdout)
    assert await _at(url, options, None) == head_revision()
    async with SqlStore(url, auto_migrate=False, **options) as store:
        await store.create_chat("u", "t")
    assert (await _acli("migrate", "--sql", "--url", _cli_url(url, options))).stdout == ""


async def _run_sql(url: str, options: dict[str, Any], script: str) -> None:
    if url.startswith("sqlite"):
        path = normalize_url(url).database
        assert path is not None
        with sqlite3.connect(path) as conn:
            conn.executescript(script)
        return
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(script)  # it starts with SET search_path TO "<the schema>"
    finally:
        await conn.close()
    assert options.get("schema")  # the script set the search path to it


def test_history_lists_the_shipped_revisions_oldest_first(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'history.db'}"
    shown = _cli("migrate", "history", "--json", "--url", url)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    revisions = [r["revision"] for r in data["revisions"]]
    assert revisions[0] == FIRST
    assert revisions[-1] == head_revision() == data["head"]
    assert all(
        r["down_revision"] == p for r, p in zip(data["revisions"][1:], revisions, strict=False)
    )
    assert data["current"] is None
    assert not (tmp_path / "history.db").exists(), "looking created a database file"
    text = _cli("migrate", "history", "--url", url).stdout
    assert f"{head_revision()}  " in text
    assert "(head)" in text


async def test_a_schema_newer_than_the_code_is_refused_by_name(engine_url) -> None:
    url, options = engine_url
    await _at(url, options, "head")
    database = Database.create(normalize_url(url), schema=options.get("schema"))
    try:
        async with database.transaction() as conn:
            await conn.execute(
                sa.text("UPDATE threadkeep_alembic_version SET version_num = 'zz99'")
            )
    finally:
        await database.dispose()
    for auto in (True, False):
        with pytest.raises(SchemaOutdated, match="does not know") as caught:
            await SqlStore(url, auto_migrate=auto, **options).open()
        assert caught.value.current == "zz99"
    result = await _acli("migrate", "--url", _cli_url(url, options))
    assert result.exit_code == 1
    assert "'zz99', which this threadkeep-sql does not know" in result.stderr


async def test_the_setting_turns_auto_migrate_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'settings.db'}"
    monkeypatch.setenv("THREADKEEP_AUTO_MIGRATE", "false")
    with pytest.raises(SchemaOutdated):
        await open_store(url).open()
    async with open_store(url, auto_migrate=True):  # an argument wins over the setting
        pass
    monkeypatch.delenv("THREADKEEP_AUTO_MIGRATE")
    (tmp_path / "threadkeep.toml").write_text("auto_migrate = false\n", encoding="utf-8")
    url = f"sqlite+aiosqlite:///{tmp_path / 'older.db'}"
    await _at(url, {}, FIRST)
    with pytest.raises(SchemaOutdated, match=f"revision {FIRST!r}"):
        await open_store(url).open()
    stats = await _acli("stats", "--url", url)
    assert stats.exit_code == 1
    assert "threadkeep migrate" in stats.stderr


async def test_without_auto_migrate_a_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    """A store that may not change the schema does not create its SQLite file either: a
    mistyped path fails naming the command and leaves no empty database behind."""
    path = tmp_path / "typo.db"
    with pytest.raises(SchemaOutdated, match="has no threadkeep schema yet") as caught:
        await SqlStore(f"sqlite+aiosqlite:///{path}", auto_migrate=False).open()
    assert "threadkeep migrate --url" in str(caught.value)
    assert (caught.value.current, caught.value.required) == (None, head_revision())
    assert not path.exists(), "opening without auto_migrate created the SQLite file"


def _run_like_the_sqlite3_shell(path: str, script: str) -> list[str]:
    """Run ``script`` as ``sqlite3 FILE < script.sql`` does: statement by statement, going
    on after a failing one (the shell stops only with ``-bail``); return the errors."""
    errors: list[str] = []
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        statement = ""
        for line in script.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                try:
                    conn.execute(statement)
                except sqlite3.Error as exc:
                    errors.append(str(exc))
                statement = ""
    finally:
        conn.close()
    return errors


async def test_the_printed_sqlite_ddl_never_marks_tenant_chats_upgraded(tmp_path: Path) -> None:
    """SQLite cannot compute revision 0004's keys in SQL, so ``--sql`` cannot rekey chats
    with a tenant: run as the sqlite3 shell runs it (on past errors), the script must leave
    the database at its old revision (not at the head with stale keys), and the online
    ``threadkeep migrate`` then rekeys it."""
    path = tmp_path / "tenants.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with SqlStore(url) as store:
        chat = await store.create_chat("u", "t", tenant_id="acme")
    await _alembic_downgrade(url, "0003")
    printed = await _acli("migrate", "--sql", "--url", url)
    assert printed.exit_code == 0, printed.output
    errors = _run_like_the_sqlite3_shell(str(path), printed.stdout)
    assert any("threadkeep migrate" in e for e in errors), errors
    assert await _at(url, {}, None) == "0003", "the script marked un-rekeyed chats upgraded"
    upgraded = await _acli("migrate", "--url", url)
    assert upgraded.exit_code == 0, upgraded.output
    async with SqlStore(url, auto_migrate=False) as store:
        found = await store.find_chat("u", "t", tenant_id="acme")
        assert found is not None
        assert found.chat_id == chat.chat_id


async def _alembic_downgrade(url: str, revision: str) -> None:
    database = Database.create(normalize_url(url))
    try:
        async with database.transaction() as conn:
            await conn.run_sync(lambda sync: command.downgrade(_config(sync), revision))
    finally:
        await database.dispose()
