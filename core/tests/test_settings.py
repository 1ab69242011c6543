"""Settings precedence: argument > environment > TOML settings file > default (SPEC 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadkeep import DEFAULT_URL, load_settings


def write_toml(path: Path, url: str) -> Path:
    path.write_text(f'url = "{url}"\ncursor_secret = "from-file-secret-0123456789"\n')
    return path


def test_default_is_the_embedded_sqlite_file(isolated_settings: Path):
    assert load_settings().url == DEFAULT_URL == "sqlite+aiosqlite:///./threadkeep.db"
    assert load_settings().cursor_secret is None


def test_settings_file_in_working_directory(isolated_settings: Path):
    write_toml(isolated_settings / "threadkeep.toml", "memory://file")
    settings = load_settings()
    assert settings.url == "memory://file"
    assert settings.cursor_secret == "from-file-secret-0123456789"


def test_settings_file_named_by_threadkeep_config(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
):
    write_toml(isolated_settings / "threadkeep.toml", "memory://ignored")
    other = write_toml(isolated_settings / "elsewhere.toml", "memory://named")
    monkeypatch.setenv("THREADKEEP_CONFIG", str(other))
    assert load_settings().url == "memory://named"


def test_environment_beats_the_file(isolated_settings: Path, monkeypatch: pytest.MonkeyPatch):
    write_toml(isolated_settings / "threadkeep.toml", "memory://file")
    monkeypatch.setenv("THREADKEEP_URL", "memory://env")
    settings = load_settings()
    assert settings.url == "memory://env"
    assert settings.cursor_secret == "from-file-secret-0123456789"  # other keys still from file


def test_argument_beats_environment_and_file(
    isolated_settings: Path, monkeypatch: pytest.MonkeyPatch
):
    write_toml(isolated_settings / "threadkeep.toml", "memory://file")
    monkeypatch.setenv("THREADKEEP_URL", "memory://env")
    assert load_settings(url="memory://arg").url == "memory://arg"
    assert load_settings(url=None).url == "memory://env"  # None means "not given"


def test_cli_url_follows_the_same_precedence(cli, memory_url: str, monkeypatch):
    # The CLI resolves its store with load_settings: --url, then env, then the file.
    cwd = Path.cwd()
    write_toml(cwd / "threadkeep.toml", memory_url)
    assert cli.json("stats", "--json") == {"chats": 0, "messages": 0, "tool_calls": 0}
    cli("demo")
    assert cli.json("stats", "--json")["messages"] == 11  # the demo went to the file's store
    monkeypatch.setenv("THREADKEEP_URL", memory_url + "-env")
    assert cli.json("stats", "--json")["messages"] == 0
    assert cli.json("stats", "--json", "--url", memory_url)["messages"] == 11


def test_cli_reports_a_broken_settings_file(cli):
    (Path.cwd() / "threadkeep.toml").write_text("url = [unclosed\n")
    cli.one_line_error(cli("stats"), "settings")
