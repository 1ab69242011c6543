"""A large OpenAI JSON array is streamed a record at a time (issue 11, "Memory").

Files larger than ``_files.STREAM_BYTES`` are streamed; the threshold is made small here so
that small files take the streamed path. The memory test compares ``tracemalloc`` peaks of
an array of 800 records with one of 100: a bound, not a timing.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from threadkeep import InvalidArgument, open_store
from threadkeep._importers import _bulk, _files
from threadkeep._importers import _write as write_step
from threadkeep._importers.openai import import_openai

PADDING = "p" * 30_000


def record(index: int) -> dict[str, object]:
    return {
        "id": f"conv-{index}",
        "messages": [
            {"role": "user", "content": f"question {index} \ud83d\ude00"},
            {"role": "assistant", "content": f"answer {index} {PADDING}", "n": 10**30},
        ],
    }


@pytest.fixture(autouse=True)
def streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "STREAM_BYTES", 200)
    monkeypatch.setattr(write_step, "STREAM_BYTES", 200)

    def never(path: object) -> None:
        raise AssertionError("a large JSON array was read whole")

    monkeypatch.setattr(_files, "read_records", never)


async def test_a_large_array_is_streamed_and_stores_what_json_loads_reads(
    tmp_path: Path, sqlite_url: str
) -> None:
    path = tmp_path / "big.json"
    path.write_text("\ufeff" + json.dumps([record(i) for i in range(5)], indent=1))
    async with open_store(sqlite_url) as store:
        report = await import_openai(store, path, user_id="u")
        assert (report.chats_created, report.messages_created) == (5, 10)
        chat = await store.find_chat("u", "openai:big.json:id=conv-3")
        assert chat is not None
        user, answer = (await store.list_messages(chat.chat_id)).items
        assert user.content == "question 3 \U0001f600"
        assert answer.metadata["openai"] == {"n": 10**30}
        again = await import_openai(store, path, user_id="u")
        assert (again.chats_present, again.messages_present) == (5, 10)


async def test_a_malformed_large_array_writes_nothing_and_names_where(
    tmp_path: Path, memory_url: str
) -> None:
    path = tmp_path / "big.json"
    text = json.dumps([record(i) for i in range(3)])
    path.write_text(text[:-40] + "}" + text[-40:])  # a stray brace in record 2
    async with open_store(memory_url) as store:
        with pytest.raises(
            InvalidArgument,
            match=r"big\.json is not valid JSON: .* line 1 column \d+ \(byte \d+, item 2\)",
        ):
            await import_openai(store, path, user_id="u")
        assert (await store.list_chats({"user_id": "u"})).items == []


async def _peak(path: Path, url: str) -> tuple[int, int]:
    async with open_store(url) as store:
        tracemalloc.start()
        try:
            report = await import_openai(store, path, user_id="u")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, report.messages_created


def _array(path: Path, records: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        out.write(",".join(json.dumps(record(i)) for i in range(records)))
        out.write("]")
    return path


async def test_memory_does_not_grow_with_the_records_of_an_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bulk, "WRITE_MESSAGES", 50)  # the batch fills in the small input too
    monkeypatch.setattr(write_step, "LOOKUP_BATCH", 25)
    await _peak(_array(tmp_path / "warm.json", 5), f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")
    small, small_messages = await _peak(
        _array(tmp_path / "s.json", 100), f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
    )
    large, large_messages = await _peak(
        _array(tmp_path / "l.json", 800), f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    )
    assert (small_messages, large_messages) == (200, 1600)
    print(f"peak {small:,} -> {large:,} bytes ({large / small:.2f}x)")
    assert large <= 1.5 * small, (small, large)
