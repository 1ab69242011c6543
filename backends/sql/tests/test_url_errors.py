"""What a wrong SQLite path or a refused PostgreSQL login says (no raw driver errors)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from threadkeep import BackendUnavailable, InvalidArgument
from threadkeep_contract_tests import require_service
from threadkeep_sql import SqlStore


def postgres_url() -> str:
    return require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")


async def test_a_sqlite_path_that_is_a_directory(tmp_path):
    with pytest.raises(InvalidArgument, match="is a directory; name a file in it"):
        await SqlStore(f"sqlite+aiosqlite:///{tmp_path}").open()


async def test_a_sqlite_path_that_is_not_a_database(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a database\n")
    with pytest.raises(InvalidArgument, match="is not a SQLite database"):
        await SqlStore(f"sqlite+aiosqlite:///{path}").open()
    assert path.read_text() == "hello, not a database\n"  # left untouched


async def test_an_empty_file_becomes_a_database(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    async with SqlStore(f"sqlite+aiosqlite:///{path}") as store:
        assert store.is_open


async def test_a_wrong_password_names_the_user_and_server():
    url = make_url(postgres_url()).set(password="certainly-not-the-password")
    text = url.render_as_string(hide_password=False)
    with pytest.raises(BackendUnavailable, match=f"login of user '{url.username}'") as caught:
        await SqlStore(text).open()
    assert "certainly-not-the-password" not in str(caught.value)


async def test_a_missing_database_is_named():
    url = make_url(postgres_url()).set(database="tk_no_such_database")
    with pytest.raises(BackendUnavailable, match="database 'tk_no_such_database' does not exist"):
        await SqlStore(url.render_as_string(hide_password=False)).open()


async def test_typed_asyncpg_url_parameters_reach_asyncpg_as_their_types(pg_schema):
    # SQLAlchemy hands URL query values on as text; asyncpg wants numbers and booleans.
    url, schema = pg_schema
    typed = f"{url}?statement_cache_size=0&command_timeout=30&max_cacheable_statement_size=0"
    async with SqlStore(typed, schema=schema) as store:
        chat = await store.create_chat("u", "typed url")
        await store.append_message(chat.chat_id, {"role": "user", "content": "hello"})
        page = await store.list_messages(chat.chat_id)
        assert [m.content for m in page.items] == ["hello"]
        assert store.driver.db._prepared is None  # statement_cache_size=0 keeps none


@pytest.mark.parametrize(
    ("query", "named"),
    [("statement_cache_size=lots", "statement_cache_size"), ("direct_tls=maybe", "direct_tls")],
)
async def test_an_untyped_asyncpg_url_parameter_is_named(query, named):
    with pytest.raises(InvalidArgument, match=named):
        await SqlStore(f"{postgres_url()}?{query}").open()


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("command_timeout=0", "command_timeout"),
        ("command_timeout=-1", "command_timeout"),
        ("command_timeout=nan", "command_timeout"),
        ("timeout=0", "timeout"),
        ("timeout=inf", "timeout"),
        ("statement_cache_size=-5", "statement_cache_size"),
        ("max_cached_statement_lifetime=-1", "max_cached_statement_lifetime"),
        ("max_cacheable_statement_size=-1", "max_cacheable_statement_size"),
        ("statement_cache_size=0&statement_cache_size=5", "statement_cache_size"),
    ],
)
async def test_an_out_of_range_asyncpg_url_parameter_is_named(query, named):
    # Was a bare ValueError from asyncpg at connect (negative, zero), or a misleading
    # BackendUnavailable timeout (nan, a zero connect timeout).
    with pytest.raises(InvalidArgument, match=named):
        await SqlStore(f"{postgres_url()}?{query}").open()
