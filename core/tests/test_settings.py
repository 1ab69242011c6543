"""Settings precedence: argument > environment > TOML settings file > default (SPEC 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadkeep import DEFAULT_URL, InvalidArgument, load_settings


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


def test_a_named_settings_file_must_exist(isolated_settings: Path, monkeypatch):
    monkeypatch.setenv("THREADKEEP_CONFIG", str(isolated_settings / "missing.toml"))
    with pytest.raises(InvalidArgument, match=r"missing\.toml \(from THREADKEEP_CONFIG\) does not"):
        load_settings()


def test_unknown_keys_are_named_with_the_valid_ones(isolated_settings: Path):
    (isolated_settings / "threadkeep.toml").write_text('url = "memory://x"\nurll = "memory://y"\n')
    with pytest.raises(InvalidArgument) as caught:
        load_settings()
    assert str(caught.value) == (
        "settings file threadkeep.toml: unknown key 'urll' (did you mean 'url'?); "
        "valid keys: archive_url, auto_migrate, cursor_secret, url"
    )


def test_malformed_toml_names_the_file_and_line(isolated_settings: Path):
    (isolated_settings / "threadkeep.toml").write_text('url = "memory://x"\narchive_url = x\n')
    with pytest.raises(InvalidArgument, match=r"threadkeep\.toml is not valid TOML: .*line 2"):
        load_settings()


def test_a_value_of_the_wrong_type_names_the_key(isolated_settings: Path):
    (isolated_settings / "threadkeep.toml").write_text("url = 5\n")
    with pytest.raises(InvalidArgument, match=r"invalid setting 'url' .*threadkeep\.toml"):
        load_settings()


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        (
            "urll = 'x'\n",
            ("unknown key 'urll'", "valid keys: archive_url, auto_migrate, cursor_secret, url"),
        ),
        ("url = [\n", ("not valid TOML", "line 1")),
    ],
)
def test_cli_settings_errors_are_one_line_with_exit_2(cli, content, needles):
    (Path.cwd() / "threadkeep.toml").write_text(content)
    result = cli("stats")
    cli.one_line_error(result, "threadkeep.toml", *needles)
    assert result.exit_code == 2
    named = cli("stats", env={"THREADKEEP_CONFIG": "nowhere.toml"})
    cli.one_line_error(named, "nowhere.toml (from THREADKEEP_CONFIG) does not exist")
