"""``threadkeep serve``: refuses an open non-loopback host; serves with uvicorn when started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _started(args: list[str], env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    process = subprocess.Popen(
        [*SERVE, "--port", str(port), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()
            try:
                httpx.get(f"{base}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout:
            process.stdout.close()
        if process.stderr:
            process.stderr.close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADKEEP_")}
    return {**env, **extra}


def test_serves_with_a_shared_secret(sqlite_url, token, secret, tmp_path: Path):
    env = _env(THREADKEEP_JWT_SECRET=secret)
    with _started(["--url", sqlite_url], env) as (base, _):
        path = f"{base}/agents/a/chat/threads"
        assert httpx.get(path).status_code == 401
        answer = httpx.get(path, headers={"Authorization": f"Bearer {token('alice')}"})
        assert answer.status_code == 200
        assert answer.json() == {"items": [], "nextCursor": None, "hasMore": False}
        assert httpx.get(f"{base}/viewer/").status_code == 200


def test_loopback_without_authenticator_prints_a_one_off_token(sqlite_url, token):
    with _started(["--url", sqlite_url, "--token-user", "ops"], _env()) as (base, process):
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("THREADKEEP_TOKEN=")
        one_off = line.removeprefix("THREADKEEP_TOKEN=")
        path = f"{base}/agents/a/chat/threads"
        assert httpx.get(path, headers={"Authorization": f"Bearer {one_off}"}).status_code == 200
        # A token signed with any other secret is refused: the secret is random per start.
        assert (
            httpx.get(path, headers={"Authorization": f"Bearer {token('ops')}"}).status_code == 401
        )


def test_max_body_bytes_caps_request_bodies(sqlite_url, token, secret):
    env = _env(THREADKEEP_JWT_SECRET=secret)
    args = ["--url", sqlite_url, "--max-body-bytes", "2048"]
    with _started(args, env) as (base, _):
        headers = {"Authorization": f"Bearer {token('alice')}"}
        assert httpx.get(f"{base}/agents/a/chat/threads", headers=headers).status_code == 200
        body = b"{" + b" " * 4096 + b"}"
        answer = httpx.post(f"{base}/agents/a/chat/runs", headers=headers, content=body)
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "payload_too_large"
