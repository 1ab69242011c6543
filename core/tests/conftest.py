"""Fixtures shared by the core tests: a CLI driver, isolated settings and transcript files.

Tests run with ``--import-mode=importlib``, so helpers are handed out as fixtures rather
than imported from this module.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from typer.testing import CliRunner, Result

from threadkeep.cli import app
from threadkeep_sql.testing import SchemaPool

SETTINGS_ENV = (
    "THREADKEEP_URL",
    "THREADKEEP_CONFIG",
    "THREADKEEP_CURSOR_SECRET",
    "THREADKEEP_ARCHIVE_URL",
)


@pytest.fixture
def isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No THREADKEEP_* variables and an empty working directory (no threadkeep.toml)."""
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def memory_url() -> str:
    """A named in-memory store private to this test (shared by CLI calls in this process)."""
    return f"memory://core-tests-{uuid4().hex}"


class Cli:
    """Runs ``threadkeep`` in-process (typer's ``CliRunner``) and checks results."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        return self.runner.invoke(app, list(args), env=env)

    def json(self, *args: str) -> Any:
        """Run a command that must succeed and return its stdout parsed as JSON."""
        result = self(*args)
        assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
        return json.loads(result.stdout)

    @staticmethod
    def one_line_error(result: Result, *needles: str) -> str:
        """Assert a non-zero exit with exactly one stderr line, no traceback; return it."""
        assert result.exit_code != 0, result.stdout
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("threadkeep: error: "), lines[0]
        assert "Traceback" not in result.output
        for needle in needles:
            assert needle in lines[0], lines[0]
        return lines[0]


@pytest.fixture
def cli(isolated_settings: Path) -> Cli:
    """The CLI driver, with settings isolated from the machine's."""
    return Cli()


class Transcripts:
    """Writes synthetic OpenAI chat-completions transcripts under a temporary directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, name: str, records: Sequence[Any], *, jsonl: bool = False) -> Path:
        """Write ``records`` as a JSON array (or JSON Lines) file and return its path."""
        path = self.directory / name
        if jsonl:
            path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        else:
            path.write_text(json.dumps(records), encoding="utf-8")
        return path

    @staticmethod
    def record(turns: int, *, tag: str = "t") -> dict[str, Any]:
        """Return a record of ``1 + 4 * turns`` messages and ``turns`` tool calls.

        A system message, then per turn: a user question, an assistant tool call with
        ``content: null``, the tool's result, and the assistant's answer.
        """
        messages: list[dict[str, Any]] = [{"role": "system", "content": f"system {tag}"}]
        for turn in range(turns):
            call_id = f"call_{tag}_{turn}"
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"n": {turn}}}'},
            }
            messages += [
                {"role": "user", "content": f"question {tag} {turn}"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "name": "lookup", "content": f"r{turn}"},
                {"role": "assistant", "content": f"answer {tag} {turn}"},
            ]
        return {"messages": messages}


@pytest.fixture
def transcripts(tmp_path: Path) -> Transcripts:
    """A writer of synthetic transcripts in this test's temporary directory."""
    return Transcripts(tmp_path)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh embedded SQLite store file in this test's temporary directory."""
    return f"sqlite+aiosqlite:///{tmp_path / 'threadkeep-test.db'}"


@pytest.fixture(scope="session")
def pg_schema_pool() -> Iterator[SchemaPool | None]:
    """PostgreSQL schemas for stores opened with default options, reused between tests.

    ``threadkeep_sql.testing.SchemaPool``: a test gets a schema no other test holds, at the
    head revision with no rows (or, the first time, a new empty one its store migrates);
    one a test changed is dropped instead of reused. ``None`` without
    ``THREADKEEP_TEST_POSTGRES_URL`` (the tests then skip or fail through
    ``require_service`` as before).
    """
    url = os.environ.get("THREADKEEP_TEST_POSTGRES_URL")
    if not url:
        yield None
        return
    pool = SchemaPool(url, prefix="tk_core_test")
    yield pool
    asyncio.run(pool.close())
