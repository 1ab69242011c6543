"""A SeaweedFS of the test's own and an HTTP fault proxy in front of it (S3 fault tests).

``OwnWeed`` runs ``weed mini`` (the binary ``.ci/services/s3.sh`` installs) on a data folder
of the test's own, so a test can SIGKILL it and start it again on the same data; the shared
server is never touched. ``FaultProxy`` is the endpoint the store talks to: a listening
socket the test binds once (port 0, read back), forwarding each request to the server on a
connection of its own, and injecting faults deterministically: canned 5xx answers, a request
or a response held after N bytes until the test lets go (the moment to kill the server), a
response dropped after the server applied the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WEED", "FaultProxy", "OwnWeed", "Rule"]

WEED = Path(os.environ.get("TK_CI_DIR", "/tmp/threadkeep-ci")) / "seaweedfs-venv/bin/weed"
"""The ``weed`` binary ``.ci/services/s3.sh`` installs in its own virtualenv."""

ACCESS_KEY, SECRET_KEY = "faults", "faults-secret"
_START_SECONDS = 120  # a hang guard: a loaded machine starts weed slowly
_PORTS = 5  # s3, master, volume, filer, admin (and each + 10000 for gRPC)


class OwnWeed:
    """``weed mini`` on ports of a random base, restartable on the same data and ports.

    No port is probed free beforehand: a start whose ports are taken exits, and ``start``
    tries another base (at most 8 times). A restart after ``kill`` reuses the ports (the
    killed process released them at once).
    """

    def __init__(self, state: Path) -> None:
        self.state = state
        (state / "data").mkdir(parents=True)
        identities = {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}
        actions = ["Admin", "Read", "List", "Tagging", "Write"]
        config = {
            "identities": [{"name": "faults", "credentials": [identities], "actions": actions}]
        }
        (state / "identities.json").write_text(json.dumps(config))
        self.base = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def s3_port(self) -> int:
        """The S3 port of the running (or last) server."""
        return self.base

    def _command(self) -> list[str]:
        b, s = self.base, self.state
        return [
            str(WEED), f"-logdir={s}", "mini", "-master.telemetry=false", "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1", "-s3.allowDeleteBucketNotEmpty=false",
            "-s3.autoCreateBucket=false", f"-dir={s / 'data'}", f"-s3.port={b}",
            f"-master.port={b + 1}", f"-volume.port={b + 2}", f"-filer.port={b + 3}",
            f"-admin.port={b + 4}", "-webdav=false", "-admin.ui=false",
            f"-s3.config={s / 'identities.json'}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.localSocket={s / 's3.sock'}", f"-filer.localSocket={s / 'filer.sock'}",
        ]  # fmt: skip

    def start(self, ready: Callable[[int], bool]) -> None:
        """Start the server and wait until ``ready(s3_port)`` holds (up to 120 s)."""
        assert self.process is None, "the server is running already"
        for _ in range(8):
            if not self.base or self._starts == 0:
                self.base = random.randrange(20000, 29000, 10)
            if self._spawn(ready):
                self._starts += 1
                return
            self.base = 0
        raise AssertionError(f"weed did not start on any port; logs in {self.state}")

    def _spawn(self, ready: Callable[[int], bool]) -> bool:
        log = self.state / f"weed-{time.monotonic_ns()}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(self._command(), stdout=out, stderr=out)
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # most likely a port in use: the caller tries another base
            if ready(self.s3_port):
                return True
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"weed did not answer within {_START_SECONDS} s: {log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the server (no shutdown at all) and reap it."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
            self.process = None

    def cleanup(self) -> None:
        """Kill the server and remove the gRPC sockets a killed weed leaves in /tmp."""
        self.kill()
        if self.base:
            for port in range(self.base + 10000, self.base + 10000 + _PORTS):
                for path in Path("/tmp").glob(f"seaweedfs-*-grpc-{port}.sock"):
                    path.unlink(missing_ok=True)


@dataclass
class Rule:
    """One fault: what requests it matches and what the proxy does to them.

    Attributes:
        action: ``"answer"`` (a canned ``status``/``code`` error, the request not
            forwarded), ``"hold_request"`` (forward ``after_bytes`` of the body, then stop
            and set ``reached``), ``"hold_response"`` (forward ``after_bytes`` of the
            response, then stop and set ``reached``), ``"drop_response"`` (forward the
            request whole, then close the client's connection without the answer),
            ``"delay"`` (hold the request until ``release`` is set).
        method: The HTTP method it matches (``None``: any).
        query: A substring the request's target must contain (``"uploadId"``...).
        times: How many matching requests it acts on.
    """

    action: str
    method: str | None = None
    query: str = ""
    times: int = 1
    after_bytes: int = 0
    status: int = 503
    code: str = "SlowDown"
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    fired: int = 0

    def matches(self, method: str, target: str) -> bool:
        """Whether this rule acts on the request ``method target``."""
        ok = self.method in (None, method) and self.query in target
        return ok and self.fired < self.times


class FaultProxy:
    """The S3 endpoint the store uses: a forwarder to ``upstream()`` that injects faults.

    Each request goes to the server on a connection of its own (with ``Connection: close``,
    so a response ends where the server closes it; nothing else of the request changes,
    so its signature still holds). ``seen`` lists every ``(method, target)`` forwarded or
    answered.
    """

    def __init__(self, upstream: Callable[[], int]) -> None:
        self.upstream = upstream
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str]] = []
        self.errors: list[Exception] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, rule: Rule) -> Rule:
        """Install ``rule`` (checked in the order added) and return it."""
        self.rules.append(rule)
        return rule

    async def __aenter__(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for rule in self.rules:
            rule.release.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        assert not self.errors, f"the fault proxy failed: {self.errors!r}"

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # noqa: BLE001 - a bug of the proxy: the test fails at exit
            self.errors.append(exc)
        finally:
            writer.close()
            self._tasks.discard(task)

    def _rule_for(self, method: str, target: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(method, target):
                rule.fired += 1
                return rule
        return None

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed its idle connection
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)
        }
        assert "chunked" not in headers.get("transfer-encoding", ""), "chunked bodies unsupported"
        length = int(headers.get("content-length", "0"))
        self.seen.append((method, target))
        rule = self._rule_for(method, target)
        if rule is not None and rule.action == "answer":
            if "100-continue" not in headers.get("expect", "").lower():
                await reader.readexactly(length)  # else the client waits for the answer first
            writer.write(_error_response(rule.status, rule.code))
            await writer.drain()
            return False
        if rule is not None and rule.action == "delay":
            rule.reached.set()
            await rule.release.wait()
        kept = [h for h in lines[1:] if h and not h.lower().startswith("connection:")]
        upstream_head = "\r\n".join([lines[0], *kept, "Connection: close", "", ""])
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream())
        try:
            up_writer.write(upstream_head.encode("latin-1"))
            body = asyncio.ensure_future(self._send_body(reader, up_writer, length, rule))
            await self._relay_response(up_reader, writer, rule)
            body.cancel()
            await asyncio.gather(body, return_exceptions=True)
        finally:
            up_writer.close()
        return rule is None or rule.action == "delay"

    async def _send_body(
        self, reader: asyncio.StreamReader, up: asyncio.StreamWriter, length: int, rule: Rule | None
    ) -> None:
        limit = rule.after_bytes if rule is not None and rule.action == "hold_request" else length
        sent = 0
        while sent < min(limit, length):
            chunk = await reader.read(min(65536, min(limit, length) - sent))
            if not chunk:
                return
            up.write(chunk)
            await up.drain()
            sent += len(chunk)
        if sent < length:  # held: the rest never goes; the test kills the server now
            assert rule is not None
            rule.reached.set()
            await rule.release.wait()

    async def _relay_response(
        self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, rule: Rule | None
    ) -> None:
        holding = rule is not None and rule.action == "hold_response"
        dropping = rule is not None and rule.action == "drop_response"
        sent = 0
        with contextlib.suppress(ConnectionError, OSError, asyncio.IncompleteReadError):
            if dropping:  # let an interim "100 Continue" through (the body follows it)
                interim = await up.readuntil(b"\r\n\r\n")
                if interim.startswith(b"HTTP/1.1 100"):
                    writer.write(interim)
                    await writer.drain()
            while chunk := await up.read(65536):
                if dropping:
                    continue
                if holding and sent + len(chunk) > rule.after_bytes:  # type: ignore[union-attr]
                    chunk = chunk[: rule.after_bytes - sent]  # type: ignore[union-attr]
                    writer.write(chunk)
                    await writer.drain()
                    rule.reached.set()  # type: ignore[union-attr]
                    await rule.release.wait()  # type: ignore[union-attr]
                    return
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        if dropping:
            rule.reached.set()  # type: ignore[union-attr]


def _error_response(status: int, code: str) -> bytes:
    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>injected</Message></Error>"
    reason = {500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return (head + body).encode()
