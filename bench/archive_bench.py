"""Memory and time of cold archiving versus chat size (docs/archive.md, "Memory bound").

Run from the repository root:

    python3 -m uv run python bench/archive_bench.py                 # 1k, 10k, 100k messages
    python3 -m uv run python bench/archive_bench.py --counts 1000000
    python3 -m uv run python bench/archive_bench.py --synthetic --counts 10000,100000,1000000

Each size runs in a fresh subprocess: a SQLite hot store (its pages live in C, outside the
Python heap, as a server database's would) is filled with one chat of N messages (about 300
bytes of JSON each, every tenth with a tool call), then ``archive_chat`` writes it to a
``file://`` archive and a read rehydrates it. For both directions the line shows the Python
heap peak above the baseline (``tracemalloc``), the process's peak RSS, the time, and the
time as a ratio to the raw driver reading the same rows (``_scan_messages`` in batches of
1,000, the floor any archiver pays). A bounded archiver shows flat peaks as N grows.
``--synthetic`` replaces the SQLite store by one that generates the chat on scan and drops
restored rows, so a 1,000,000-message chat measures the archiver alone in minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from threadkeep import Archiver, FileArchive, Message, Store, ToolCall, open_store
from threadkeep._memory import MemoryDriver
from threadkeep._registry import installed_archive_schemes

BATCH = 1000


def _message(i: int) -> Message:
    arguments = json.dumps({"q": i})
    calls = [ToolCall(agui_id=f"c{i}", name="lookup", arguments=arguments)] if i % 10 == 0 else []
    return Message(
        role="user" if i % 2 else "assistant",
        agui_id=f"m{i}",
        content=f"message {i}: " + "lorem ipsum dolor sit amet " * 8,
        tool_calls=calls,
    )


class SyntheticDriver(MemoryDriver):
    """A memory driver whose one big chat's messages are generated on scan, not stored.

    It isolates the archiver's own memory at any size (``--synthetic``): scans synthesize
    the requested batch, restores count and drop, and the hot-row delete keeps nothing.
    """

    def __init__(self, url: str, count: int) -> None:
        super().__init__(url)
        self.count = count

    async def scan_messages(self, chat_id, after_seq, limit, *, hidden=True):
        last = min(self.count, after_seq + limit)
        return [
            _message(i - 1).model_copy(update={"chat_id": chat_id, "seq": i})
            for i in range(after_seq + 1, last + 1)
        ]

    async def restore_messages(self, chat_id, messages) -> int:
        return len(messages)

    async def index_archived_ids(self, chat_id, item_ids) -> int:
        return len(item_ids)  # the id index is the hot store's data, not the archiver's


async def _synthetic(count: int, directory: Path) -> dict[str, float]:
    async with (
        Store(SyntheticDriver("memory://", count)) as store,
        FileArchive(f"file://{directory / 'archive'}") as archive,
    ):
        chat = await store.create_chat("bench", f"n{count}")
        raw = await _raw_scan(store, chat.chat_id)
        archiver = Archiver(store, archive)
        installed_archive_schemes()  # load the plugins before measuring
        tracemalloc.start()
        started = time.perf_counter()
        archive_mib = await _heap_peak(archiver.archive_chat(chat.chat_id))
        archive_s = time.perf_counter() - started
        started = time.perf_counter()
        read_mib = await _heap_peak(store.list_messages(chat.chat_id, limit=50))
        read_s = time.perf_counter() - started
        tracemalloc.stop()
        result = await archiver.archive_chat(chat.chat_id)
        return {
            "messages": count,
            "bundle_mib": result.size / 2**20,
            "raw_scan_s": raw,
            "archive_s": archive_s,
            "archive_heap_mib": archive_mib,
            "rehydrate_s": read_s,
            "rehydrate_heap_mib": read_mib,
            "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


async def _raw_scan(store, chat_id) -> float:
    start, after = time.perf_counter(), 0
    while batch := await store.primitives.scan_messages(chat_id, after, BATCH):
        after = batch[-1].seq
    return time.perf_counter() - start


async def _heap_peak(operation) -> float:
    """Return the Python heap peak above the level before ``operation``, in MiB."""
    tracemalloc.reset_peak()
    baseline, _ = tracemalloc.get_traced_memory()
    await operation
    return (tracemalloc.get_traced_memory()[1] - baseline) / 2**20


async def _one(count: int, directory: Path) -> dict[str, float]:
    url = f"sqlite+aiosqlite:///{directory / 'hot.db'}"
    async with open_store(url) as store, FileArchive(f"file://{directory / 'archive'}") as archive:
        chat = await store.create_chat("bench", f"n{count}")
        for start in range(0, count, BATCH):
            await store.append_messages(
                chat.chat_id, [_message(i) for i in range(start, min(count, start + BATCH))]
            )
        raw = await _raw_scan(store, chat.chat_id)
        archiver = Archiver(store, archive)
        started = time.perf_counter()
        result = await archiver.archive_chat(chat.chat_id)
        archive_s = time.perf_counter() - started
        started = time.perf_counter()
        page = await store.list_messages(chat.chat_id, limit=50)
        read_s = time.perf_counter() - started
        # memory: the same two moves again, under tracemalloc (which slows Python down)
        tracemalloc.start()
        archive_mib = await _heap_peak(archiver.archive_chat(chat.chat_id))
        read_mib = await _heap_peak(store.list_messages(chat.chat_id, limit=50))
        tracemalloc.stop()
        assert page.items[-1].agui_id == f"m{count - 1}"
        return {
            "messages": count,
            "bundle_mib": result.size / 2**20,
            "raw_scan_s": raw,
            "archive_s": archive_s,
            "archive_heap_mib": archive_mib,
            "rehydrate_s": read_s,
            "rehydrate_heap_mib": read_mib,
            "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }


def _child(count: int, synthetic: bool) -> None:
    run = _synthetic if synthetic else _one
    with tempfile.TemporaryDirectory(prefix="tk-archive-bench-") as directory:
        print(json.dumps(asyncio.run(run(count, Path(directory)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,10000,100000", help="comma-separated sizes")
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="generate the chat on scan instead of storing it (archiver memory alone; "
        "timings under tracemalloc)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.synthetic)
        return
    header = (
        f"{'messages':>9} {'bundle':>8} {'archive':>8} {'x raw':>6} {'heap pk':>8} "
        f"{'rehydr.':>8} {'x raw':>6} {'heap pk':>8} {'RSS pk':>8}"
    )
    print(header)
    for count in (int(c) for c in args.counts.split(",")):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(count)]
            + (["--synthetic"] if args.synthetic else []),
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"{count:>9} {r['bundle_mib']:>6.1f}Mi {r['archive_s']:>7.1f}s "
            f"{r['archive_s'] / r['raw_scan_s']:>6.1f} {r['archive_heap_mib']:>6.1f}Mi "
            f"{r['rehydrate_s']:>7.1f}s {r['rehydrate_s'] / r['raw_scan_s']:>6.1f} "
            f"{r['rehydrate_heap_mib']:>6.1f}Mi {r['rss_peak_mib']:>6.0f}Mi",
            flush=True,
        )


if __name__ == "__main__":
    main()
