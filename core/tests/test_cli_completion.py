"""Shell completion (docs/cli.md): the scripts typer writes, and the completions they ask for."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from threadkeep.cli import app


def _complete(words: str, shell: str = "bash") -> list[str]:
    """Ask the app for completions the way the installed shell script does."""
    env = {
        "_THREADKEEP_COMPLETE": f"complete_{shell}",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        "_TYPER_COMPLETE_ARGS": words,
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    result = CliRunner().invoke(app, [], env=env, prog_name="threadkeep")
    assert result.exit_code == 0, result.output
    return result.output.split()


def test_subcommands_complete() -> None:
    assert _complete("threadkeep hi") == ["history"]
    assert {"chats", "demo", "history", "import", "archive", "restore", "stats"} <= set(
        _complete("threadkeep ")
    )


def test_options_of_a_command_complete() -> None:
    assert "--limit" in _complete("threadkeep history --li")
    assert "--format" in _complete("threadkeep import --fo")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_completions(shell: str) -> None:
    assert any("history" in word for word in _complete("threadkeep hi", shell))


def test_show_completion_prints_a_script_that_calls_back() -> None:
    result = CliRunner().invoke(app, ["--show-completion"], prog_name="threadkeep")
    assert result.exit_code == 0, result.output
    assert "_THREADKEEP_COMPLETE=complete_" in result.output
    assert "threadkeep" in result.output


def test_help_lists_the_completion_options() -> None:
    result = CliRunner().invoke(app, ["--help"], prog_name="threadkeep")
    assert "--install-completion" in result.output
    assert "--show-completion" in result.output
