"""CPU cost of core's Python per message, without a database (see bench/README.md).

Run from the repository root:

    python3 -m uv run python bench/core_bench.py [--reps 7] [--number 2000]

Prints, for each piece the public calls pay on every message or page, the CPU time per
operation (``time.process_time``: this process only, so other load on a shared machine
moves it much less than wall time), the minimum over ``--reps`` repetitions:

- ``prepare``: ``Records.prepare`` of a short message (the bench's ``message N``) and of a
  1 KB assistant message with a tool call and metadata: content checks, the stored body,
  the fingerprint;
- ``page``: ``Records.messages_from_rows`` of 50 rows of each kind, as a page read gets them;
- ``cursor``: signing a page's cursor and checking it (``CursorCodec``, one scope).

To compare two versions of core, run it with ``PYTHONPATH=<other checkout>/core/src``.
"""

from __future__ import annotations

import argparse
import os
import time
import timeit
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from threadkeep import CursorCodec, Message, ToolCall

try:  # the row helpers of threadkeep.driver (issue 13)
    from threadkeep.driver import Records

    def _prepare(message: Message) -> Any:
        return _RECORDS.prepare(message)

    def _page(rows: list[Any]) -> Any:
        return _RECORDS.messages_from_rows(rows)

    _RECORDS = Records(Message)
except ImportError:  # an older checkout (PYTHONPATH=<other checkout>/core/src): Store's
    from threadkeep import Store

    class _Limits:
        max_message_bytes = 16 * 1024 * 1024
        message_model = Message

    def _prepare(message: Message) -> Any:
        return Store.prepare(_Limits(), message)  # type: ignore[arg-type]

    def _page(rows: list[Any]) -> Any:
        return Store.messages_from_rows(_Limits(), rows)  # type: ignore[arg-type]


def _messages() -> dict[str, Message]:
    chat = uuid.uuid4()
    return {
        "short": Message(role="user", content="message 1", agui_id="a1", chat_id=chat),
        "1 KB + tool call": Message(
            role="assistant",
            content="y" * 1000,
            agui_id="b1",
            chat_id=chat,
            metadata={"model": "m-1", "usage": {"input": 120, "output": 80}, "tags": ["a"]},
            tool_calls=[ToolCall(name="search", arguments='{"q": "weather"}', content="sunny")],
        ),
    }


def _timed(op: Callable[[], Any], reps: int, number: int) -> float:
    """Minimum CPU seconds per call of ``op`` over ``reps`` repetitions of ``number`` calls."""
    timer = timeit.Timer(op, timer=time.process_time)
    return min(timer.repeat(reps, number)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="repetitions (the minimum is kept)")
    parser.add_argument("--number", type=int, default=2000, help="calls per repetition")
    args = parser.parse_args()
    now = datetime.now(UTC)
    results: list[tuple[str, float]] = []
    for name, message in _messages().items():
        results.append(
            (
                f"prepare, {name}",
                _timed(lambda m=message: _prepare(m), args.reps, args.number),
            )
        )
        body = _prepare(message).body
        rows = [(message.chat_id, seq, 0, now, now, None, body) for seq in range(1, 51)]
        page_number = max(1, args.number // 50)
        results.append(
            (
                f"page of 50, {name}",
                _timed(lambda r=rows: _page(r), args.reps, page_number),
            )
        )
    codec = CursorCodec(os.urandom(32))
    scope = {"kind": "messages", "chat_id": str(uuid.uuid4()), "filter": {"roles": None}}

    def cursor_round_trip() -> None:
        codec.decode(codec.encode(scope, 500_001), scope)

    results.append(("cursor encode + decode", _timed(cursor_round_trip, args.reps, args.number)))
    width = max(len(name) for name, _ in results)
    print(f"{'operation':<{width}}  cpu us/op")
    for name, seconds in results:
        print(f"{name:<{width}}  {seconds * 1e6:9.2f}")
    print(f"(CPU time, minimum of {args.reps} repetitions)")


if __name__ == "__main__":
    main()
