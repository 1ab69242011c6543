"""``import --format claude-code`` holds one session at a time, not the folder (issue 11).

The first pass converts and checks every session and keeps an outline; the second reads
each session again and writes it. The ``tracemalloc`` peak of importing a folder of 400
sessions grows by a small fraction of a session's size over that of 50 (a bounded cache
and the outline): a memory bound, not a timing. SQLite keeps the stored rows outside
Python's allocator, so they do not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from threadkeep import InvalidArgument, open_store
from threadkeep._importers import claude_code
from threadkeep._importers.claude_code import import_claude_code

SMALL, LARGE = 50, 400
PADDING = "x" * 60_000  # each answer ~60 KB, as real sessions' tool results weigh


def _line(session: str, **fields: object) -> str:
    base = {"sessionId": session, "isSidechain": False, "cwd": "/w", "version": "2.1.0"}
    return json.dumps({**base, **fields}, separators=(",", ":"))


def session_lines(session: str) -> list[str]:
    """A prompt, a ``Task`` call answered by a subagent, and an answer."""
    call = {"type": "tool_use", "id": f"t-{session}", "name": "Task", "input": {"prompt": "go"}}
    result = {"type": "tool_result", "tool_use_id": f"t-{session}", "content": "agent said"}
    return [
        _line(session, type="user", uuid=f"p-{session}", parentUuid=None,
              message={"role": "user", "content": f"question {session}"}),
        _line(session, type="assistant", uuid=f"a-{session}", parentUuid=f"p-{session}",
              message={"id": f"m-{session}", "role": "assistant", "content": [call]}),
        _line(session, type="user", uuid=f"r-{session}", parentUuid=f"a-{session}",
              message={"role": "user", "content": [result]},
              toolUseResult={"agentId": f"ag-{session}"}),
        _line(session, type="assistant", uuid=f"b-{session}", parentUuid=f"r-{session}",
              message={"id": f"n-{session}", "role": "assistant",
                       "content": [{"type": "text", "text": f"answer {session} {PADDING}"}]}),
    ]  # fmt: skip


def project(root: Path, sessions: int) -> Path:
    """A project folder of ``sessions`` sessions, each with a subagent file."""
    for index in range(sessions):
        name = f"s{index:05d}"
        folder = root / name / "subagents"
        folder.mkdir(parents=True)
        (root / f"{name}.jsonl").write_text("\n".join(session_lines(name)) + "\n")
        agent = [
            _line(name, type="user", uuid=f"ap-{name}", parentUuid=None, isSidechain=True,
                  agentId=f"ag-{name}", message={"role": "user", "content": "go"}),
        ]  # fmt: skip
        (folder / f"agent-ag-{name}.jsonl").write_text("\n".join(agent) + "\n")
    return root


async def import_peak(path: Path, database: Path) -> tuple[int, int]:
    """The traced peak (bytes) of importing ``path`` into a new SQLite file, and the chats."""
    async with open_store(f"sqlite+aiosqlite:///{database}") as store:
        tracemalloc.start()
        try:
            report = await import_claude_code(store, path, user_id="u")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, report.chats_created


_MEASURE = """
import asyncio, importlib.util, sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("claude_code_memory", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)


async def main(root: Path) -> None:
    await module.import_peak(module.project(root / "warm", 3), root / "warm.db")  # caches
    small = await module.import_peak(module.project(root / "s", module.SMALL), root / "s.db")
    large = await module.import_peak(module.project(root / "l", module.LARGE), root / "l.db")
    print(*small, *large)


asyncio.run(main(Path(sys.argv[2])))
"""


def test_memory_does_not_grow_with_the_number_of_sessions(tmp_path: Path) -> None:
    # Measured in a fresh interpreter: in the suite's process, what earlier tests left in
    # global caches and registries (a CI run measured 13.8 KB a session, 3.4 KB alone)
    # would count against the importer.
    child = subprocess.run(
        [sys.executable, "-c", _MEASURE, __file__, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    small, small_chats, large, large_chats = map(int, child.stdout.split())
    assert (small_chats, large_chats) == (2 * SMALL, 2 * LARGE)  # each session and its agent
    per_session = (large - small) / (LARGE - SMALL)
    print(f"peak {small:,} -> {large:,} bytes ({large / small:.2f}x, {per_session:,.0f}/session)")
    # Holding the sessions would cost each one's text at least twice (its lines, then its
    # messages): 120 KB. What grows is the outline (~100 bytes a session) and
    # pydantic_core's string cache (a global of the strings it parsed, at most ~1 MB).
    assert per_session < len(PADDING) / 10, (small, large)


async def test_the_subagent_is_still_linked_to_its_task_call(tmp_path: Path) -> None:
    root = project(tmp_path / "p", 2)
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'db'}") as store:
        await import_claude_code(store, root, user_id="u")
        chat = await store.find_chat("u", "claude-code:s00001")
        agent = await store.find_chat("u", "claude-code:s00001/agent-ag-s00001")
        assert chat is not None
        assert agent is not None
        call = (await store.list_messages(chat.chat_id)).items[1].tool_calls[0]
        assert call.model_extra == {"subagent_thread_id": "claude-code:s00001/agent-ag-s00001"}
        assert agent.metadata["claude_code"]["parent_tool_call_id"] == "t-s00001"


async def test_a_malformed_line_in_the_last_session_writes_nothing(tmp_path: Path) -> None:
    root = project(tmp_path / "p", 3)
    (root / "s00002.jsonl").write_text(session_lines("s00002")[0] + "\n{not json\n")
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'db'}") as store:
        with pytest.raises(InvalidArgument, match=r"s00002\.jsonl: line 2 is not JSON"):
            await import_claude_code(store, root, user_id="u")
        assert (await store.list_chats({"user_id": "u"})).items == []


async def test_a_session_changed_between_the_passes_stops_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "p", 3)
    real = claude_code._convert
    calls: list[Path] = []

    def convert_then_touch(file: Path, max_bytes: int) -> object:
        calls.append(file)
        if len(calls) == 4:  # the second pass has read s00000: s00001 changes now
            changed = root / "s00001" / "subagents" / "agent-ag-s00001.jsonl"
            os.utime(changed, ns=(1, 1))
        return real(file, max_bytes)

    monkeypatch.setattr(claude_code, "_convert", convert_then_touch)
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'db'}") as store:
        with pytest.raises(InvalidArgument, match=r"s00001\.jsonl changed during the import"):
            await import_claude_code(store, root, user_id="u")
        chats = {c.thread_id for c in (await store.list_chats({"user_id": "u"})).items}
        assert chats == {"claude-code:s00000", "claude-code:s00000/agent-ag-s00000"}
        monkeypatch.setattr(claude_code, "_convert", real)
        again = await import_claude_code(store, root, user_id="u")  # a re-run: the rest
        assert (again.chats_present, again.chats_created) == (2, 4)
