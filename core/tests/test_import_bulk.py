"""The OpenAI importer's write step: bulk load, and a re-import proven by one read per chat."""

from __future__ import annotations

import json

import pytest

from threadkeep import IdempotencyConflict, open_store
from threadkeep._importers import _write as write_step
from threadkeep._importers import openai as openai_importer
from threadkeep._importers.openai import import_openai, record_digest


def _record(index: int, turns: int) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "system", "content": "be brief"}]
    for n in range(turns):
        call = {"id": f"c{index}-{n}", "type": "function"}
        call["function"] = {"name": "f", "arguments": json.dumps({"n": n})}
        messages += [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}-{n}", "content": f"answer {n}"},
        ]
    return {"id": f"conv-{index}", "messages": messages}


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, memory_url: str, sqlite_url: str) -> str:
    return memory_url if request.param == "memory" else sqlite_url


async def test_reimport_converts_nothing_and_reads_one_chat_per_record(tmp_path, url, monkeypatch):
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(_record(i, 3)) + "\n" for i in range(4)))
    async with open_store(url) as store:
        first = await import_openai(store, path, user_id="u")
        assert (first.chats_created, first.messages_created, first.tool_calls_created) == (
            4,
            40,
            12,
        )

        def no_conversion(*args: object, **kwargs: object) -> None:
            raise AssertionError("a record proven present was converted again")

        monkeypatch.setattr(openai_importer, "_conversation", no_conversion)
        again = await import_openai(store, path, user_id="u")
        assert (again.chats_present, again.messages_present, again.tool_calls_present) == (
            4,
            40,
            12,
        )
        assert again.chats_created == again.messages_created == 0
        chat = await store.find_chat("u", "openai:h.jsonl:id=conv-2")
        assert chat is not None
        assert chat.metadata["source"]["digest"] == record_digest(_record(2, 3))
        page = await store.list_messages(chat.chat_id, limit=200)
        assert [m.agui_id for m in page.items] == [f"openai:{n}" for n in range(10)]


async def test_a_grown_record_loads_only_its_new_messages(tmp_path, url):
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(_record(0, 2)) + "\n" + json.dumps(_record(1, 1)) + "\n")
    async with open_store(url) as store:
        await import_openai(store, path, user_id="u")
        path.write_text(json.dumps(_record(0, 3)) + "\n" + json.dumps(_record(1, 1)) + "\n")
        report = await import_openai(store, path, user_id="u")
        assert (report.messages_created, report.messages_present) == (3, 7 + 4)
        assert (report.tool_calls_created, report.tool_calls_present) == (1, 2 + 1)
        chat = await store.find_chat("u", "openai:h.jsonl:id=conv-0")
        assert chat is not None
        assert chat.metadata["source"]["digest"] == record_digest(_record(0, 3))
        page = await store.list_messages(chat.chat_id, limit=200)
        assert [m.content for m in page.items][-3:] == ["question 2", "", "answer 2"]


async def test_a_changed_message_is_refused_and_the_old_proof_stays(tmp_path, url):
    path = tmp_path / "h.jsonl"
    record = _record(0, 2)
    path.write_text(json.dumps(record) + "\n")
    async with open_store(url) as store:
        await import_openai(store, path, user_id="u")
        changed = json.loads(json.dumps(record))
        changed["messages"][1]["content"] = "another question"
        path.write_text(json.dumps(changed) + "\n")
        with pytest.raises(IdempotencyConflict, match="imported before with different content"):
            await import_openai(store, path, user_id="u")
        chat = await store.find_chat("u", "openai:h.jsonl:id=conv-0")
        assert chat is not None
        assert chat.metadata["source"]["digest"] == record_digest(record)
        page = await store.list_messages(chat.chat_id, limit=200)
        assert page.items[1].content == "question 0"
        assert len(page.items) == 7


async def test_a_long_record_goes_in_several_batches(tmp_path, memory_url, monkeypatch):
    monkeypatch.setattr(write_step, "LOAD_BATCH", 4)
    path = tmp_path / "long.json"
    path.write_text(json.dumps([_record(0, 5)]))
    async with open_store(memory_url) as store:
        report = await import_openai(store, path, user_id="u")
        assert report.messages_created == 16
        chat = await store.find_chat("u", "openai:long.json:id=conv-0")
        assert chat is not None
        seqs = [m.seq for m in (await store.list_messages(chat.chat_id, limit=200)).items]
        assert seqs == sorted(seqs)
        assert len(seqs) == 16


async def test_a_large_json_lines_file_is_streamed(tmp_path, memory_url, monkeypatch):
    from threadkeep._importers import _files

    monkeypatch.setattr(_files, "STREAM_BYTES", 200)
    monkeypatch.setattr(write_step, "STREAM_BYTES", 200)

    def never(path: object) -> None:
        raise AssertionError("a large JSON Lines file was read whole")

    monkeypatch.setattr(_files, "read_records", never)
    converted: list[int] = []
    real = openai_importer._conversation

    def counting(record: object, file_name: str, index: int, *rest: object) -> object:
        converted.append(index)
        return real(record, file_name, index, *rest)

    monkeypatch.setattr(openai_importer, "_conversation", counting)
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(json.dumps(_record(i, 2)) for i in range(5)) + "\n\n")
    async with open_store(memory_url) as store:
        report = await import_openai(store, path, user_id="u")
        # Checked in the first pass, converted again to write in the second: nothing kept.
        assert converted == [0, 1, 2, 3, 4] * 2
        assert (report.chats_created, report.messages_created) == (5, 35)
        chat = await store.find_chat("u", "openai:big.jsonl:id=conv-4")
        assert chat is not None
        assert len((await store.list_messages(chat.chat_id, limit=200)).items) == 7
        converted.clear()
        again = await import_openai(store, path, user_id="u")
        assert converted == []
        assert (again.chats_present, again.messages_present) == (5, 35)


async def test_a_bad_line_in_a_streamed_file_writes_nothing(tmp_path, memory_url, monkeypatch):
    from threadkeep import InvalidArgument
    from threadkeep._importers import _files

    monkeypatch.setattr(_files, "STREAM_BYTES", 200)
    monkeypatch.setattr(write_step, "STREAM_BYTES", 200)
    path = tmp_path / "big.jsonl"
    lines = [json.dumps(_record(i, 1)) for i in range(4)]
    lines[3] = '{"messages": [{"role": "wizard", "content": "x"}]}'
    path.write_text("\n".join(lines) + "\n")
    async with open_store(memory_url) as store:
        with pytest.raises(InvalidArgument, match=r"big.jsonl: record 3 \(line 4\)"):
            await import_openai(store, path, user_id="u")
        assert (await store.list_chats({"user_id": "u"})).items == []
        path.write_text("\n".join(lines[:3]) + "\n{not json\n")
        with pytest.raises(InvalidArgument, match="line 4 does not parse"):
            await import_openai(store, path, user_id="u")
        assert (await store.list_chats({"user_id": "u"})).items == []
