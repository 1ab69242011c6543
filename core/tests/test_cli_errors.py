"""How the command line fails: one line on stderr and a documented exit status (docs/cli.md)."""

from __future__ import annotations

from typing import Any

import pytest

import threadkeep.cli._read as read_module
from threadkeep import BackendUnavailable


def _raise(exc: BaseException) -> Any:
    def run(coroutine: Any) -> Any:
        coroutine.close()
        raise exc

    return run


def test_an_unexpected_exception_is_one_line_and_exit_1(cli, memory_url, monkeypatch):
    monkeypatch.setattr(read_module, "run", _raise(RuntimeError("kaboom")))
    result = cli("chats", "--url", memory_url)
    line = cli.one_line_error(result, "unexpected RuntimeError: kaboom", "THREADKEEP_DEBUG=1")
    assert result.exit_code == 1, line


def test_threadkeep_debug_shows_the_traceback(cli, memory_url, monkeypatch):
    monkeypatch.setattr(read_module, "run", _raise(RuntimeError("kaboom")))
    result = cli("chats", "--url", memory_url, env={"THREADKEEP_DEBUG": "1"})
    assert result.exit_code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "threadkeep: error: unexpected RuntimeError: kaboom"
    )


def test_a_threadkeep_error_gives_its_message_and_exit_1(cli, memory_url, monkeypatch):
    monkeypatch.setattr(read_module, "run", _raise(BackendUnavailable("the server is down")))
    result = cli("chats", "--url", memory_url)
    assert cli.one_line_error(result) == "threadkeep: error: the server is down"
    assert result.exit_code == 1


def test_ctrl_c_exits_130(cli, memory_url, monkeypatch):
    monkeypatch.setattr(read_module, "run", _raise(KeyboardInterrupt()))
    result = cli("chats", "--url", memory_url)
    assert result.exit_code == 130
    assert "interrupted" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["chats", "--no-such-option"], "No such option"),
        (["history", "not-a-uuid"], "chat_id"),
        (["chats", "--limit", "0"], "limit must be at least 1"),
        (["chats", "--cursor", "garbage"], "cursor"),
        (["chats", "--url", "nosuchscheme://x"], "nosuchscheme"),
        (["chats", "--url", "no-scheme-at-all"], "not a URL"),
    ],
)
def test_bad_arguments_and_configuration_exit_2(cli, memory_url, args, needle):
    url = [] if "--url" in args else ["--url", memory_url]
    result = cli(*args, *url)
    cli.one_line_error(result, needle)
    assert result.exit_code == 2


def test_a_missing_chat_exits_1(cli, memory_url):
    result = cli("history", "00000000-0000-0000-0000-000000000000", "--url", memory_url)
    cli.one_line_error(result, "00000000-0000-0000-0000-000000000000")
    assert result.exit_code == 1
