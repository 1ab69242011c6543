"""Bad URLs and configuration fail before any connection, as one line with exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadkeep import InvalidArgument, open_store

PG = "postgresql+asyncpg://tk:pw@127.0.0.1"


@pytest.mark.parametrize(
    ("url", "needles"),
    [
        (f"{PG}:99999/db", ("port 99999", "1 to 65535")),
        (f"{PG}:0/db", ("port 0", "out of range")),
        (f"{PG}:abc/db", ("port 'abc'", "not a number")),
        ("postgresql+asyncpg://[::1/db", ("host '[::1'", "never closes", "malformed")),
        ("postgresql+asyncpg://u:p@[::1:5432/db", ("host '[::1:5432'", "never closes")),
        (f"{PG}/db?foo=bar", ("unknown query parameter 'foo'", "known: ", "schema")),
        (f"{PG}/db?sslmode=require", ("'sslmode'", "use ssl (for example ?ssl=require)")),
        ("mongodb://127.0.0.1:99999/x", ("MongoDB URL", "Port")),
        ("mongodb://127.0.0.1:abc/x", ("MongoDB URL", "Port")),
        ("mongodb://127.0.0.1/x?foo=bar", ("MongoDB URL option 'foo'",)),
        ("mongodb+srv://cluster.example/x?maxPoolSize=many", ("'maxPoolSize'",)),
    ],
)
def test_bad_store_urls(cli, url, needles):
    result = cli("chats", "--url", url)
    cli.one_line_error(result, *needles)
    assert result.exit_code == 2


def test_known_postgres_query_parameters_pass_validation():
    store = open_store(f"{PG}:5432/db?schema=app&ssl=disable&command_timeout=5")
    assert store.url.endswith("command_timeout=5")


def test_a_short_cursor_secret_is_refused_before_connecting(cli, sqlite_url, tmp_path):
    result = cli("chats", "--url", sqlite_url, env={"THREADKEEP_CURSOR_SECRET": "short"})
    cli.one_line_error(result, "cursor_secret", "THREADKEEP_CURSOR_SECRET", "16 bytes")
    assert result.exit_code == 2
    assert not (tmp_path / "threadkeep-test.db").exists()  # refused before opening
    with pytest.raises(InvalidArgument, match="too short"):
        open_store("memory://", cursor_secret=b"0123456789")


def test_a_short_cursor_secret_from_the_settings_file_names_the_file(cli, memory_url, tmp_path):
    (tmp_path / "threadkeep.toml").write_text('cursor_secret = "short"\n', encoding="utf-8")
    result = cli("chats", "--url", memory_url)
    line = cli.one_line_error(result, "cursor_secret in the settings file threadkeep.toml")
    assert "THREADKEEP_CURSOR_SECRET" not in line
    assert result.exit_code == 2


@pytest.mark.parametrize("duration", ["99999999999d", "999999d", "99999999999w"])
def test_a_duration_beyond_year_one_is_a_usage_error(cli, memory_url, tmp_path, duration):
    archive = (tmp_path / "archive").as_uri()
    result = cli("archive", "--older-than", duration, "--url", memory_url, "--archive-url", archive)
    cli.one_line_error(result, repr(duration), "too long a duration", "at most")
    assert result.exit_code == 2


@pytest.mark.parametrize("url", ["s3://bucket/prefix", "file:///var/archive"])
def test_an_archive_url_given_as_the_store(cli, url):
    result = cli("chats", "--url", url)
    cli.one_line_error(result, f"{url!r} is an archive URL", "--archive-url", "--url")
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("archive_url", "needles"),
    [
        ("sqlite+aiosqlite:///./x.db", ("is a store URL, not an archive URL", "file:///")),
        ("postgresql+asyncpg://u:secret@h/db", ("'postgresql+asyncpg://u:***@h/db'",)),
        ("relative/folder", ("not an archive URL", "for this folder write file:///")),
    ],
)
def test_a_wrong_archive_url_explains_the_forms(cli, memory_url, archive_url, needles):
    result = cli("archive", "--older-than", "0d", "--url", memory_url, "--archive-url", archive_url)
    line = cli.one_line_error(result, *needles, "s3://bucket/prefix")
    assert "secret" not in line
    assert result.exit_code == 2


def test_sqlite_paths_that_are_not_databases(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("not a database")
    for path, needle in [(tmp_path, "is a directory"), (tmp_path / "notes.txt", "not a SQLite")]:
        result = cli("chats", "--url", f"sqlite+aiosqlite:///{path}")
        cli.one_line_error(result, needle)
        assert result.exit_code == 2


def test_archive_without_an_archive_url_names_every_way_to_give_one(cli, memory_url):
    result = cli("archive", "--older-than", "30d", "--url", memory_url)
    cli.one_line_error(result, "--archive-url", "THREADKEEP_ARCHIVE_URL", "archive_url")
    assert result.exit_code == 2


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc")
def test_an_archive_directory_that_cannot_be_created_is_a_configuration_error(cli, memory_url):
    result = cli(
        "archive", "--older-than", "0d", "--url", memory_url, "--archive-url", "file:///proc/nope"
    )
    line = cli.one_line_error(result, "/proc/nope", "cannot be created", "configuration error")
    assert "retry later" not in line
    assert result.exit_code == 2
