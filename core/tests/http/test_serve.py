"""``threadkeep serve``: refuses an open non-loopback host; serves with uvicorn when started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

SERVE = [sys.executable, "-c", "from threadkeep.cli import main; main()", "serve"]


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch):
    monkeypatch.delenv("THREADKEEP_JWT_SECRET", raising=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.org"])
def test_refuses_a_non_loopback_host_without_an_authenticator(cli, memory_url, host):
    result = cli("serve", "--host", host, "--url", memory_url)
    assert result.exit_code == 2
    cli.one_line_error(result, "refusing to serve", "--jwt-secret")


def test_bad_authenticator_options_are_usage_errors(cli, memory_url, tmp_path):
    for args, needle in (
        (["--auth", "no-colon"], "MODULE:NAME"),
        (["--auth", "threadkeep:no_such_name"], "cannot be loaded"),
        (["--jwt-secret", "short"], "at least 32 bytes"),
        (["--jwt-public-key", str(tmp_path / "missing.pem")], "missing.pem"),
        (["--jwt-secret", "s" * 40, "--on-error", "ignore"], "on_error"),
        (["--jwt-secret", "s" * 40, "--write-policy", "often"], "write_policy"),
    ):
        result = cli("serve", "--host", "0.0.0.0", "--url", memory_url, *args)
        assert result.exit_code == 2, (args, result.stderr)
        cli.one_line_error(result, needle)


TIMEOUT = 60  # seconds per request: a hang guard on a loaded machine, not a timing


class _Stderr:
    """Drains a server's stderr on a thread; finds the port uvicorn says it listens on."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self.port: int | None = None
        self.ended = threading.Event()  # the port is known, or stderr closed
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)
            found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line)
            if found and self.port is None:
                self.port = int(found.group(1))
                self.ended.set()
        self.ended.set()

    def join(self) -> str:
        self._thread.join(timeout=TIMEOUT)
        return "".join(self.lines)


@contextmanager
def _started(args: list[str], env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    # Port 0: the server binds a port the kernel picks and uvicorn logs it. A port probed
    # free here and bound by the child later could be taken in between on a busy machine.
    process = subprocess.Popen(
        [*SERVE, "--port", "0", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    stderr = _Stderr(process.stderr)
    try:
        # A hang guard, not a timing: the child imports the app and opens its store first.
        stderr.ended.wait(timeout=300)
        if stderr.port is None:
            process.kill()
            process.wait()
            raise AssertionError(f"the server did not start: {stderr.join()}")
        base = f"http://127.0.0.1:{stderr.port}"
        httpx.get(f"{base}/openapi.json", timeout=TIMEOUT).raise_for_status()
        yield base, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        stderr.join()
        if process.stdout:
            process.stdout.close()
        process.stderr.close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADKEEP_")}
    return {**env, **extra}


def test_serves_with_a_shared_secret(sqlite_url, token, secret, tmp_path: Path):
    env = _env(THREADKEEP_JWT_SECRET=secret)
    with _started(["--url", sqlite_url], env) as (base, _):
        path = f"{base}/agents/a/chat/threads"
        assert httpx.get(path, timeout=TIMEOUT).status_code == 401
        answer = httpx.get(
            path, headers={"Authorization": f"Bearer {token('alice')}"}, timeout=TIMEOUT
        )
        assert answer.status_code == 200
        assert answer.json() == {"items": [], "nextCursor": None, "hasMore": False}
        assert httpx.get(f"{base}/viewer/", timeout=TIMEOUT).status_code == 200


def test_loopback_without_authenticator_prints_a_one_off_token(sqlite_url, token):
    with _started(["--url", sqlite_url, "--token-user", "ops"], _env()) as (base, process):
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("THREADKEEP_TOKEN=")
        one_off = line.removeprefix("THREADKEEP_TOKEN=")
        path = f"{base}/agents/a/chat/threads"
        assert (
            httpx.get(
                path, headers={"Authorization": f"Bearer {one_off}"}, timeout=TIMEOUT
            ).status_code
            == 200
        )
        # A token signed with any other secret is refused: the secret is random per start.
        assert (
            httpx.get(
                path, headers={"Authorization": f"Bearer {token('ops')}"}, timeout=TIMEOUT
            ).status_code
            == 401
        )


def test_max_body_bytes_caps_request_bodies(sqlite_url, token, secret):
    env = _env(THREADKEEP_JWT_SECRET=secret)
    args = ["--url", sqlite_url, "--max-body-bytes", "2048"]
    with _started(args, env) as (base, _):
        headers = {"Authorization": f"Bearer {token('alice')}"}
        assert (
            httpx.get(f"{base}/agents/a/chat/threads", headers=headers, timeout=TIMEOUT).status_code
            == 200
        )
        body = b"{" + b" " * 4096 + b"}"
        answer = httpx.post(
            f"{base}/agents/a/chat/runs", headers=headers, content=body, timeout=TIMEOUT
        )
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "payload_too_large"
